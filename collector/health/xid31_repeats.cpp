#include "collector/health/xid31_repeats.h"

#include <algorithm>
#include <set>

namespace triage::collector {

std::optional<Xid31Repeat> repeated_xid31_on_one_gpu(const std::vector<const KernelEvent*>& xids,
                                                     uint64_t min_bursts) {
  if (min_bursts == 0) return std::nullopt;
  std::vector<const KernelEvent*> faults;
  std::set<std::string> gpus;
  for (const KernelEvent* e : xids) {
    if (e == nullptr || e->kind != "nvidia-xid" || !e->code || *e->code != 31) continue;
    faults.push_back(e);
    gpus.insert(e->device);
  }
  if (faults.empty() || gpus.size() != 1) return std::nullopt;
  std::sort(faults.begin(), faults.end(),
            [](const KernelEvent* a, const KernelEvent* b) { return a->time_usec < b->time_usec; });
  Xid31Repeat r;
  r.device = *gpus.begin();
  int64_t burst_end = 0;
  for (const KernelEvent* e : faults) {
    // A folded event already stands for one burst of lines, from its first to its last.
    if (r.bursts == 0 || e->time_usec - burst_end > kXid31BurstGapUsec) ++r.bursts;
    burst_end = std::max({burst_end, e->time_usec, e->last_usec});
    r.ids.push_back(e->id);
  }
  if (r.bursts < min_bursts) return std::nullopt;
  return r;
}

}  // namespace triage::collector
