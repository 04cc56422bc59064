// The catalog file format every rule set uses (log signatures, kernel rules, Xid and RAS catalogs,
// GPU thresholds). Rules are data: adding a failure class is an edit to a .rules file, never a
// recompile. The format is documented in docs/rules-format.md.
//
//   # comment
//   [signature oom-host]
//   priority = 40
//   pattern = \boom-kill\b
//   explain = The kernel's OOM killer ended a process because the node ran out of
//     memory.                       <- indented lines continue the previous value
//
// Parsing is format-only: which section types and keys exist is up to each catalog's loader, which
// reports its own errors through the same "file:line: message" shape.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"

namespace triage {

struct RuleEntry {
  std::string key;
  std::string value;
  int line = 0;
};

struct RuleSection {
  std::string type;  // "signature", "harmless", "kernel-rule", "xid", ...
  std::string id;
  std::string file;
  int line = 0;  // line of the [type id] header
  std::vector<RuleEntry> entries;

  // Every entry with this key, in file order.
  std::vector<const RuleEntry*> all(std::string_view key) const;
  // The first entry with this key, or nullptr.
  const RuleEntry* first(std::string_view key) const;
  // An error located at this section's header.
  InputError error(const std::string& message) const;
  // An error located at an entry of this section.
  InputError error(const RuleEntry& entry, const std::string& message) const;
};

struct RulesLoad {
  std::vector<RuleSection> sections;
  std::vector<InputError> errors;
  std::vector<std::string> files;  // every file read, in load order
};

// Parses one file's text. `file` is the name used in error messages.
RulesLoad parse_rules_text(std::string_view text, const std::string& file);

// Reads and parses one file (at most 8 MiB; larger files are an error, not a truncation).
RulesLoad parse_rules_file(const std::string& path);

// Loads layers in order: each element is a file or a directory (every *.rules file in it, sorted
// by name). A later section with the same type and id replaces the earlier one; a section whose
// only entry is `disable = true` removes it. Missing directories are skipped silently (an optional
// override directory need not exist); a missing file is an error.
RulesLoad load_rule_layers(const std::vector<std::string>& layers);

// The rule layers every program starts from: the shipped catalogs (SLURM_TRIAGE_DATADIR env, else
// the installed data directory, else the source tree's rules/), then /etc/slurm/triage.d (or
// SLURM_TRIAGE_RULES_OVERRIDE), then `extra` (e.g. --rules DIR).
std::vector<std::string> default_rule_layers(const std::vector<std::string>& extra = {});

}  // namespace triage
