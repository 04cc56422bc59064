// Playbook 7 (training stability) in two halves: `gather_training` reads the tb_* bridge's samples
// of one host; `judge_training` finds, from those plain numbers alone, a diverged loss, gradient
// or routing spikes, slow steps and throughput drops, with checkpoint and warmup steps left out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

// One tb_* metric's samples by scrape time (the host's series merged).
using Samples = std::map<double, double>;

struct TrainingMetrics {
  double start = 0, end = 0;  // the analysed window
  std::string tb_host;        // the host whose tb_* series were read; "" when there is none
  std::optional<int64_t> first_step, last_step;  // what discovery saw of tb_step
  std::vector<Interval> checkpoint_windows;      // checkpoint saves in time
  std::optional<int64_t> checkpoint_period;      // the log's
  bool async_checkpointing = false;
  bool long_job = false;   // read at the window resolution, not sample by sample
  bool have_fill = false;  // tb_metrics_plugin_staleness_fill exists
  Samples step, fill, loss, grad_norm, raw_grad_norm, step_time, tokens_per_s, learning_rate,
      moe_lb_loss;
};

// The queries. Query records go to `evidence`.
TrainingMetrics gather_training(Context& ctx, std::vector<QueryRecord>* evidence);

// The verdict (stable, loss-divergence, unstable, throughput-regression, no-training-metrics),
// anomalies and tables for the samples. Pure.
PlaybookResult judge_training(const TrainingMetrics& m, const TrainingThresholds& tt);

}  // namespace triage::tsdb
