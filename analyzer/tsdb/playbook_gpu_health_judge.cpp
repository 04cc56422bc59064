// Playbook 5's judgement: a health summary of every GPU and the GPUs that stand out from the job's
// own others.
#include <algorithm>
#include <array>
#include <cmath>

#include "analyzer/tsdb/playbook_gpu_health.h"
#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

using Stats = std::map<std::string, GpuStat>;

std::string span_of(const Stats& m, std::string (*f)(double)) {
  double lo = kNaN, hi = kNaN;
  std::vector<double> avgs;
  for (const auto& [k, s] : m) {
    if (std::isfinite(s.min)) lo = std::isfinite(lo) ? std::min(lo, s.min) : s.min;
    if (std::isfinite(s.max)) hi = std::isfinite(hi) ? std::max(hi, s.max) : s.max;
    avgs.push_back(s.avg);
  }
  if (!std::isfinite(lo) && !std::isfinite(hi)) return "–";
  return "min " + f(lo) + "  max " + f(hi) + "  avg " + f(mean(avgs));
}

std::string celsius(double v) {
  return fmt(v, 0) + "C";
}
std::string mhz(double v) {
  return fmt(v, 0) + "MHz";
}

std::vector<double> averages(const Stats& m) {
  std::vector<double> v;
  for (const auto& [k, s] : m)
    v.push_back(s.avg);
  return v;
}

// "host:gpu" -> what stands out about it, against the limits and the job's median GPU.
std::map<std::string, std::vector<std::string>> outliers(const GpuHealthMetrics& m,
                                                         const GpuThresholds& g) {
  const double pmed = median(averages(m.power)), cmed = median(averages(m.sclk));
  std::map<std::string, std::vector<std::string>> odd;
  for (const auto& [k, s] : m.temp) {
    if (s.max > g.temp_throttle_c) {
      odd[k].push_back("temperature " + celsius(s.max) + " (throttling)");
    } else if (s.max > g.temp_concern_c) {
      odd[k].push_back("temperature " + celsius(s.max));
    }
  }
  for (const auto& [k, s] : m.power) {
    if (std::isfinite(pmed) && std::abs(s.avg - pmed) > g.power_spread_w)
      odd[k].push_back("power " + fmt_watts(s.avg) + " vs. median " + fmt_watts(pmed));
  }
  for (const auto& [k, s] : m.sclk) {
    if (std::isfinite(cmed) && s.avg < cmed * (1 - g.sclk_drop_pct / 100))
      odd[k].push_back("core clock " + mhz(s.avg) + " vs. median " + mhz(cmed));
  }
  for (const auto& [k, v] : m.vram_pct) {
    if (v > g.vram_risk_pct) odd[k].push_back("VRAM " + fmt_pct(v) + " used (GPU OOM risk)");
  }
  for (const auto& [k, s] : m.util) {
    if (s.avg < g.util_under_pct) odd[k].push_back("utilisation " + fmt_pct(s.avg) + " on average");
  }
  std::map<std::string, std::vector<std::string>> errs;
  for (const auto& e : m.errors)
    errs[e.where].push_back(e.what + " +" + fmt(e.increase, 0));
  for (const auto& [k, list] : errs)
    odd[k].push_back("errors: " + join(list));
  return odd;
}

EvidenceTable summary_table(const GpuHealthMetrics& m, const GpuThresholds& g, size_t ngpus) {
  std::array<double, 5> sum{};  // by GpuErrorRise::Kind
  for (const auto& e : m.errors)
    sum.at(e.kind) += e.increase;
  const auto pavg = averages(m.power);
  double pspread = 0;
  if (!pavg.empty()) {
    const auto [mn, mx] = std::minmax_element(pavg.begin(), pavg.end());
    pspread = *mx - *mn;
  }
  EvidenceTable t;
  t.title = "GPU health summary (" + std::to_string(m.nodes) + " nodes, " + std::to_string(ngpus) +
            " GPUs)";
  t.columns = {"Metric", "Value", "Threshold"};
  t.rows.push_back(
      {"Temperature", span_of(m.temp, celsius),
       fmt(g.temp_concern_c, 0) + "C concern, " + fmt(g.temp_throttle_c, 0) + "C throttling"});
  t.rows.push_back({"Power", span_of(m.power, fmt_watts) + "  spread " + fmt_watts(pspread),
                    "spread > " + fmt_watts(g.power_spread_w)});
  t.rows.push_back({"Core clock", span_of(m.sclk, mhz), "drop > " + fmt_pct(g.sclk_drop_pct)});
  t.rows.push_back({"VRAM",
                    m.vram_total > 0
                        ? fmt_pct(100 * m.vram_used_max / m.vram_total) + " used (" +
                              fmt_bytes(m.vram_used_max) + " / " + fmt_bytes(m.vram_total) + ")"
                        : "–",
                    "> " + fmt_pct(g.vram_risk_pct)});
  t.rows.push_back({"Utilisation", span_of(m.util, fmt_pct), "< " + fmt_pct(g.util_under_pct)});
  t.rows.push_back({"RAS errors",
                    fmt(sum.at(GpuErrorRise::kRasCorrectable), 0) + " correctable, " +
                        fmt(sum.at(GpuErrorRise::kRasUncorrectable), 0) + " uncorrectable",
                    "any"});
  t.rows.push_back({"PCIe errors",
                    fmt(sum.at(GpuErrorRise::kPcieCorrectable), 0) + " correctable, " +
                        fmt(sum.at(GpuErrorRise::kPcieNonFatal), 0) + " non-fatal, " +
                        fmt(sum.at(GpuErrorRise::kPcieFatal), 0) + " fatal",
                    "any fatal"});
  return t;
}

}  // namespace

PlaybookResult judge_gpu_health(const GpuHealthMetrics& m, const GpuThresholds& g) {
  PlaybookResult r = new_playbook("gpu-health");
  r.window_start = m.start;
  r.window_end = m.end;
  const auto odd = outliers(m, g);
  const size_t ngpus = std::max({m.power.size(), m.temp.size(), m.util.size()});
  r.tables.push_back(summary_table(m, g, ngpus));
  if (!odd.empty()) {
    EvidenceTable t;
    t.title = "Anomalous GPUs";
    t.columns = {"Host:GPU", "What stands out"};
    for (const auto& [k, list] : odd) {
      t.rows.push_back({k, join(list, "; ")});
      add_unique(r.gpus, k);
      add_unique(r.hosts, k.substr(0, k.rfind(':')));
    }
    if (t.rows.size() > 32) t.rows.resize(32);
    r.tables.push_back(std::move(t));
  }
  if (ngpus == 0) {
    r.verdict = "inconclusive";
    r.summary =
        "The TSDB holds no GPU metrics (hw_gpu_*, ray_node_gpus_utilization) in the window.";
  } else if (odd.empty()) {
    r.verdict = "healthy";
    r.summary = "All " + std::to_string(ngpus) +
                " GPUs stayed within their limits and close to each other.";
  } else {
    r.verdict = "anomalies";
    r.summary = std::to_string(odd.size()) + " of " + std::to_string(ngpus) +
                " GPUs stand out: " + list_names(r.gpus, 6) + ".";
  }
  return r;
}

}  // namespace triage::tsdb
