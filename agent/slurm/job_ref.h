// How the agent names one job attempt to Slurm's commands (docs/agent.md, "Job identity"). Slurm
// reads a bare id that is also an array's id as the whole array (job_str_signal, job_requeue2 in
// slurmctld's job_mgr.c), and slurmdbd matches a bare id against id_job, het_job_id and
// id_array_job at once (as_mysql_jobacct_process.c): `scancel 1234` with tasks 1234_0..1234_2
// cancels all three. Every argv builder (agent/live/hang_commands.h, agent/slurm/slurm_commands.h)
// takes a JobRef, and job_ref() is the one place that makes it.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "common/model.h"

namespace triage::agent {

struct JobRef {
  uint64_t job_id = 0;     // the record's own id: logs and state keys
  std::string controller;  // for scancel and scontrol: "4242", "4240_7"
  std::string accounting;  // for sacct -j and sacctmgr where jobid=: "4242", "4240_7", "4300+0"
};

// Why a job cannot be named as one attempt; the agent then does nothing to it and says this.
class JobRefError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The attempt `f` describes, as Slurm's commands take it:
//   a plain job             N      N
//   an array task           A_T    A_T     (both sides match exactly that task)
//   a het job's leader      J      J+0     (slurmctld acts on a het job as a whole, through its
//                                           leader; slurmdbd's J+0 is the leader's row alone)
// Throws JobRefError for job 0, an array record without a task id (a pending array's meta record:
// its bare id is the whole array), a task id without its array, and a het job's non-leader
// component (slurmctld requeues a het job only through its leader and refuses a pending
// component's signal).
JobRef job_ref(const JobFacts& f);

// The same for an identity read back from the agent's own state files: `controller` and
// `accounting` as job_ref() made them. Throws JobRefError for anything else.
JobRef job_ref_from_state(uint64_t job_id, const std::string& controller,
                          const std::string& accounting);

}  // namespace triage::agent
