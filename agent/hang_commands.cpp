#include "agent/hang_commands.h"

#include <stdexcept>

namespace triage::agent {

namespace {

// Job 0 does not exist; to scancel an empty or zero id would be a bug upstream, never a request.
std::string job_arg(uint64_t job_id) {
  if (job_id == 0) throw std::invalid_argument("hang action for job 0");
  return std::to_string(job_id);
}

}  // namespace

std::vector<std::string> cancel_job_argv(uint64_t job_id) {
  return {"scancel", job_arg(job_id)};
}

std::vector<std::string> requeue_job_argv(uint64_t job_id) {
  return {"scontrol", "requeue", job_arg(job_id)};
}

std::vector<std::string> set_admin_comment_argv(uint64_t job_id, std::string_view value) {
  return {"scontrol", "update", "JobId=" + job_arg(job_id), "AdminComment=" + std::string(value)};
}

}  // namespace triage::agent
