#include "common/live_cost.h"

namespace triage {

double gpu_hours(int64_t gpus, int64_t from_usec, int64_t to_usec) {
  if (gpus <= 0 || to_usec <= from_usec) return 0;
  return static_cast<double>(gpus) * static_cast<double>(to_usec - from_usec) / 3.6e9;
}

std::optional<double> gpu_hours_saved(const LiveRecord& live, const JobFacts& job) {
  if (live.action != "cancel" || live.action_usec <= 0 || !live.action_error.empty())
    return std::nullopt;
  if (job.start_time <= 0 || !job.time_limit_sec || !job.gpus) return std::nullopt;
  const int64_t limit_end_usec = (job.start_time + *job.time_limit_sec) * 1000000;
  return gpu_hours(*job.gpus, live.action_usec, limit_end_usec);
}

}  // namespace triage
