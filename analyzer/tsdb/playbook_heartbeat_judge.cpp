// Playbook 2's judgement: were the tasks the coordination service declared dead really dead?
// Looked at when the heartbeats stopped (crash time minus the heartbeat timeout), not at the
// crash.
#include <algorithm>

#include "analyzer/tsdb/playbook_heartbeat.h"
#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

constexpr double kDefaultHeartbeatTimeout = 100;  // JAX's default heartbeat timeout (seconds)

std::vector<std::string> accused_with_metrics(const HeartbeatMetrics& m) {
  std::vector<std::string> out;
  for (const auto& h : m.accused_in_log) {
    if (std::find(m.job_hosts.begin(), m.job_hosts.end(), h) != m.job_hosts.end()) out.push_back(h);
  }
  return out;
}

// The accused hosts sorted by what their readings show.
struct Reading {
  std::vector<std::string> dead, net_hosts, io_hosts;
};

bool alive(const HeartbeatMetrics& m, const GpuThresholds& g, const std::string& h) {
  const bool util_known = m.util.count(h) != 0;
  const bool power_known = m.power.count(h) != 0;
  bool up = util_known && m.util.at(h) > g.util_low_pct;
  if (power_known && g.has_power_levels()) up = up || m.power.at(h) >= g.active_min_w;
  return up;
}

Reading read_hosts(const HeartbeatMetrics& m, const std::vector<std::string>& hosts,
                   const GpuThresholds& g, const NetworkThresholds& net,
                   const HostThresholds& host) {
  Reading rd;
  for (const auto& h : hosts) {
    if (!alive(m, g, h)) rd.dead.push_back(h);
    const double base = m.tcp_base.count(h) != 0 ? m.tcp_base.at(h) : 0;
    if (m.tcp.count(h) != 0 && m.tcp.at(h) > net.tcp_retrans_per_s &&
        m.tcp.at(h) > net.spike_factor * base) {
      rd.net_hosts.push_back(h);
    }
    if ((m.io.count(h) != 0 && m.io.at(h) >= host.io_pressure_high_pct) ||
        (m.dirty.count(h) != 0 && m.dirty.at(h) >= host.dirty_high_bytes)) {
      rd.io_hosts.push_back(h);
    }
  }
  return rd;
}

EvidenceTable hosts_table(const HeartbeatMetrics& m, const std::vector<std::string>& hosts,
                          double stop) {
  EvidenceTable t;
  t.title = "Accused hosts at the heartbeat-stop time " + fmt_time(stop) + " (crash " +
            fmt_time(*m.failure_time) + " − " + fmt(heartbeat_timeout(m), 0) + " s)";
  t.columns = {"Host",
               "GPU utilisation",
               "GPU power",
               "TCP retransmits",
               "I/O pressure (full, max 5m)",
               "Dirty pages",
               "Host memory"};
  auto cell = [](const std::map<std::string, double>& v, const std::string& h,
                 std::string (*f)(double)) {
    auto it = v.find(h);
    return it == v.end() ? std::string("–") : f(it->second);
  };
  for (const auto& h : hosts) {
    t.rows.push_back({h, cell(m.util, h, fmt_pct), cell(m.power, h, fmt_watts),
                      cell(m.tcp, h, fmt_rate), cell(m.io, h, fmt_pct), cell(m.dirty, h, fmt_bytes),
                      cell(m.mem, h, fmt_bytes)});
  }
  return t;
}

// Training progress across the stop, ghost data and checkpoint saves: context for any verdict.
void context_findings(const HeartbeatMetrics& m, double stop, PlaybookResult& r) {
  if (m.step_at_stop && m.step_at_crash && *m.step_at_crash > *m.step_at_stop) {
    r.add_finding(Severity::kInfo,
                  "training advanced from step " + std::to_string(*m.step_at_stop) + " to " +
                      std::to_string(*m.step_at_crash) + " after the heartbeats supposedly stopped",
                  {}, stop);
  }
  if (!m.ghost_at_stop.empty()) {
    r.notes.push_back(
        "hw_* data of " + list_names(m.ghost_at_stop) +
        " is ghost data at the heartbeat-stop time (the exporter's collection loop was stuck)");
  }
  if (m.stop_in_checkpoint)
    r.add_finding(Severity::kInfo, "the heartbeat-stop time falls in a checkpoint save", {}, stop);
}

void cause(PlaybookResult& r, double stop, const std::string& host, const std::string& metric,
           const std::string& domain, const std::string& text) {
  r.anomalies.push_back(Anomaly{.time = stop,
                                .host = host,
                                .metric = metric,
                                .domain = domain,
                                .kind = "cause",
                                .text = text});
}

