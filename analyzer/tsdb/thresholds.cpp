#include "analyzer/tsdb/thresholds.h"

#include <algorithm>
#include <set>
#include <utility>

#include "common/rules_file.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

template <typename T>
struct Key {
  const char* name;
  double T::*field;
};

const std::vector<Key<GpuThresholds>>& gpu_keys() {
  static const std::vector<Key<GpuThresholds>> k = {
      {"vram-gib", &GpuThresholds::vram_gib},
      {"power-active-w", &GpuThresholds::power_active_w},
      {"power-busy-wait-w", &GpuThresholds::power_busy_wait_w},
      {"power-idle-w", &GpuThresholds::power_idle_w},
      {"idle-level-max-w", &GpuThresholds::idle_level_max_w},
      {"active-min-w", &GpuThresholds::active_min_w},
      {"dead-max-w", &GpuThresholds::dead_max_w},
      {"util-high-pct", &GpuThresholds::util_high_pct},
      {"util-low-pct", &GpuThresholds::util_low_pct},
      {"util-under-pct", &GpuThresholds::util_under_pct},
      {"temp-concern-c", &GpuThresholds::temp_concern_c},
      {"temp-throttle-c", &GpuThresholds::temp_throttle_c},
      {"power-spread-w", &GpuThresholds::power_spread_w},
      {"vram-risk-pct", &GpuThresholds::vram_risk_pct},
      {"sclk-drop-pct", &GpuThresholds::sclk_drop_pct},
      {"ce-per-hour-watch", &GpuThresholds::ce_per_hour_watch},
  };
  return k;
}

const std::vector<Key<NetworkThresholds>>& network_keys() {
  static const std::vector<Key<NetworkThresholds>> k = {
      {"tcp-retrans-per-s", &NetworkThresholds::tcp_retrans_per_s},
      {"tcp-checkpoint-normal-per-s", &NetworkThresholds::tcp_checkpoint_normal_per_s},
      {"rdma-retx-per-s", &NetworkThresholds::rdma_retx_per_s},
      {"cnp-per-s", &NetworkThresholds::cnp_per_s},
      {"sustained-s", &NetworkThresholds::sustained_s},
      {"spike-factor", &NetworkThresholds::spike_factor},
      {"lead-s", &NetworkThresholds::lead_s},
  };
  return k;
}

const std::vector<Key<HostThresholds>>& host_keys() {
  static const std::vector<Key<HostThresholds>> k = {
      {"io-pressure-high-pct", &HostThresholds::io_pressure_high_pct},
      {"io-checkpoint-normal-pct", &HostThresholds::io_checkpoint_normal_pct},
      {"dirty-high-bytes", &HostThresholds::dirty_high_bytes},
      {"mem-near-limit-pct", &HostThresholds::mem_near_limit_pct},
      {"spike-rise-pct", &HostThresholds::spike_rise_pct},
      {"spike-window-s", &HostThresholds::spike_window_s},
      {"ramp-min-rise-pct", &HostThresholds::ramp_min_rise_pct},
  };
  return k;
}

const std::vector<Key<MonitoringThresholds>>& monitoring_keys() {
  static const std::vector<Key<MonitoringThresholds>> k = {
      {"scrape-slow-s", &MonitoringThresholds::scrape_slow_s},
      {"scrape-timeout-s", &MonitoringThresholds::scrape_timeout_s},
      {"scrape-fast-s", &MonitoringThresholds::scrape_fast_s},
      {"flatline-s", &MonitoringThresholds::flatline_s},
      {"intermittent-min-fraction", &MonitoringThresholds::intermittent_min_fraction},
      {"gap-fraction", &MonitoringThresholds::gap_fraction},
  };
  return k;
}

struct TrainingNumbers {
  double loss_spike_mad, grad_spike_factor, step_time_spike_factor, throughput_drop_pct,
      checkpoint_slack_steps, warmup_steps;
};

std::optional<double> parse_number(const std::string& v) {
  // "8G" style sizes are accepted for byte thresholds.
  if (!v.empty() && (v.back() == 'K' || v.back() == 'M' || v.back() == 'G' || v.back() == 'T')) {
    const auto base = parse_double(std::string_view(v).substr(0, v.size() - 1));
    if (!base) return std::nullopt;
    const int shift = v.back() == 'K' ? 10 : v.back() == 'M' ? 20 : v.back() == 'G' ? 30 : 40;
    return *base * static_cast<double>(1ull << shift);
  }
  return parse_double(v);
}

template <typename T>
void apply(const RuleSection& s, const std::vector<Key<T>>& keys, T& target,
           std::vector<InputError>& errors, const std::set<std::string>& extra_keys = {}) {
  for (const auto& e : s.entries) {
    if (extra_keys.count(e.key) != 0) continue;
    auto it =
        std::find_if(keys.begin(), keys.end(), [&](const Key<T>& k) { return e.key == k.name; });
    if (it == keys.end()) {
      errors.push_back(s.error(e, "unknown key for [" + s.type + "]"));
      continue;
    }
    const auto v = parse_number(e.value);
    if (!v || *v < 0) {
      errors.push_back(
          s.error(e, "expected a non-negative number, got '" + printable(e.value) + "'"));
      continue;
    }
    target.*(it->field) = *v;
  }
}

}  // namespace

