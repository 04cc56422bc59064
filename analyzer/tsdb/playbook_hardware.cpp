// Playbook 4's queries: hardware counters that rose during the job and when, the GPU plugin's
// scrape health, RDMA links that went down, hot GPUs and ghost data (playbook_hardware_judge.cpp
// decides).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_hardware.h"

namespace triage::tsdb {

namespace {

double range_step(const Discovery& d, double points) {
  return std::max(d.scrape_s, std::ceil((d.end - d.start) / points));
}

// The first time `query` (a range filter) held, or nothing.
std::optional<double> first_time_of(Context& ctx, const std::string& query, double step,
                                    std::vector<QueryRecord>* ev) {
  std::optional<double> first;
  for (const auto& s : ctx.q.range(query, ctx.disc.start, ctx.disc.end, step, ev)) {
    if (!s.points.empty()) first = std::min(first.value_or(s.points.front().t), s.points.front().t);
  }
  return first;
}

void gather_counters(Context& ctx, HardwareMetrics& m, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const double hours = std::max((d.end - d.start) / 3600, 1.0 / 60);
  const double step = range_step(d, 720);
  size_t lookups = 0;
  for (const auto& c : hardware_counters()) {
    for (const auto& s : ctx.nonzero_increase(c.metric, ev)) {
      HardwareMetrics::Counter row{c.metric, ctx.scope.host_of(s.labels), gpu_of(s.labels),
                                   s.point.v, std::nullopt};
      if (worth_first_seen(c, s.point.v / hours, ctx.gpu) && lookups < 24) {
        ++lookups;
        std::string extra;
        for (const char* k : {"gpu", "device", "port"}) {
          auto it = s.labels.find(k);
          if (it == s.labels.end()) continue;
          if (!extra.empty()) extra += ',';
          extra += label_eq(k, it->second);
        }
        // The first series' first point, as the report has always shown it.
        for (const auto& rs :
             ctx.q.range("increase(" + ctx.scope.sel_hosts(c.metric, {row.host}, extra) + "[" +
                             dur(2 * step) + "]) > 0",
                         d.start, d.end, step, ev)) {
          if (!rs.points.empty()) {
            row.first_seen = rs.points.front().t;
            break;
          }
        }
      }
      m.counters.push_back(std::move(row));
    }
  }
  for (const auto& s : ctx.nonzero_increase("hw_dmesg_gpu_errors_total", ev))
    m.dmesg_errors[ctx.scope.host_of(s.labels)] += s.point.v;
}

// The GPU plugin's timing on each host, and the power samples it failed to deliver.
void gather_scrape_health(Context& ctx, HardwareMetrics& m, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const auto& mt = ctx.th.monitoring;
  const std::string w = range_window(d.end - d.start);
  auto per_host = [&](const std::string& agg, const std::string& expr) {
    return by_host(ctx.scope, ctx.q.instant(by_host_agg(ctx.scope, agg, expr), d.end, ev));
  };
  if (d.has("hw_scrape_duration_seconds")) {
    const std::string x = ctx.scope.sel("hw_scrape_duration_seconds");
    const std::string sub = subquery_window(d.end - d.start, d.scrape_s);
    m.slow_fraction = per_host(
        "max", "avg_over_time((" + x + " > bool " + fmt(mt.scrape_slow_s, 1) + ")" + sub + ")");
    m.fast_fraction = per_host(
        "max", "avg_over_time((" + x + " < bool " + fmt(mt.scrape_fast_s, 1) + ")" + sub + ")");
    m.scrape_p90 = per_host("max", "quantile_over_time(0.9, " + x + w + ")");
  }
  if (!d.has("hw_gpu_power_watts") || !d.has("hw_scrape_duration_seconds")) return;
  auto power_n =
      per_host("min", "count_over_time(" + ctx.scope.sel("hw_gpu_power_watts") + w + ")");
  auto scrape_n =
      per_host("max", "count_over_time(" + ctx.scope.sel("hw_scrape_duration_seconds") + w + ")");
  for (const auto& [h, n] : scrape_n) {
    if (n > 0 && power_n.count(h) != 0) m.power_gaps[h] = std::max(0.0, 1 - power_n[h] / n);
  }
}

// RDMA links that went down, and GPUs above the throttling temperature.
void gather_links_and_heat(Context& ctx, HardwareMetrics& m, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const std::string w = range_window(d.end - d.start);
  const double step = range_step(d, 1000);
  if (d.has("hw_rdma_port_state")) {
    for (const auto& s : ctx.q.instant(
             "min_over_time(" + ctx.scope.sel("hw_rdma_port_state") + w + ") == 0", d.end, ev)) {
      const std::string h = ctx.scope.host_of(s.labels);
      m.ports_down.push_back(
          {h, device_of(s.labels),
           first_time_of(
               ctx,
               ctx.scope.sel_hosts("hw_rdma_port_state", {h}, device_matcher(s.labels)) + " == 0",
               step, ev)});
    }
  }
  if (!d.has("hw_gpu_temperature_celsius")) return;
  const std::string hot = " > " + fmt(ctx.gpu.temp_throttle_c, 1);
  for (const auto& s : ctx.q.instant(
           cat("max_over_time(", ctx.scope.sel("hw_gpu_temperature_celsius"), w, ")", hot), d.end,
           ev)) {
    const std::string h = ctx.scope.host_of(s.labels);
    const std::string gpu = gpu_of(s.labels);
    m.hot_gpus.push_back(
        {h, gpu, s.point.v,
         first_time_of(
             ctx,
             ctx.scope.sel_hosts("hw_gpu_temperature_celsius", {h}, label_eq("gpu", gpu)) + hot,
             step, ev)});
  }
}

// Ghost data: the exporter kept serving stale values; nothing read from those intervals is real.
void gather_ghosts(Context& ctx, HardwareMetrics& m, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  for (const auto& [h, ivs] : d.ghost) {
    HardwareMetrics::Ghost g{h, ivs, false};
    if (d.has("hw_gpu_power_watts")) {
      const Interval& iv = ivs.front();
      g.power_flat = !ctx.q
                          .instant("changes(" + ctx.scope.sel_hosts("hw_gpu_power_watts", {h}) +
                                       "[" + dur(iv.end - iv.start) + "]) == 0",
                                   iv.end, ev)
                          .empty();
    }
    m.ghosts.push_back(std::move(g));
  }
}

}  // namespace

HardwareMetrics gather_hardware(Context& ctx, std::vector<QueryRecord>* ev) {
  HardwareMetrics m;
  m.start = ctx.disc.start;
  m.end = ctx.disc.end;
  m.hosts = ctx.disc.hosts;
  m.failure_time = ctx.req.failure_time;
  m.source_trusted = ctx.source_trusted;
  gather_counters(ctx, m, ev);
  gather_scrape_health(ctx, m, ev);
  gather_links_and_heat(ctx, m, ev);
  gather_ghosts(ctx, m, ev);
  return m;
}

PlaybookResult run_hardware(Context& ctx, std::vector<HardwareVerdict>& verdicts) {
  std::vector<QueryRecord> evidence;
  const HardwareMetrics m = gather_hardware(ctx, &evidence);
  HardwareJudgement j = judge_hardware(m, ctx.gpu, ctx.th.monitoring);
  j.result.evidence = std::move(evidence);
  verdicts.insert(verdicts.end(), j.verdicts.begin(), j.verdicts.end());
  return std::move(j.result);
}

}  // namespace triage::tsdb
