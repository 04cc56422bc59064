// Analysing one located job, as its owner: read the log (and, in full mode, the other logs of the
// job directory), learn Slurm's view, diagnose, and let later stages (the TSDB playbooks) add their
// section. Problems with the input become notes in the report, never a crash.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>

#include "analyzer/diagnosis.h"
#include "analyzer/job_locator.h"
#include "analyzer/log_scanner.h"
#include "common/model.h"

namespace triage {

struct AnalysisOptions {
  std::string mode = "basic";      // basic | full
  std::string slurm_state_option;  // --slurm-state: "" = not given, "none" = do not ask Slurm
  int64_t now_usec = 0;
  StallPolicy stall;
  int squeue_timeout_ms = 3000;
  // Called after the diagnosis with the job directory open (-1 when there is none): the place where
  // the TSDB playbooks fill Triage::tsdb.
  std::function<void(Triage&, int job_dir_fd)> tsdb_hook;
};

struct JobReport {
  Triage triage;
  bool input_error = false;  // the log or the job could not be read
  mode_t log_mode = 0644;
};

JobReport analyze_job(const JobTarget& target, const ScanPlan& plan, const Evidence* evidence,
                      const AnalysisOptions& options);

}  // namespace triage
