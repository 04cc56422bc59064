// The Slurm commands a hang action runs, as argv vectors (run without a shell, with a clean
// environment: SCANCEL_* and SLURM_* variables of the agent's own would change what they do).
// Nothing here runs anything. Each names one job attempt (agent/slurm/job_ref.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/slurm/job_ref.h"

namespace triage::agent {

// `scancel <job>` with no --signal: Slurm's own termination path (scancel(1), NOTES: SIGCONT and
// SIGTERM to every step, the job's KillWait, then SIGKILL), the same a time limit takes, so a job
// that checkpoints on SIGTERM still can. --signal would bypass slurmctld and leave the job
// RUNNING; --full/--batch only matter with --signal.
std::vector<std::string> cancel_job_argv(const JobRef& job);

// `scontrol requeue <job>`: back to PENDING with the same id (Slurm refuses non-batch jobs and
// jobs that do not allow requeue; hang_action.h checks both first).
std::vector<std::string> requeue_job_argv(const JobRef& job);

// `scontrol update JobId=<job> AdminComment=<value>` (one argv element: no quoting needed).
std::vector<std::string> set_admin_comment_argv(const JobRef& job, std::string_view value);

}  // namespace triage::agent
