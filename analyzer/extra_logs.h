// The other logs of a job directory: per-rank logs (rank-*.log) and Ray worker logs
// (ray_logs/*/worker*.out|err). Basic mode only looks in the worker logs' first megabytes for the
// checkpoint restore message; full mode scans them all for signatures too. Listing and reading are
// bounded, so a directory with a million entries or gigabytes of worker logs costs little.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/collective_progress.h"
#include "analyzer/log_scanner.h"

namespace triage {

struct ExtraLogLimits {
  size_t max_dir_entries = 20000;  // per directory listed
  size_t max_files = 256;
  size_t max_ray_sessions = 64;
  uint64_t max_bytes_per_file = 64ull << 20;
  uint64_t max_total_bytes = 512ull << 20;
  uint64_t restore_probe_bytes = 4ull << 20;  // basic mode, per worker*.out
  size_t restore_probe_files = 16;
};

struct ExtraLogs {
  ScanResult merged;  // findings of every extra file (Finding::source names the file)
  bool any_findings = false;
  RestoreFacts restore;  // restore/fresh marker from a worker log
  // Full mode: the NCCL watchdog's numbers in the per-rank logs, each under the rank its file
  // name gives (rank-3.log: rank 3), which is the global rank a line's own "[PG 1 Rank 0]" may not
  // be (bounded).
  std::vector<CollectiveProgress> collectives;
  size_t files_scanned = 0;
  std::vector<std::string> notes;
};

// `job_dir_fd` is an open directory; `full` selects full mode.
ExtraLogs scan_extra_logs(int job_dir_fd, const ScanPlan& plan, bool full,
                          const ExtraLogLimits& limits = {});

}  // namespace triage
