#include "collector/xid_cause_tracker.h"

namespace triage::collector {

namespace {
constexpr size_t kMaxDevices = 256;
}

void XidCauseTracker::name_cause(KernelEvent& e, int64_t time) const {
  if (e.kind != "nvidia-xid" || !e.code || e.device.empty()) return;
  bool known = false;
  const XidInfo& info = rules_.xid(*e.code, known);
  if (info.cause_within_usec <= 0) return;
  const auto it = last_.find(e.device);
  if (it == last_.end()) return;
  const bool in_window =
      time < 0 || it->second.time < 0 || time - it->second.time <= info.cause_within_usec;
  if (in_window) e.cause = it->second.id;
}

bool XidCauseTracker::may_be_cause(const std::string& kind, const std::optional<int64_t>& code,
                                   const std::string& device) const {
  // Only Xids that are not themselves consequences can be a cause, and only if some code wants one.
  if (kind != "nvidia-xid" || !code || device.empty()) return false;
  if (rules_.longest_cause_window_usec() == 0) return false;
  bool known = false;
  return rules_.xid(*code, known).cause_within_usec == 0;
}

void XidCauseTracker::remember(const std::string& device, const std::string& id, int64_t time) {
  if (last_.size() >= kMaxDevices && last_.count(device) == 0) last_.erase(last_.begin());
  last_[device] = Seen{id, time};
}

void XidCauseTracker::expire(int64_t now) {
  if (now < 0) return;
  const int64_t window = rules_.longest_cause_window_usec();
  for (auto it = last_.begin(); it != last_.end();) {
    if (it->second.time >= 0 && now - it->second.time > window) {
      it = last_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace triage::collector
