// The metrics playbooks as data: one entry per playbook (its id, the number kept for output
// compatibility, its title, whether full mode adds it) and the choice of entries for a request.
// Which playbooks a failure class hands off to is the rules catalog's business, not this table's.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "analyzer/tsdb/tsdb.h"

namespace triage::tsdb {

struct Context;

struct PlaybookEntry {
  const char* id;
  int number;  // 1-7, as the JSON and the Markdown have always shown it
  const char* title;
  bool in_full_mode;  // full mode (and a request nothing else applies to) runs it
  // The playbook's queries (gather) followed by its verdict (judge).
  PlaybookResult (*run)(Context& ctx, std::vector<HardwareVerdict>& verdicts);
};

// Every playbook, in number order.
const std::vector<PlaybookEntry>& playbook_table();

// The ids a rules catalog may name as a class's playbooks.
std::vector<std::string> known_playbook_ids();

// The entry with this id or number, or nullptr.
const PlaybookEntry* find_playbook_entry(std::string_view id);
const PlaybookEntry* find_playbook_entry(int number);

// A result carrying the entry's id, number and title, for the playbook to fill.
PlaybookResult new_playbook(std::string_view id);

// Whether the request's class hands off to this playbook id.
bool hands_off_to(const TsdbRequest& req, std::string_view playbook_id);

// The label of a class's playbooks for the report: their ids joined by " + ", "health-check"
// when the class hands off to none.
std::string analysis_label(const std::vector<std::string>& class_playbooks);

// The ids the rules catalog in `layers` lists for `triage_class` (the `playbooks` key of its
// `[signature ...]` section); empty when the class or the key is absent.
std::vector<std::string> catalog_class_playbooks(const std::vector<std::string>& layers,
                                                 const std::string& triage_class);

}  // namespace triage::tsdb
