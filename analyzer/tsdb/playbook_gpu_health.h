// Playbook 5 (GPU health) in two halves: `gather_gpu_health` reads every GPU's temperature,
// power, core clock, utilisation, VRAM and error counters over the training part of the job;
// `judge_gpu_health` summarises them and names the GPUs that stand out from the rest (the
// comparison across GPUs matters more than any absolute number).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct GpuStat {
  double min = kNaN, max = kNaN, avg = kNaN;
};

struct GpuErrorRise {
  enum Kind { kRasCorrectable, kRasUncorrectable, kPcieCorrectable, kPcieNonFatal, kPcieFatal };
  std::string where;  // "host:gpu"
  std::string what;   // "umc ce", "pcie correctable", ...
  Kind kind = kRasCorrectable;
  double increase = 0;
};

struct GpuHealthMetrics {
  double start = 0, end = 0;  // the training part of the job
  size_t nodes = 0;
  std::map<std::string, GpuStat> temp, power, sclk, util;  // "host:gpu" -> over the window
  std::map<std::string, double> vram_pct;                  // "host:gpu" -> peak share used
  double vram_used_max = 0, vram_total = 0;                // the largest of any GPU (bytes)
  std::vector<GpuErrorRise> errors;                        // RAS then PCIe counters that rose
};

// The queries. Query records go to `evidence`.
GpuHealthMetrics gather_gpu_health(Context& ctx, std::vector<QueryRecord>* evidence);

// The summary table, the anomalous GPUs and the verdict (healthy, anomalies, inconclusive). Pure.
PlaybookResult judge_gpu_health(const GpuHealthMetrics& m, const GpuThresholds& g);

}  // namespace triage::tsdb
