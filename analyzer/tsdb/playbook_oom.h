// Playbook 3 (oom) in two halves: `gather_oom` reads each host's memory trajectory, its OOM kills
// and the pressure around them; `judge_oom` names the shape from those plain numbers alone: a
// checkpoint spike, a leak ramp, a single burst, every host at once, or no host memory pressure.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct HostMemory {
  std::string host;
  std::vector<Point> used;  // bytes over time (max over the host's series)
};

struct OomMetrics {
  double start = 0;  // the window: the data's start ...
  double end = 0;    // ... to just after the failure (or the data's end)
  double step = 15;  // the memory series' resolution
  std::optional<double> failure_time;
  bool have_memory = false;                 // ray_node_mem_used exists
  std::map<std::string, double> kills;      // host -> OOM kills in the window
  std::map<std::string, double> kill_time;  // host -> first kill
  std::map<std::string, double> totals;     // host -> memory size (bytes); empty: unknown
  std::vector<HostMemory> memory;
  std::vector<Interval> checkpoints;  // checkpoint saves; empty: the log gave no period
  // Around the OOM, per host: hw_mem_dirty_bytes, hw_mem_writeback_bytes, hw_io_pressure_full_pct,
  // hw_procs_blocked (max over 5 minutes) and "vram" (peak bytes over the window).
  std::map<std::string, std::map<std::string, double>> around;
};

// The queries. Query records go to `evidence`.
OomMetrics gather_oom(Context& ctx, std::vector<QueryRecord>* evidence);

// The verdict, summary, findings, anomalies, table and next steps for the trajectories. Pure.
PlaybookResult judge_oom(const OomMetrics& m, const HostThresholds& ht);

}  // namespace triage::tsdb
