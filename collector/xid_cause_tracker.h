// Links consequence Xids to what caused them. The driver follows a fatal Xid (79, 48, 94 ...) with
// Xid 45 ("preemptive cleanup, due to previous errors") for every channel it tears down; the
// catalog marks such codes with `cause_within`, and the latest other Xid on the same GPU within
// that window is named in the event's `cause`.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "collector/kernel_rules.h"
#include "common/model.h"

namespace triage::collector {

class XidCauseTracker {
 public:
  explicit XidCauseTracker(const KernelRules& rules) : rules_(rules) {}

  // Names the cause of `e` (first seen at record time `time`, -1 = unknown) when it is an Xid
  // whose catalog entry asks for one.
  void name_cause(KernelEvent& e, int64_t time) const;
  // Whether an Xid of this kind and code may later be named as a cause; then call remember()
  // with the id it ends up under after folding.
  bool may_be_cause(const std::string& kind, const std::optional<int64_t>& code,
                    const std::string& device) const;
  void remember(const std::string& device, const std::string& id, int64_t time);
  // Forgets Xids that can no longer be named as a cause at record time `now`.
  void expire(int64_t now);
  bool empty() const { return last_.empty(); }
  void clear() { last_.clear(); }

 private:
  struct Seen {
    std::string id;
    int64_t time = -1;
  };
  const KernelRules& rules_;
  std::map<std::string, Seen> last_;  // by device
};

}  // namespace triage::collector
