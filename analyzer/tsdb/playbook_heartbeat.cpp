// Playbook 2's queries: the accused hosts at the heartbeat-stop time (playbook_heartbeat_judge.cpp
// decides).
#include <algorithm>

#include "analyzer/tsdb/playbook_heartbeat.h"

namespace triage::tsdb {

namespace {

void gather_tcp(Context& ctx, HeartbeatMetrics& m, const std::vector<std::string>& hosts,
                double stop, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const std::string sel = ctx.scope.sel_hosts("hw_tcp_retransmits_total", hosts);
  m.tcp =
      by_host(ctx.scope, ctx.q.instant(by_host_sum(ctx.scope, "rate(" + sel + "[5m])"), stop, ev));
  if (stop - 300 - d.start < 600) return;
  m.tcp_base = by_host(
      ctx.scope,
      ctx.q.instant(by_host_sum(ctx.scope, "rate(" + sel + "[" +
                                               dur(std::min(3600.0, stop - 300 - d.start)) + "])"),
                    stop - 300, ev));
}

}  // namespace

HeartbeatMetrics gather_heartbeat(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  HeartbeatMetrics m;
  m.start = d.start;
  m.end = d.end;
  m.scrape_s = d.scrape_s;
  m.job_hosts = d.hosts;
  m.failure_time = ctx.req.failure_time;
  m.timeout_s = ctx.req.heartbeat_timeout_s;
  m.accused_in_log = ctx.req.accused_hosts;
  m.coordinator_host = ctx.req.coordinator_host;
  if (!heartbeat_judgeable(m)) return m;
  const double stop = heartbeat_stop(m);
  const std::vector<std::string> hosts = heartbeat_hosts(m);
  auto per_host = [&](const std::string& metric, const std::string& agg, const std::string& fn,
                      const std::string& window) {
    std::map<std::string, double> out;
    if (!d.has(metric)) return out;
    for (const auto& x :
         ctx.q.instant(by_host_agg(ctx.scope, agg,
                                   cat(fn, "(", ctx.scope.sel_hosts(metric, hosts), window, ")")),
                       stop, ev)) {
      out[ctx.scope.host_of(x.labels)] = x.point.v;
    }
    return out;
  };
  const std::string w = range_window(std::min(120.0, stop - d.start));
  m.util = per_host("ray_node_gpus_utilization", "avg", "avg_over_time", w);
  m.power = per_host("hw_gpu_power_watts", "avg", "avg_over_time", w);
  m.io = per_host("hw_io_pressure_full_pct", "max", "max_over_time", "[300s]");
  m.dirty = per_host("hw_mem_dirty_bytes", "max", "max_over_time", "[300s]");
  m.mem = per_host("ray_node_mem_used", "max", "max_over_time", "[300s]");
  if (d.has("hw_tcp_retransmits_total")) gather_tcp(ctx, m, hosts, stop, ev);
  if (d.has("hw_tcp_listen_drops_total")) {
    const std::vector<std::string> coord =
        m.coordinator_host.empty() ? d.hosts : std::vector<std::string>{m.coordinator_host};
    for (const auto& x : ctx.q.instant(
             "sum(increase(" + ctx.scope.sel_hosts("hw_tcp_listen_drops_total", coord) + "[5m]))",
             stop, ev)) {
      m.listen_drops += x.point.v;
    }
  }
  m.step_at_stop = d.step_at(stop);
  m.step_at_crash = d.step_at(*m.failure_time);
  for (const auto& h : hosts) {
    if (d.ghost_at(h, stop)) m.ghost_at_stop.push_back(h);
  }
  m.stop_in_checkpoint = d.in_checkpoint(stop);
  return m;
}

PlaybookResult run_heartbeat(Context& ctx) {
  std::vector<QueryRecord> evidence;
  const HeartbeatMetrics m = gather_heartbeat(ctx, &evidence);
  PlaybookResult r = judge_heartbeat(m, ctx.gpu, ctx.th.network, ctx.th.host);
  r.evidence = std::move(evidence);
  return r;
}

}  // namespace triage::tsdb
