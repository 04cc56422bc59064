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

  KernelEvent build(const OpenRecord& record) const;

 private:
  void apply_capture(KernelEvent& e, const std::string& name, const std::string& value) const;
  void apply_catalog(KernelEvent& e, const KernelRule& rule) const;
  void apply_job(KernelEvent& e) const;
  std::string render_summary(const std::string& tmpl, const KernelEvent& e) const;

  const KernelRules& rules_;
  std::string host_;
};

}  // namespace triage::collector