const GpuThresholds* Thresholds::by_hint(const std::string& hint) const {
  if (trim(hint).empty()) return nullptr;
  const std::string h = to_lower(hint);
  for (const auto& g : gpus) {
    if (g.model == "default") continue;
    std::vector<std::string> names = g.aliases;
    names.push_back(g.model);
    for (const auto& n : names) {
      if (!n.empty() && h.find(to_lower(n)) != std::string::npos) return &g;
    }
  }
  return nullptr;
}

const GpuThresholds* Thresholds::by_vram(double vram_gib) const {
  if (!(vram_gib > 0)) return nullptr;
  const GpuThresholds* best = nullptr;
  double best_err = 0.08;
  for (const auto& g : gpus) {
    if (!(g.vram_gib > 0)) continue;
    const double err = std::abs(vram_gib - g.vram_gib) / g.vram_gib;
    if (err <= best_err) {
      best = &g;
      best_err = err;
    }
  }
  return best;
}

const GpuThresholds& Thresholds::fallback() const {
  for (const auto& g : gpus) {
    if (g.model == "default") return g;
  }
  static const GpuThresholds builtin{"default"};
  return builtin;
}

Thresholds load_thresholds(const std::vector<std::string>& layers) {
  Thresholds out;
  RulesLoad load = load_rule_layers(layers);
  out.files = load.files;
  static const std::set<std::string> kTypes = {"gpu-thresholds", "network-thresholds",
                                               "host-thresholds", "monitoring-thresholds",
                                               "training-thresholds"};
  std::set<std::string> our_files;
  for (const auto& s : load.sections) {
    if (kTypes.count(s.type) != 0) our_files.insert(s.file);
  }
  // The layers hold every catalog; only problems in files that carry thresholds are ours to report.
  for (auto& e : load.errors) {
    if (our_files.count(e.file()) != 0 || e.file().find("threshold") != std::string::npos) {
      out.errors.push_back(std::move(e));
    }
  }
  GpuThresholds base;  // the "default" section's generic limits are every model's starting point
  for (const auto& s : load.sections) {
    if (s.type == "gpu-thresholds" && s.id == "default")
      apply(s, gpu_keys(), base, out.errors, {"alias"});
  }
  for (const auto& s : load.sections) {
    if (s.type == "gpu-thresholds") {
      GpuThresholds g = base;
      g.model = s.id;
      g.aliases.clear();
      for (const auto* a : s.all("alias")) {
        for (auto part : split(a->value, ',')) {
          if (!trim(part).empty()) g.aliases.emplace_back(trim(part));
        }
      }
      if (s.id != "default") apply(s, gpu_keys(), g, out.errors, {"alias"});
      if (std::isfinite(g.idle_level_max_w) != std::isfinite(g.active_min_w)) {
        out.errors.push_back(s.error("idle-level-max-w and active-min-w go together"));
      } else if (g.has_power_levels() && g.idle_level_max_w >= g.active_min_w) {
        out.errors.push_back(s.error("idle-level-max-w must be below active-min-w"));
      }
      out.gpus.push_back(std::move(g));
    } else if (s.type == "network-thresholds") {
      apply(s, network_keys(), out.network, out.errors);
    } else if (s.type == "host-thresholds") {
      apply(s, host_keys(), out.host, out.errors);
    } else if (s.type == "monitoring-thresholds") {
      apply(s, monitoring_keys(), out.monitoring, out.errors);
    } else if (s.type == "training-thresholds") {
      TrainingNumbers n{out.training.loss_spike_mad,
                        out.training.grad_spike_factor,
                        out.training.step_time_spike_factor,
                        out.training.throughput_drop_pct,
                        static_cast<double>(out.training.checkpoint_slack_steps),
                        static_cast<double>(out.training.warmup_steps)};
      static const std::vector<Key<TrainingNumbers>> keys = {
          {"loss-spike-mad", &TrainingNumbers::loss_spike_mad},
          {"grad-spike-factor", &TrainingNumbers::grad_spike_factor},
          {"step-time-spike-factor", &TrainingNumbers::step_time_spike_factor},
          {"throughput-drop-pct", &TrainingNumbers::throughput_drop_pct},
          {"checkpoint-slack-steps", &TrainingNumbers::checkpoint_slack_steps},
          {"warmup-steps", &TrainingNumbers::warmup_steps},
      };
      apply(s, keys, n, out.errors);
      out.training.loss_spike_mad = n.loss_spike_mad;
      out.training.grad_spike_factor = n.grad_spike_factor;
      out.training.step_time_spike_factor = n.step_time_spike_factor;
      out.training.throughput_drop_pct = n.throughput_drop_pct;
      out.training.checkpoint_slack_steps = static_cast<int>(n.checkpoint_slack_steps);
      out.training.warmup_steps = static_cast<int>(n.warmup_steps);
    }
  }
  // A model without its own generic limit inherits the default section's (done above via `base`);
  // keep "default" last so that lookups by hint or memory find real models first.
  std::stable_partition(out.gpus.begin(), out.gpus.end(),
                        [](const GpuThresholds& g) { return g.model != "default"; });
  return out;
}

}  // namespace triage::tsdb