// The tasks were alive: say what kept their heartbeats from arriving.
void judge_false_positive(const HeartbeatMetrics& m, const Reading& rd,
                          const std::vector<std::string>& hosts, double stop, PlaybookResult& r) {
  const std::string healthy = "At the heartbeat-stop time (" + fmt_time(stop) +
                              ") the accused host(s) " + list_names(hosts) + " were busy training";
  if (!rd.net_hosts.empty() || m.listen_drops > 0) {
    r.verdict = "false-positive-network";
    r.summary = healthy + ", but " +
                (rd.net_hosts.empty()
                     ? "the coordinator dropped " + fmt(m.listen_drops, 0) + " incoming connections"
                     : "TCP retransmits spiked on " + list_names(rd.net_hosts)) +
                ": a transient network problem kept heartbeat RPCs from reaching the coordinator. "
                "The tasks were alive.";
    for (const auto& h : rd.net_hosts)
      cause(r, stop, h, "hw_tcp_retransmits_total", "network", "TCP retransmit spike on " + h);
    if (m.listen_drops > 0) {
      cause(r, stop, m.coordinator_host, "hw_tcp_listen_drops_total", "network",
            "coordinator listen-queue drops (" + fmt(m.listen_drops, 0) + ")");
    }
  } else if (!rd.io_hosts.empty()) {
    r.verdict = "false-positive-io";
    r.summary = healthy + ", under heavy I/O (pressure or dirty-page backlog on " +
                list_names(rd.io_hosts) +
                "): writeback stalled the heartbeat thread. The tasks were alive.";
    for (const auto& h : rd.io_hosts)
      cause(r, stop, h, "hw_io_pressure_full_pct", "io", "I/O pressure / writeback on " + h);
  } else {
    r.verdict = "false-positive";
    r.summary = healthy +
                ", with a clean network and low I/O pressure: the heartbeat mechanism declared "
                "healthy tasks dead (the known shared-gRPC-channel false positive).";
  }
  r.next_steps.push_back(
      "Raise jax_distributed_heartbeat_timeout_seconds to several hours (e.g. 14400) so heartbeats "
      "cannot kill productive training; detect hangs from step progress instead.");
}

}  // namespace

double heartbeat_timeout(const HeartbeatMetrics& m) {
  return m.timeout_s && *m.timeout_s > 0 ? *m.timeout_s : kDefaultHeartbeatTimeout;
}

double heartbeat_stop(const HeartbeatMetrics& m) {
  return std::clamp(m.failure_time.value_or(m.end) - heartbeat_timeout(m), m.start + m.scrape_s,
                    m.end);
}

std::vector<std::string> heartbeat_hosts(const HeartbeatMetrics& m) {
  std::vector<std::string> out = accused_with_metrics(m);
  return out.empty() ? m.job_hosts : out;
}

bool heartbeat_judgeable(const HeartbeatMetrics& m) {
  return m.failure_time && m.end - m.start >= 4 * m.scrape_s;
}

PlaybookResult judge_heartbeat(const HeartbeatMetrics& m, const GpuThresholds& g,
                               const NetworkThresholds& net, const HostThresholds& host) {
  PlaybookResult r = new_playbook("heartbeat");
  if (!m.failure_time) {
    r.verdict = "inconclusive";
    r.summary = "No crash time from the log: the heartbeat-stop time cannot be computed.";
    return r;
  }
  if (!(m.timeout_s && *m.timeout_s > 0))
    r.notes.push_back("heartbeat timeout not found in the log; assumed JAX's default of 100 s");
  if (!heartbeat_judgeable(m)) {
    r.verdict = "inconclusive";
    r.summary = "The TSDB window is too short to judge the heartbeat-stop time.";
    return r;
  }
  const double stop = heartbeat_stop(m);
  r.window_start = stop - 300;
  r.window_end = *m.failure_time;
  const std::vector<std::string> hosts = heartbeat_hosts(m);
  if (accused_with_metrics(m).empty()) {
    r.notes.push_back(m.accused_in_log.empty()
                          ? "no accused hosts from the log: every host of the job is checked"
                          : "none of the accused hosts (" + list_names(m.accused_in_log) +
                                ") has metrics; every host of the job is checked");
  }
  r.hosts = hosts;
  r.tables.push_back(hosts_table(m, hosts, stop));
  context_findings(m, stop, r);
  const Reading rd = read_hosts(m, hosts, g, net, host);
  if (!rd.dead.empty()) {
    r.verdict = "true-positive";
    r.hosts = rd.dead;
    r.summary =
        list_names(rd.dead) +
        " showed no GPU activity (or no metrics) when the heartbeats stopped at " + fmt_time(stop) +
        ": the tasks there had really stopped. Look for an OOM kill, a GPU error or a crash on "
        "those hosts.";
    for (const auto& h : rd.dead)
      cause(r, stop, h, "ray_node_gpus_utilization", "node",
            h + " idle or silent at the heartbeat stop");
    r.next_steps.push_back(
        "Run the host-OOM and hardware playbooks for " + list_names(rd.dead) +
        " (slurm-triage tsdb --playbook 3,4) and read those hosts' kernel logs.");
    return r;
  }
  if (!m.ghost_at_stop.empty() && m.ghost_at_stop.size() == hosts.size()) {
    r.verdict = "inconclusive";
    r.summary =
        "The accused hosts' metrics were ghost data at the heartbeat-stop time; their health "
        "cannot be read.";
    return r;
  }
  judge_false_positive(m, rd, hosts, stop, r);
  return r;
}

}  // namespace triage::tsdb
