// Playbook 1's queries: what each GPU drew and reported in the hang window, and the follow-up
// evidence its verdict needs (playbook_hang_judge.cpp decides).
#include "analyzer/tsdb/playbook_hang.h"

#include <algorithm>

namespace triage::tsdb {

namespace {

// Mean power in the window (after the GPUs settled into the polling loop) and p90 power before.
void gather_power(Context& ctx, HangMetrics& m, const std::string& w,
                  std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const double start = hang_window_start(m);
  for (const auto& s : ctx.q.instant(
           "avg_over_time(" + ctx.scope.sel("hw_gpu_power_watts") + "[" + w + "])", d.end, ev)) {
    auto& st = m.gpus[host_gpu(ctx.scope, s.labels)];
    st.host = ctx.scope.host_of(s.labels);
    st.gpu = gpu_of(s.labels);
    st.power = s.point.v;
  }
  if (start - d.start < 2 * d.scrape_s) return;
  const std::string b = dur(std::min(1800.0, start - d.start));
  for (const auto& s : ctx.q.instant(
           "quantile_over_time(0.9, " + ctx.scope.sel("hw_gpu_power_watts") + "[" + b + "])", start,
           ev)) {
    auto it = m.gpus.find(host_gpu(ctx.scope, s.labels));
    if (it != m.gpus.end()) it->second.base = s.point.v;
  }
}

void gather_util(Context& ctx, HangMetrics& m, const std::string& w, std::vector<QueryRecord>* ev) {
  for (const auto& s :
       ctx.q.instant("avg_over_time(" + ctx.scope.sel("ray_node_gpus_utilization") + "[" + w + "])",
                     ctx.disc.end, ev)) {
    const std::string key = host_gpu(ctx.scope, s.labels);
    auto it = m.gpus.find(key);
    if (it != m.gpus.end()) {
      it->second.util = s.point.v;
    } else if (gpu_of(s.labels).empty()) {
      // Host-level utilisation: applies to each of the host's GPUs.
      const std::string host = ctx.scope.host_of(s.labels);
      for (auto& [k, st] : m.gpus) {
        if (st.host == host) st.util = s.point.v;
      }
    } else {
      auto& st = m.gpus[key];
      st.host = ctx.scope.host_of(s.labels);
      st.gpu = gpu_of(s.labels);
      st.util = s.point.v;
    }
  }
}

// Each silent host's last sample, and the hardware counters that rose on it.
void gather_dead_hosts(Context& ctx, HangMetrics& m, const std::vector<std::string>& dead,
                       std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  for (const auto& h : dead) {
    if (!m.have_probe) continue;
    double last = 0;
    for (const auto& s : ctx.q.raw(ctx.scope.sel_hosts(m.probe, {h}), d.end, d.end - d.start, ev)) {
      if (!s.points.empty()) last = std::max(last, s.points.back().t);
    }
    if (last > 0) m.last_sample[h] = last;
  }
  for (const char* metric :
       {"hw_dmesg_gpu_errors_total", "hw_gpu_ras_umc_ue_total", "hw_gpu_ras_xgmi_ue_total",
        "hw_gpu_ras_gfx_ue_total", "hw_gpu_pcie_fatal_total"}) {
    for (const auto& s : ctx.nonzero_increase(metric, ev)) {
      const std::string h = ctx.scope.host_of(s.labels);
      if (std::find(dead.begin(), dead.end(), h) == dead.end()) continue;
      m.dead_host_errors.push_back({metric, host_gpu(ctx.scope, s.labels), h, s.point.v});
    }
  }
}

}  // namespace

HangMetrics gather_hang(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  HangMetrics m;
  m.hang_start = ctx.req.last_step_time ? ctx.req.last_step_time : d.last_step_change;
  m.data_start = d.start;
  m.data_end = d.end;
  m.scrape_s = d.scrape_s;
  m.hosts = d.hosts;
  m.have_power = d.has("hw_gpu_power_watts");
  m.have_util = d.has("ray_node_gpus_utilization");
  m.probe =
      d.has("hw_scrape_duration_seconds") ? "hw_scrape_duration_seconds" : "hw_gpu_power_watts";
  m.have_probe = d.has(m.probe);
  const HangCase early = hang_case(m, ctx.gpu);
  if (early == HangCase::kNoStart || early == HangCase::kShortWindow) return m;

  const double start = hang_window_start(m);
  const double settle = std::min(60.0, (d.end - start) / 4);
  const std::string w = dur(d.end - start - settle);
  if (m.have_power) gather_power(ctx, m, w, ev);
  if (m.have_util) gather_util(ctx, m, w, ev);
  if (m.have_probe) {
    const double tail = std::max(3 * d.scrape_s, (d.end - start) / 4);
    m.reporting =
        by_host(ctx.scope,
                ctx.q.instant(by_host_sum(ctx.scope, "count_over_time(" + ctx.scope.sel(m.probe) +
                                                         "[" + dur(tail) + "])"),
                              d.end, ev));
  }
  switch (hang_case(m, ctx.gpu)) {
    case HangCase::kNodeDeath:
      gather_dead_hosts(ctx, m, hang_dead_hosts(m, ctx.gpu), ev);
      break;
    case HangCase::kSpin:
      m.network =
          find_network_events(ctx, start - ctx.th.network.lead_s, start + 2 * d.scrape_s, ev);
      break;
    default:
      break;
  }
  return m;
}

PlaybookResult run_hang(Context& ctx) {
  std::vector<QueryRecord> evidence;
  const HangMetrics m = gather_hang(ctx, &evidence);
  PlaybookResult r = judge_hang(m, ctx.gpu);
  r.evidence = std::move(evidence);
  return r;
}

}  // namespace triage::tsdb
