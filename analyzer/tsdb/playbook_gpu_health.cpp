// Playbook 5: a health summary of every GPU over the training part of the job, and the GPUs that
// stand out from the rest (the comparison across GPUs matters more than any absolute number).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

struct Stat {
  double min = kNaN, max = kNaN, avg = kNaN;
};

std::string span_of(const std::map<std::string, Stat>& m, std::string (*f)(double)) {
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

}  // namespace

PlaybookResult run_gpu_health(Context& ctx) {
  PlaybookResult r = new_playbook("gpu-health");
  const auto& d = ctx.disc;
  const auto& g = ctx.gpu;
  auto* ev = &r.evidence;
  // The training part of the job: a hang's idle minutes would drag every average down.
  double te = d.end;
  if (ctx.req.last_step_time && *ctx.req.last_step_time > d.start + 4 * d.scrape_s)
    te = std::min(te, *ctx.req.last_step_time);
  r.window_start = d.start;
  r.window_end = te;
  const std::string w = "[" + dur(te - d.start) + "]";

  auto stats = [&](const std::string& metric, const std::string& extra) {
    std::map<std::string, Stat> out;
    if (!d.has(metric)) return out;
    const std::string sel = ctx.scope.sel(metric, extra);
    for (const auto& s : ctx.q.instant(cat("min_over_time(", sel, w, ")"), te, ev))
      out[host_gpu(ctx.scope, s.labels)].min = s.point.v;
    for (const auto& s : ctx.q.instant(cat("max_over_time(", sel, w, ")"), te, ev))
      out[host_gpu(ctx.scope, s.labels)].max = s.point.v;
    for (const auto& s : ctx.q.instant(cat("avg_over_time(", sel, w, ")"), te, ev))
      out[host_gpu(ctx.scope, s.labels)].avg = s.point.v;
    return out;
  };
  const auto temp = stats("hw_gpu_temperature_celsius", "");
  const auto power = stats("hw_gpu_power_watts", "");
  const auto sclk = stats("hw_gpu_clock_mhz", "type=\"sclk\"");
  const auto util = stats("ray_node_gpus_utilization", "");
  std::map<std::string, double> vram_pct;
  double vram_used_max = 0, vram_total = 0;
  if (d.has("hw_gpu_vram_used_bytes") && d.has("hw_gpu_vram_total_bytes")) {
    const std::string used_over_total = "max_over_time(" + ctx.scope.sel("hw_gpu_vram_used_bytes") +
                                        w + ") / on(" + ctx.scope.host_label() +
                                        ", gpu) max_over_time(" +
                                        ctx.scope.sel("hw_gpu_vram_total_bytes") + w + ")";
    for (const auto& s : ctx.q.instant(used_over_total, te, ev)) {
      vram_pct[host_gpu(ctx.scope, s.labels)] = 100 * s.point.v;
    }
    for (const auto& s : ctx.q.instant(
             "max(max_over_time(" + ctx.scope.sel("hw_gpu_vram_used_bytes") + w + "))", te, ev)) {
      vram_used_max = s.point.v;
    }
    for (const auto& s : ctx.q.instant(
             "max(max_over_time(" + ctx.scope.sel("hw_gpu_vram_total_bytes") + w + "))", te, ev)) {
      vram_total = s.point.v;
    }
  }
  double ce = 0, ue = 0, pcie_c = 0, pcie_nf = 0, pcie_f = 0;
  std::map<std::string, std::vector<std::string>> errs;  // host:gpu -> counters that rose
  for (const char* block : {"umc", "xgmi", "gfx", "mmhub", "sdma"}) {
    for (const char* kind : {"ce", "ue"}) {
      const std::string m = std::string("hw_gpu_ras_") + block + "_" + kind + "_total";
      for (const auto& s : ctx.nonzero_increase(m, ev)) {
        (std::string(kind) == "ce" ? ce : ue) += s.point.v;
        errs[host_gpu(ctx.scope, s.labels)].push_back(std::string(block) + " " + kind + " +" +
                                                      fmt(s.point.v, 0));
      }
    }
  }
  for (const auto& [m, total] :
       std::vector<std::pair<std::string, double*>>{{"hw_gpu_pcie_correctable_total", &pcie_c},
                                                    {"hw_gpu_pcie_nonfatal_total", &pcie_nf},
                                                    {"hw_gpu_pcie_fatal_total", &pcie_f}}) {
    for (const auto& s : ctx.nonzero_increase(m, ev)) {
      *total += s.point.v;
      errs[host_gpu(ctx.scope, s.labels)].push_back("pcie " + m.substr(12, m.size() - 18) + " +" +
                                                    fmt(s.point.v, 0));
    }
  }

  // Outliers against the job's own GPUs.
  std::vector<double> pavg, cavg;
  for (const auto& [k, s] : power)
    pavg.push_back(s.avg);
  for (const auto& [k, s] : sclk)
    cavg.push_back(s.avg);
  const double pmed = median(pavg), cmed = median(cavg);
  std::map<std::string, std::vector<std::string>> odd;
  for (const auto& [k, s] : temp) {
    if (s.max > g.temp_throttle_c) {
      odd[k].push_back("temperature " + celsius(s.max) + " (throttling)");
    } else if (s.max > g.temp_concern_c) {
      odd[k].push_back("temperature " + celsius(s.max));
    }
  }
  for (const auto& [k, s] : power) {
    if (std::isfinite(pmed) && std::abs(s.avg - pmed) > g.power_spread_w) {
      odd[k].push_back("power " + fmt_watts(s.avg) + " vs. median " + fmt_watts(pmed));
    }
  }
  for (const auto& [k, s] : sclk) {
    if (std::isfinite(cmed) && s.avg < cmed * (1 - g.sclk_drop_pct / 100)) {
      odd[k].push_back("core clock " + mhz(s.avg) + " vs. median " + mhz(cmed));
    }
  }
  for (const auto& [k, v] : vram_pct) {
    if (v > g.vram_risk_pct) odd[k].push_back("VRAM " + fmt_pct(v) + " used (GPU OOM risk)");
  }
  for (const auto& [k, s] : util) {
    if (s.avg < g.util_under_pct) odd[k].push_back("utilisation " + fmt_pct(s.avg) + " on average");
  }
  for (const auto& [k, list] : errs)
    odd[k].push_back("errors: " + join(list));

  double pspread = 0;
  if (!pavg.empty()) {
    const auto [mn, mx] = std::minmax_element(pavg.begin(), pavg.end());
    pspread = *mx - *mn;
  }
  const size_t ngpus = std::max({power.size(), temp.size(), util.size()});
  EvidenceTable sum;
  sum.title = "GPU health summary (" + std::to_string(d.hosts.size()) + " nodes, " +
              std::to_string(ngpus) + " GPUs)";
  sum.columns = {"Metric", "Value", "Threshold"};
  sum.rows.push_back(
      {"Temperature", span_of(temp, celsius),
       fmt(g.temp_concern_c, 0) + "C concern, " + fmt(g.temp_throttle_c, 0) + "C throttling"});
  sum.rows.push_back({"Power", span_of(power, fmt_watts) + "  spread " + fmt_watts(pspread),
                      "spread > " + fmt_watts(g.power_spread_w)});
  sum.rows.push_back({"Core clock", span_of(sclk, mhz), "drop > " + fmt_pct(g.sclk_drop_pct)});
  sum.rows.push_back({"VRAM",
                      vram_total > 0
                          ? fmt_pct(100 * vram_used_max / vram_total) + " used (" +
                                fmt_bytes(vram_used_max) + " / " + fmt_bytes(vram_total) + ")"
                          : "–",
                      "> " + fmt_pct(g.vram_risk_pct)});
  sum.rows.push_back({"Utilisation", span_of(util, fmt_pct), "< " + fmt_pct(g.util_under_pct)});
  sum.rows.push_back(
      {"RAS errors", fmt(ce, 0) + " correctable, " + fmt(ue, 0) + " uncorrectable", "any"});
  sum.rows.push_back({"PCIe errors",
                      fmt(pcie_c, 0) + " correctable, " + fmt(pcie_nf, 0) + " non-fatal, " +
                          fmt(pcie_f, 0) + " fatal",
                      "any fatal"});
  r.tables.push_back(std::move(sum));
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
