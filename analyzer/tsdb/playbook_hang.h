// Playbook 1 (hang) in two halves: `gather_hang` asks the TSDB for each GPU's power and
// utilisation in the hang window; `judge_hang` decides, from those plain numbers alone, whether
// the job was a busy-wait deadlock, a node death, a straggler, an idle stall or not a hang at all.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct HangGpu {
  std::string host;
  std::string gpu;
  double power = kNaN;  // mean over the hang window (after the GPUs settled)
  double util = kNaN;   // mean utilisation over the same window
  double base = kNaN;   // p90 power while training, before the hang
};

// A hardware counter that rose during the job on a host that went silent.
struct CounterRise {
  std::string metric;
  std::string where;  // "host:gpu" or the host
  std::string host;
  double increase = 0;
};

struct HangMetrics {
  std::optional<double> hang_start;  // the last completed step (the log's, else tb_step's)
  double data_start = 0;             // the analysed window
  double data_end = 0;
  double scrape_s = 15;
  std::vector<std::string> hosts;       // the job's hosts
  bool have_power = false;              // hw_gpu_power_watts exists
  bool have_util = false;               // ray_node_gpus_utilization exists
  std::map<std::string, HangGpu> gpus;  // "host:gpu" -> readings
  // Who still reported at the end of the window (a dead node stops being scraped).
  std::string probe;  // hw_scrape_duration_seconds, else hw_gpu_power_watts
  bool have_probe = false;
  std::map<std::string, double> reporting;  // host -> samples in the window's tail
  // Only for a node death: each silent host's last sample (absent: none) and its error counters.
  std::map<std::string, double> last_sample;
  std::vector<CounterRise> dead_host_errors;
  // Only for a busy-wait: network events just before training stopped.
  std::vector<NetEvent> network;
};

// What the readings say, before any prose: which follow-up evidence the verdict needs.
enum class HangCase {
  kNoStart,         // no hang start known
  kShortWindow,     // the window is shorter than three scrapes
  kNobodyReported,  // every host silent: the metrics pipeline died
  kNodeDeath,       // some hosts silent or powerless, the rest up
  kNoReading,       // no GPU could be judged
  kNotAHang,        // nearly every GPU at active-level power
  kStraggler,       // a minority of hosts still computing
  kMixedPower,      // most GPUs between the idle and active levels
  kIdle,            // idle-level power with low utilisation
  kSpin,            // idle-level power with high utilisation: a busy-wait
};

// The hang window: from the hang start (never before the data) to the end of the data.
double hang_window_start(const HangMetrics& m);

// Classifies the readings against the model's power levels (or each GPU's own training power).
HangCase hang_case(const HangMetrics& m, const GpuThresholds& g);

// The hosts the verdict calls dead: silent at the window's end, or without a powered GPU.
std::vector<std::string> hang_dead_hosts(const HangMetrics& m, const GpuThresholds& g);

// The queries: power, utilisation and training baseline per GPU, who still reported, then the
// follow-up evidence `hang_case` asks for. Query records go to `evidence`.
HangMetrics gather_hang(Context& ctx, std::vector<QueryRecord>* evidence);

// The verdict, summary, findings, anomalies, table and next steps for the readings. Pure.
PlaybookResult judge_hang(const HangMetrics& m, const GpuThresholds& g);

}  // namespace triage::tsdb
