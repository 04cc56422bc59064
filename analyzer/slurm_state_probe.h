// Asking Slurm whether a job is still alive: `squeue -h -j <id> -o %T` with a short timeout, run
// after the privilege drop (as the job owner). Never blocks the analysis for long: a controller
// that does not answer means "unavailable".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace triage {

struct SlurmStateAnswer {
  bool available = false;  // squeue ran and answered
  std::string state;       // "RUNNING", ...; "ENDED" when squeue no longer lists the job
  std::string detail;      // why unavailable
};

// `squeue` is looked up in PATH unless `squeue_path` is given.
SlurmStateAnswer query_squeue_state(uint64_t job_id, int timeout_ms,
                                    const std::string& squeue_path = "");

}  // namespace triage
