// Playbook 2: were the tasks the coordination service declared dead really dead? Looked at when
// the heartbeats stopped (crash time minus the heartbeat timeout), not at the crash.
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

constexpr double kDefaultHeartbeatTimeout = 100;  // JAX's default heartbeat timeout (seconds)

}  // namespace

PlaybookResult run_heartbeat(Context& ctx) {
  PlaybookResult r = new_playbook("heartbeat");
  const auto& d = ctx.disc;
  const auto& g = ctx.gpu;
  auto* ev = &r.evidence;
  if (!ctx.req.failure_time) {
    r.verdict = "inconclusive";
    r.summary = "No crash time from the log: the heartbeat-stop time cannot be computed.";
    return r;
  }
  double timeout = kDefaultHeartbeatTimeout;
  if (ctx.req.heartbeat_timeout_s && *ctx.req.heartbeat_timeout_s > 0) {
    timeout = *ctx.req.heartbeat_timeout_s;
  } else {
    r.notes.push_back("heartbeat timeout not found in the log; assumed JAX's default of 100 s");
  }
  if (d.end - d.start < 4 * d.scrape_s) {
    r.verdict = "inconclusive";
    r.summary = "The TSDB window is too short to judge the heartbeat-stop time.";
    return r;
  }
  const double crash = *ctx.req.failure_time;
  const double stop = std::clamp(crash - timeout, d.start + d.scrape_s, d.end);
  r.window_start = stop - 300;
  r.window_end = crash;

  std::vector<std::string> accused;
  for (const auto& h : ctx.req.accused_hosts) {
    if (std::find(d.hosts.begin(), d.hosts.end(), h) != d.hosts.end()) accused.push_back(h);
  }
  if (accused.empty()) {
    accused = d.hosts;
    r.notes.push_back(ctx.req.accused_hosts.empty()
                          ? "no accused hosts from the log: every host of the job is checked"
                          : "none of the accused hosts (" + list_names(ctx.req.accused_hosts) +
                                ") has metrics; every host of the job is checked");
  }
  r.hosts = accused;
  const std::string w = "[" + dur(std::min(120.0, stop - d.start)) + "]";
  auto per_host_mean = [&](const std::string& metric) {
    std::map<std::string, double> out;
    if (!d.has(metric)) return out;
    auto s = ctx.q.instant(
        by_host_agg(ctx.scope, "avg",
                    "avg_over_time(" + ctx.scope.sel_hosts(metric, accused) + w + ")"),
        stop, ev);
    for (const auto& x : s)
      out[ctx.scope.host_of(x.labels)] = x.point.v;
    return out;
  };
  const auto util = per_host_mean("ray_node_gpus_utilization");
  const auto power = per_host_mean("hw_gpu_power_watts");
  auto max5 = [&](const std::string& metric) {
    std::map<std::string, double> out;
    if (!d.has(metric)) return out;
    for (const auto& x : ctx.q.instant(
             by_host_agg(ctx.scope, "max",
                         "max_over_time(" + ctx.scope.sel_hosts(metric, accused) + "[300s])"),
             stop, ev)) {
      out[ctx.scope.host_of(x.labels)] = x.point.v;
    }
    return out;
  };
  const auto io = max5("hw_io_pressure_full_pct");
  const auto dirty = max5("hw_mem_dirty_bytes");
  const auto mem = max5("ray_node_mem_used");
  std::map<std::string, double> tcp, tcp_base;
  if (d.has("hw_tcp_retransmits_total")) {
    tcp =
        by_host(ctx.scope,
                ctx.q.instant(
                    by_host_sum(ctx.scope,
                                "rate(" + ctx.scope.sel_hosts("hw_tcp_retransmits_total", accused) +
                                    "[5m])"),
                    stop, ev));
    if (stop - 300 - d.start >= 600) {
      tcp_base = by_host(
          ctx.scope,
          ctx.q.instant(
              by_host_sum(ctx.scope, "rate(" +
                                         ctx.scope.sel_hosts("hw_tcp_retransmits_total", accused) +
                                         "[" + dur(std::min(3600.0, stop - 300 - d.start)) + "])"),
              stop - 300, ev));
    }
  }
  double listen_drops = 0;
  if (d.has("hw_tcp_listen_drops_total")) {
    const std::vector<std::string> coord = ctx.req.coordinator_host.empty()
                                               ? d.hosts
                                               : std::vector<std::string>{ctx.req.coordinator_host};
    for (const auto& x : ctx.q.instant(
             "sum(increase(" + ctx.scope.sel_hosts("hw_tcp_listen_drops_total", coord) + "[5m]))",
             stop, ev)) {
      listen_drops += x.point.v;
    }
  }
  // Did training advance between the heartbeat stop and the crash? Then the "dead" tasks were
  // computing, and every rank with them.
  const auto step_at_stop = d.step_at(stop);
  const auto step_at_crash = d.step_at(crash);

  EvidenceTable t;
  t.title = "Accused hosts at the heartbeat-stop time " + fmt_time(stop) + " (crash " +
            fmt_time(crash) + " − " + fmt(timeout, 0) + " s)";
  t.columns = {"Host",
               "GPU utilisation",
               "GPU power",
               "TCP retransmits",
               "I/O pressure (full, max 5m)",
               "Dirty pages",
               "Host memory"};
  auto cell = [](const std::map<std::string, double>& m, const std::string& h,
                 std::string (*f)(double)) {
    auto it = m.find(h);
    return it == m.end() ? std::string("–") : f(it->second);
  };
  std::vector<std::string> dead, net_hosts, io_hosts, ghost_hosts;
  for (const auto& h : accused) {
    t.rows.push_back({h, cell(util, h, fmt_pct), cell(power, h, fmt_watts), cell(tcp, h, fmt_rate),
                      cell(io, h, fmt_pct), cell(dirty, h, fmt_bytes), cell(mem, h, fmt_bytes)});
    if (d.ghost_at(h, stop)) ghost_hosts.push_back(h);
    const bool util_known = util.count(h) != 0;
    const bool power_known = power.count(h) != 0;
    bool alive = false;
    if (util_known) alive = util.at(h) > g.util_low_pct;
    if (power_known && g.has_power_levels()) alive = alive || power.at(h) >= g.active_min_w;
    if (!util_known && !power_known) alive = false;
    if (!alive) dead.push_back(h);
    const double base = tcp_base.count(h) != 0 ? tcp_base.at(h) : 0;
    if (tcp.count(h) != 0 && tcp.at(h) > ctx.th.network.tcp_retrans_per_s &&
        tcp.at(h) > ctx.th.network.spike_factor * base) {
      net_hosts.push_back(h);
    }
    if ((io.count(h) != 0 && io.at(h) >= ctx.th.host.io_pressure_high_pct) ||
        (dirty.count(h) != 0 && dirty.at(h) >= ctx.th.host.dirty_high_bytes)) {
      io_hosts.push_back(h);
    }
  }
  r.tables.push_back(std::move(t));
  if (step_at_stop && step_at_crash && *step_at_crash > *step_at_stop) {
    r.findings.push_back({"info",
                          "training advanced from step " + std::to_string(*step_at_stop) + " to " +
                              std::to_string(*step_at_crash) +
                              " after the heartbeats supposedly stopped",
                          {},
                          stop});
  }
  if (!ghost_hosts.empty()) {
    r.notes.push_back(
        "hw_* data of " + list_names(ghost_hosts) +
        " is ghost data at the heartbeat-stop time (the exporter's collection loop was stuck)");
  }
  if (d.in_checkpoint(stop))
    r.findings.push_back({"info", "the heartbeat-stop time falls in a checkpoint save", {}, stop});

  auto cause = [&](const std::string& host, const std::string& metric, const std::string& domain,
                   const std::string& text) {
    Anomaly a{.time = stop,
              .host = host,
              .metric = metric,
              .domain = domain,
              .kind = "cause",
              .text = text};
    r.anomalies.push_back(a);
  };

  if (!dead.empty()) {
    r.verdict = "true-positive";
    r.hosts = dead;
    r.summary =
        list_names(dead) +
        " showed no GPU activity (or no metrics) when the heartbeats stopped at " + fmt_time(stop) +
        ": the tasks there had really stopped. Look for an OOM kill, a GPU error or a crash on "
        "those hosts.";
    for (const auto& h : dead)
      cause(h, "ray_node_gpus_utilization", "node", h + " idle or silent at the heartbeat stop");
    r.next_steps.push_back(
        "Run the host-OOM and hardware playbooks for " + list_names(dead) +
        " (slurm-triage tsdb --class unknown-death) and read those hosts' kernel logs.");
    return r;
  }
  if (!ghost_hosts.empty() && ghost_hosts.size() == accused.size()) {
    r.verdict = "inconclusive";
    r.summary =
        "The accused hosts' metrics were ghost data at the heartbeat-stop time; their health "
        "cannot be read.";
    return r;
  }
  const std::string healthy = "At the heartbeat-stop time (" + fmt_time(stop) +
                              ") the accused host(s) " + list_names(accused) +
                              " were busy training";
  if (!net_hosts.empty() || listen_drops > 0) {
    r.verdict = "false-positive-network";
    r.summary = healthy + ", but " +
                (net_hosts.empty()
                     ? "the coordinator dropped " + fmt(listen_drops, 0) + " incoming connections"
                     : "TCP retransmits spiked on " + list_names(net_hosts)) +
                ": a transient network problem kept heartbeat RPCs from reaching the coordinator. "
                "The tasks were alive.";
    for (const auto& h : net_hosts)
      cause(h, "hw_tcp_retransmits_total", "network", "TCP retransmit spike on " + h);
    if (listen_drops > 0) {
      cause(ctx.req.coordinator_host, "hw_tcp_listen_drops_total", "network",
            "coordinator listen-queue drops (" + fmt(listen_drops, 0) + ")");
    }
  } else if (!io_hosts.empty()) {
    r.verdict = "false-positive-io";
    r.summary = healthy + ", under heavy I/O (pressure or dirty-page backlog on " +
                list_names(io_hosts) +
                "): writeback stalled the heartbeat thread. The tasks were alive.";
    for (const auto& h : io_hosts)
      cause(h, "hw_io_pressure_full_pct", "io", "I/O pressure / writeback on " + h);
  } else {
    r.verdict = "false-positive";
    r.summary = healthy +
                ", with a clean network and low I/O pressure: the heartbeat mechanism declared "
                "healthy tasks "
                "dead (the known shared-gRPC-channel false positive).";
  }
  r.next_steps.push_back(
      "Raise jax_distributed_heartbeat_timeout_seconds to several hours (e.g. 14400) so heartbeats "
      "cannot kill productive training; detect hangs from step progress instead.");
  return r;
}

}  // namespace triage::tsdb
