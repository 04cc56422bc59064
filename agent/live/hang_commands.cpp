#include "agent/live/hang_commands.h"

#include <stdexcept>

namespace triage::agent {

namespace {

// A JobRef that job_ref() did not make (empty) would be a bug upstream, never a request.
const std::string& job_arg(const JobRef& job) {
  if (job.controller.empty()) throw std::invalid_argument("hang action for no job");
  return job.controller;
}

}  // namespace

std::vector<std::string> cancel_job_argv(const JobRef& job) {
  return {"scancel", job_arg(job)};
}

std::vector<std::string> requeue_job_argv(const JobRef& job) {
  return {"scontrol", "requeue", job_arg(job)};
}

std::vector<std::string> set_admin_comment_argv(const JobRef& job, std::string_view value) {
  return {"scontrol", "update", "JobId=" + job_arg(job), "AdminComment=" + std::string(value)};
}

}  // namespace triage::agent
