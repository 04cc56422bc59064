// From scanned logs, node evidence and Slurm's view to a verdict: the job's status, its primary
// failure with evidence, the consequences, the progress projection and the next steps.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/log_scanner.h"
#include "analyzer/progress_projection.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"
#include "common/model.h"

namespace triage {

struct DiagnosisInput : JobIdentity {
  const SignatureCatalog* catalog = nullptr;
  const ScanResult* scan = nullptr;              // null when the log could not be read
  std::vector<const ScanResult*> extra_scans;    // full mode: rank logs, Ray worker logs
  const RestoreFacts* worker_restore = nullptr;  // restore/fresh marker found in Ray worker logs
  // Full mode: the NCCL watchdog's numbers in the per-rank logs (extra_logs.h).
  const std::vector<CollectiveProgress>* extra_collectives = nullptr;
  // Full mode: each node's GPU clocks over the run from the TSDB, for the slowdown's node.
  const std::vector<NodeClockSeries>* node_clocks = nullptr;
  const Evidence* evidence = nullptr;
  std::string slurm_state;         // trusted Slurm state ("" = unknown)
  std::string slurm_state_source;  // evidence | option | squeue | unavailable
  int64_t now_usec = 0;
  int64_t log_mtime_usec = 0;
  std::string mode = "basic";
  bool has_tsdb_dir = false;  // <job dir>/prometheus exists
  StallPolicy stall;
  std::vector<std::string> notes;  // problems met while locating and reading
};

Triage diagnose(const DiagnosisInput& in);

// Replaces {job_id}, {job_dir} and {log} in a catalog text.
std::string fill_placeholders(std::string text, const Triage& t);

// Exit code of `slurm-triage analyze` for one analysed job: 0 when nothing is wrong (completed or
// running normally), 1 when the job failed, hung, died or was cancelled.
int exit_code_for(const Triage& t);

}  // namespace triage
