// The numbers the playbooks judge metrics by, loaded from the `gpu-thresholds.rules` catalog
// (section types gpu-thresholds, network-thresholds, host-thresholds, monitoring-thresholds,
// training-thresholds). The defaults below apply only where the catalog is silent; GPU power
// levels have no default at all, because they depend entirely on the model: without them the hang
// playbook compares the hang against the job's own training power instead.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"

namespace triage::tsdb {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct GpuThresholds {
  std::string model;                 // section id: "MI355X", "H100", "default"
  std::vector<std::string> aliases;  // case-insensitive substrings that name this model
  double vram_gib = kNaN;            // nominal memory, to recognise the model from the TSDB
  // Power levels per GPU (watts). NaN = unknown for this model.
  double power_active_w = kNaN;     // typical draw while training
  double power_busy_wait_w = kNaN;  // spinning in a collective's polling loop
  double power_idle_w = kNaN;       // standby
  double idle_level_max_w = kNaN;   // at or below: idle-level (busy-wait or standby)
  double active_min_w = kNaN;       // at or above: doing real work
  double dead_max_w = 20;           // at or below with no utilisation: nothing running at all
  double util_high_pct = 90;
  double util_low_pct = 10;
  double util_under_pct = 80;  // below this during training: under-utilised
  double temp_concern_c = 90;
  double temp_throttle_c = 100;
  double power_spread_w = 50;  // spread across GPUs worth a look
  double vram_risk_pct = 95;
  double sclk_drop_pct = 20;       // core clock below the job's median by this much
  double ce_per_hour_watch = 100;  // correctable errors per hour that mark a degrading part

  bool has_power_levels() const {
    return std::isfinite(idle_level_max_w) && std::isfinite(active_min_w);
  }
};

struct NetworkThresholds {
  double tcp_retrans_per_s = 10;              // sustained, outside checkpoint windows
  double tcp_checkpoint_normal_per_s = 3000;  // NFS writes of a checkpoint: expected up to this
  double rdma_retx_per_s = 0;                 // any sustained rate above this is a concern
  double cnp_per_s = 100;                     // congestion notifications worth naming
  double sustained_s = 300;                   // how long a rate must hold to be "sustained"
  double spike_factor = 5;                    // rate vs. the job's own baseline to call a spike
  double lead_s = 600;                        // how far before an incident a trigger is looked for
};

struct HostThresholds {
  double io_pressure_high_pct = 50;      // io pressure (full) that can stall a heartbeat thread
  double io_checkpoint_normal_pct = 80;  // during checkpoint writes: transient, expected
  double dirty_high_bytes = 8.0 * (1ull << 30);
  double mem_near_limit_pct = 95;  // host memory this full is an OOM in waiting
  double spike_rise_pct = 20;      // of total memory within spike_window_s: a spike
  double spike_window_s = 300;
  double ramp_min_rise_pct = 15;  // a leak: this much growth over the job, no recovery
};

struct MonitoringThresholds {
  double scrape_slow_s = 8;      // hw_scrape_duration_seconds above this: a plugin is slow
  double scrape_timeout_s = 12;  // the GPU plugin's timeout signature (±2 s)
  double scrape_fast_s = 3;      // a successful scrape
  double flatline_s = 300;       // an unchanged value this long is ghost data
  double intermittent_min_fraction = 0.1;  // share of slow scrapes that makes "intermittent"
  double gap_fraction = 0.1;               // share of missing power samples that makes "gaps"
};

struct TrainingThresholds {
  double loss_spike_mad = 8;          // robust z-score of a loss jump
  double grad_spike_factor = 5;       // grad norm vs. its running median
  double step_time_spike_factor = 3;  // step time vs. its median, outside checkpoints
  double throughput_drop_pct = 10;    // regression from steady state worth investigating
  int checkpoint_slack_steps = 2;     // steps after a checkpoint that are still affected
  int warmup_steps = 5;               // steps after the first that are not steady state
};

struct Thresholds {
  std::vector<GpuThresholds> gpus;  // catalog order; "default" last if present
  NetworkThresholds network;
  HostThresholds host;
  MonitoringThresholds monitoring;
  TrainingThresholds training;
  std::vector<InputError> errors;  // problems in the catalog (the rest still applies)
  std::vector<std::string> files;

  // The model whose aliases (or id) appear in `hint`, case-insensitively.
  const GpuThresholds* by_hint(const std::string& hint) const;
  // The model whose nominal memory is within 8% of `vram_gib`.
  const GpuThresholds* by_vram(double vram_gib) const;
  // The "default" section (generic limits, no power levels); never null.
  const GpuThresholds& fallback() const;
};

// Loads every thresholds section from the rule layers (see common/rules_file.h). Unknown keys and
// bad numbers are errors with file and line.
Thresholds load_thresholds(const std::vector<std::string>& layers);

}  // namespace triage::tsdb
