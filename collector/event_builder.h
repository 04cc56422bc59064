// Turns a finished kernel record into a KernelEvent: the rule's kind, severity and action, the
// named captures (device, pid, task, uid, code, block, cgroup ...), the catalog's word on an Xid
// code or a RAS block, refining rules, the Slurm job of a cgroup path, and a summary line.
//
// It works in two steps because of floods: identify() computes only what decides whether an
// occurrence folds into an earlier event (cheap), build() the whole event (only for the first
// occurrence of a burst; the rest would be thrown away).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "collector/kernel_rules.h"
#include "collector/open_record.h"
#include "common/model.h"

namespace triage::collector {

struct EventIdentity {
  const std::string* kind = nullptr;  // into the rules, which outlive every event
  Severity severity = Severity::kWarning;
  const std::string* action = nullptr;
  const std::string* remedy = nullptr;
  std::string device;
  std::optional<int64_t> code;
  std::string block;
  std::vector<size_t> refiners;  // positions in the rule's refined_by that apply, in load order
};

class EventBuilder {
 public:
  EventBuilder(const KernelRules& rules, std::string host)
      : rules_(rules), host_(std::move(host)) {}

  EventIdentity identify(const OpenRecord& record) const;
  // The complete event, lines and summary included.
  KernelEvent build(const OpenRecord& record, const EventIdentity& identity) const;
  // Adds a later occurrence of the same flood to its event: count, last time, lines while room.
  static void fold_into(KernelEvent& into, const OpenRecord& record);
  // What a flood is recognised by: rule, identity, boot, and the first line modulo numbers.
  std::string flood_key(const OpenRecord& record, const EventIdentity& identity) const;

 private:
  void apply_capture(KernelEvent& e, const std::string& name, const std::string& value) const;
  void apply_catalog_fields(KernelEvent& e, const KernelRule& rule) const;
  void apply_job(KernelEvent& e) const;
  std::string render_summary(const std::string& tmpl, const KernelEvent& e) const;
  const std::string* capture(const OpenRecord& r, const EventIdentity* identity,
                             const char* name) const;

  const KernelRules& rules_;
  std::string host_;
};

}  // namespace triage::collector
