// Turns a finished kernel record into a KernelEvent: the rule's kind, severity and action, the
// named captures (device, pid, task, uid, code, block, cgroup ...), the catalog's word on an Xid
// code or a RAS block, refining rules, the Slurm job of a cgroup path, and a summary line.
#pragma once

#include <string>

#include "collector/kernel_rules.h"
#include "collector/open_record.h"
#include "common/model.h"

namespace triage::collector {

class EventBuilder {
 public:
  EventBuilder(const KernelRules& rules, std::string host) : rules_(rules), host_(std::move(host)) {}

  // Everything but the verbatim lines and the summary: enough to decide whether the event folds
  // into an earlier one (the common case in a flood, where the rest would be thrown away).
  KernelEvent build(const OpenRecord& record) const;
  // Adds the summary and the record's lines (made safe to display).
  void complete(KernelEvent& e, const OpenRecord& record) const;
  // Appends the record's lines to an event it was folded into, while there is room.
  static void append_lines(KernelEvent& into, const OpenRecord& record);

 private:
  void apply_capture(KernelEvent& e, const std::string& name, const std::string& value) const;
  void apply_catalog(KernelEvent& e, const KernelRule& rule) const;
  void apply_job(KernelEvent& e) const;
  // Indexes of the refining rules that apply to the record, in load order.
  std::vector<size_t> refiners_that_apply(const OpenRecord& r) const;
  std::string render_summary(const std::string& tmpl, const KernelEvent& e) const;

  const KernelRules& rules_;
  std::string host_;
};

}  // namespace triage::collector
