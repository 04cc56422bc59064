#include "agent/requeue/attempt_check.h"

#include <optional>

namespace triage::agent {

namespace {

std::string task_text(const std::optional<uint32_t>& array, const std::optional<uint32_t>& task) {
  if (!array) return "no array task";
  return "array task " + std::to_string(*array) + "_" +
         (task ? std::to_string(*task) : std::string("(none)"));
}

// Slurm's base states of a job that has not ended (slurm_client.cpp's names).
bool not_ended(const std::string& state) {
  return state.empty() || state == "PENDING" || state == "RUNNING" || state == "SUSPENDED" ||
         state == "UNKNOWN";
}

}  // namespace

bool same_attempt(int restart_count, int64_t start_time, const JobFacts& shown) {
  if (shown.restart_count != restart_count) return false;
  return start_time == 0 || shown.start_time == 0 || shown.start_time == start_time;
}

std::string attempt_changed(const JobFacts& analysed, const JobFacts& now) {
  if (now.job_id != analysed.job_id) {
    return "Slurm answered with job " + std::to_string(now.job_id) + ", not " +
           std::to_string(analysed.job_id);
  }
  // The epilog alone may not know the array fields (22.05 does not hand them to it); slurmctld's
  // record always does, so only a known pair is compared.
  if (analysed.array_job_id &&
      (analysed.array_job_id != now.array_job_id || analysed.array_task_id != now.array_task_id)) {
    return "Slurm shows " + task_text(now.array_job_id, now.array_task_id) +
           ", the analysis was of " + task_text(analysed.array_job_id, analysed.array_task_id);
  }
  if (now.restart_count != analysed.restart_count) {
    return "Slurm shows restart " + std::to_string(now.restart_count) +
           " of the job, the analysis was of restart " + std::to_string(analysed.restart_count) +
           ": it was requeued since";
  }
  if (not_ended(now.state)) {
    return "Slurm shows the job " + (now.state.empty() ? std::string("in no state") : now.state) +
           ", not ended: that is not the attempt that was analysed";
  }
  // The epilog's start time is the agent's own clock, not comparable with slurmctld's.
  const int64_t analysed_start = analysed.source == "slurmctld" ? analysed.start_time : 0;
  if (!same_attempt(analysed.restart_count, analysed_start, now)) {
    return "Slurm shows the job started at " + std::to_string(now.start_time) +
           ", the analysed attempt at " + std::to_string(analysed.start_time);
  }
  return "";
}

}  // namespace triage::agent
