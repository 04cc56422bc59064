#include "agent/server/agent_metrics.h"

#include <algorithm>
#include <initializer_list>
#include <iterator>
#include <string_view>

#include "agent/net/metrics_text.h"
#include "collector/health/node_health.h"
#include "collector/sysfs/ib_judgement.h"
#include "common/build_config.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

using Labels = MetricsText::Labels;

// The page being written; every sample carries the host label.
struct Page {
  MetricsText m;
  const std::string& host_name;

  Labels host() const { return {{"host", host_name}}; }
  Labels with(Labels extra) const {
    extra["host"] = host_name;
    return extra;
  }
  // A family with one host-labelled sample.
  void single(const std::string& name, const char* type, const std::string& help, uint64_t value) {
    m.family(name, type, help);
    m.sample(name, host(), value);
  }
};

uint64_t as_count(size_t n) {
  return static_cast<uint64_t>(n);
}

void kernel_log_counters(Page& p, const NodeState::Stats& s) {
  p.single("hw_oom_kills_total", "counter", "OOM killer invocations seen in the kernel log.",
           s.oom_kills);
  p.single("hw_dmesg_gpu_errors_total", "counter",
           "GPU and GPU-driver errors seen in the kernel log.", s.gpu_errors);
}

void proc_stat_gauges(Page& p, const collector::DStateSample& d) {
  if (d.procs_blocked) {
    p.single("hw_procs_blocked", "gauge", "Tasks blocked on I/O (/proc/stat procs_blocked).",
             *d.procs_blocked);
  }
  if (d.procs_running) {
    p.single("hw_procs_running", "gauge", "Runnable tasks (/proc/stat procs_running).",
             *d.procs_running);
  }
}

void gpu_ras(Page& p, const collector::SysfsSnapshot& sysfs) {
  static const char* kSeedBlocks[] = {"umc", "xgmi", "gfx", "mmhub", "sdma"};
  for (const auto& c : sysfs.ras) {
    const std::string block = collector::ras_metric_block(c.block);
    const bool seed =
        std::find(std::begin(kSeedBlocks), std::end(kSeedBlocks), block) != std::end(kSeedBlocks);
    if (seed) {
      for (const char* type : {"ue", "ce"}) {
        const bool ue = std::string_view(type) == "ue";
        const std::string name = "hw_gpu_ras_" + block + "_" + type + "_total";
        p.m.family(name, "counter",
                   std::string(ue ? "Uncorrectable" : "Correctable") + " " + block +
                       " RAS errors (amdgpu sysfs counter).");
        p.m.sample(name, p.with({{"gpu", c.card}, {"device", c.device}}), ue ? c.ue : c.ce);
      }
    }
    p.m.family("triage_gpu_ras_errors_total", "counter",
               "amdgpu RAS error counters of every block.");
    p.m.sample("triage_gpu_ras_errors_total",
               p.with({{"gpu", c.card}, {"device", c.device}, {"block", c.block}, {"type", "ue"}}),
               c.ue);
    p.m.sample("triage_gpu_ras_errors_total",
               p.with({{"gpu", c.card}, {"device", c.device}, {"block", c.block}, {"type", "ce"}}),
               c.ce);
  }
}

void pcie_aer(Page& p, const collector::SysfsSnapshot& sysfs) {
  for (const auto& a : sysfs.aer) {
    if (!a.card.empty()) {
      const std::string name = "hw_gpu_pcie_" + a.severity + "_total";
      p.m.family(name, "counter", "PCIe " + a.severity + " errors of the GPU (AER counter).");
      p.m.sample(name, p.with({{"gpu", a.card}, {"device", a.device}}), a.total);
    }
    p.m.family("triage_pcie_aer_errors_total", "counter",
               "PCIe AER error counters of every device.");
    p.m.sample("triage_pcie_aer_errors_total",
               p.with({{"device", a.device}, {"severity", a.severity}}), a.total);
  }
}

// Per InfiniBand/RoCE port, never per job: a port serves every job on the node.
void ib_ports(Page& p, const collector::SysfsSnapshot& sysfs) {
  for (const auto& port : sysfs.ib) {
    const Labels labels = p.with({{"device", port.device}, {"port", port.port}});
    p.m.family("triage_ib_port_up", "gauge",
               "1 while the InfiniBand/RoCE port is ACTIVE and LinkUp (sysfs), else 0.");
    p.m.sample("triage_ib_port_up", labels,
               static_cast<uint64_t>(collector::ib_port_down(port) || port.state.empty() ? 0 : 1));
    if (port.rate_gbps) {
      p.m.family("triage_ib_port_rate_gbps", "gauge", "The port's link rate in Gb/s (sysfs rate).");
      p.m.sample("triage_ib_port_rate_gbps", labels, *port.rate_gbps);
    }
    for (const auto& [counter, value] : port.counters) {
      p.m.family("triage_ib_port_errors_total", "counter",
                 "The port's error counters (sysfs counters/ and hw_counters/), by name.");
      p.m.sample("triage_ib_port_errors_total",
                 p.with({{"device", port.device}, {"port", port.port}, {"counter", counter}}),
                 value);
    }
  }
}

void sysfs_reader(Page& p, const collector::SysfsSnapshot& sysfs) {
  p.single("triage_stuck_sysfs_reads", "gauge", "sysfs reads stuck in the kernel right now.",
           as_count(sysfs.stuck.size()));
  p.single("triage_sysfs_read_errors", "gauge",
           "sysfs counter files that could not be read or parsed.", as_count(sysfs.errors.size()));
}

void kernel_source(Page& p, const KernelIngestStatus& k) {
  p.m.family("triage_kernel_source_up", "gauge",
             "1 while the kernel log source is open and read (0: failing, retrying, or off).");
  p.m.sample("triage_kernel_source_up", p.with({{"source", k.source}}),
             static_cast<uint64_t>(k.state == "reading" || k.state == "waiting" ? 1 : 0));
  p.single("triage_kernel_source_errors_total", "counter",
           "Failures to open or read the kernel log source (each one is retried).",
           k.source_errors);
  p.single("triage_kernel_records_total", "counter", "Kernel log records read.", k.records);
  p.single("triage_kernel_records_lost_total", "counter",
           "Kernel log records lost before the agent could read them (kmsg overruns).",
           k.lost_records);
  p.single("triage_kernel_record_gaps_total", "counter",
           "Places where an unknown number of kernel records may be lost (a vacuumed journal "
           "cursor).",
           k.loss_gaps);
}

void node_events(Page& p, const NodeState& node) {
  p.m.family("triage_events_total", "counter", "Node events by kind.");
  for (const auto& [kind, n] : node.stats().events_by_kind)
    p.m.sample("triage_events_total", p.with({{"kind", kind}}), n);
  p.single("triage_events_duplicate_total", "counter",
           "Events dropped because the spool already had them (replays).",
           node.stats().duplicates_dropped);
  p.single("triage_node_events", "gauge", "Node events held in memory.",
           as_count(node.events().size()));
}

void dstate(Page& p, const collector::DStateSample& d) {
  p.single("triage_dstate_tasks", "gauge", "Processes in D state at the last sample.",
           as_count(d.tasks.size()));
  p.single("triage_dstate_persistent_tasks", "gauge",
           "Processes in D state across samples (stuck).", d.persistent);
  p.m.family("triage_dstate_tasks_by_wchan", "gauge",
             "Processes in D state by kernel wait channel.");
  for (const auto& [w, n] : d.by_wchan)
    p.m.sample("triage_dstate_tasks_by_wchan", p.with({{"wchan", w}}), n);
  p.single("triage_dstate_skipped_pids", "gauge",
           "Processes the last sample could not read (hung /proc entries).",
           as_count(d.skipped_pids.size() + d.stuck_pids.size()));
}

void node_health(Page& p, const DrainController& health) {
  const std::string& verdict = health.verdict().verdict;
  p.m.family("triage_node_health", "gauge", "1 for the node's current verdict.");
  for (const char* v : {"healthy", "degraded", "drain-recommended"}) {
    p.m.sample("triage_node_health", p.with({{"verdict", v}}),
               static_cast<uint64_t>(verdict == v ? 1 : 0));
  }
  p.single("triage_drain_recommended", "gauge", "1 when the agent recommends draining this node.",
           static_cast<uint64_t>(verdict == "drain-recommended" ? 1 : 0));
  p.m.family("triage_drain_state", "gauge", "1 for the auto-drain state (DrainPolicy=auto).");
  p.m.sample("triage_drain_state", p.with({{"state", health.drain_state()}}),
             static_cast<uint64_t>(1));
}

void spool(Page& p, const NodeState& node) {
  const NodeState::Stats& s = node.stats();
  p.single("triage_spool_write_failures_total", "counter",
           "Spool writes that failed (disk full, I/O errors).", node.spool().write_failures());
  p.single("triage_spool_pending_events", "gauge",
           "Events held in memory because the spool could not take them.",
           as_count(node.pending_events()));
  p.single("triage_spool_dropped_events_total", "counter",
           "Events given up on because the spool could not take them for too long.",
           s.spool_dropped_events);
  p.m.family("triage_spool_bytes", "gauge", "Spool size.");
  p.m.sample("triage_spool_bytes", p.with({{"area", "events"}}),
             static_cast<uint64_t>(s.spool_usage.event_bytes));
  p.m.sample("triage_spool_bytes", p.with({{"area", "jobs"}}),
             static_cast<uint64_t>(s.spool_usage.job_bytes));
  p.single("triage_spool_torn_lines_total", "counter",
           "Incomplete spool lines cut off at start (interrupted writes).", s.spool_torn_lines);
}

uint64_t refusal_count(const StreamServer& server, const std::string& reason) {
  const auto it = server.refused().find(reason);
  return it == server.refused().end() ? 0 : it->second;
}

uint64_t timeouts(const StreamServer& server) {
  return refusal_count(server, "idle") + refusal_count(server, "slow");
}

// One series per reason, each from the start (no uid or address labels: those would grow without
// bound and tell every scraper who is connected).
void refusals(Page& p, const std::string& name, const std::string& help, const StreamServer& server,
              std::initializer_list<const char*> reasons) {
  p.m.family(name, "counter", help);
  for (const char* why : reasons)
    p.m.sample(name, p.with({{"reason", why}}), refusal_count(server, why));
}

void socket(Page& p, const SocketApi& socket) {
  const SocketApi::Stats& s = socket.stats();
  p.m.family("triage_lifecycle_messages_total", "counter", "Lifecycle messages accepted, by op.");
  for (const auto& [op, n] : s.lifecycle)
    p.m.sample("triage_lifecycle_messages_total", p.with({{"op", op}}), n);
  p.m.family("triage_socket_rejected_total", "counter", "Socket requests refused, by reason.");
  for (const auto& [why, n] : s.rejected)
    p.m.sample("triage_socket_rejected_total", p.with({{"reason", why}}), n);
  if (const StreamServer* server = socket.server()) {
    // SocketPath and the root socket beside it, counted as one.
    const StreamServer* root = socket.root_server();
    p.single("triage_socket_clients", "gauge", "Connected socket clients.",
             as_count(server->connections() + (root != nullptr ? root->connections() : 0)));
    const char* name = "triage_socket_refused_connections_total";
    p.m.family(
        name, "counter",
        "Socket connections refused (per-uid: the uid holds its share; full: no slot left) "
        "or cut off (idle: no complete request in time; slow: the answer not read in time).");
    for (const char* why : {"per-uid", "full", "idle", "slow"}) {
      p.m.sample(name, p.with({{"reason", why}}),
                 refusal_count(*server, why) + (root != nullptr ? refusal_count(*root, why) : 0));
    }
    p.single("triage_socket_timeouts_total", "counter",
             "Socket clients dropped for idling or not reading (idle + slow).",
             timeouts(*server) + (root != nullptr ? timeouts(*root) : 0));
  }
  p.m.family("triage_inbox_files_total", "counter", "Inbox files applied or refused.");
  p.m.sample("triage_inbox_files_total", p.with({{"result", "applied"}}), s.inbox_applied);
  p.m.sample("triage_inbox_files_total", p.with({{"result", "refused"}}), s.inbox_refused);
}

void http(Page& p, const HttpApi& http) {
  p.m.family("triage_http_requests_total", "counter", "HTTP requests by status code.");
  for (const auto& [code, n] : http.stats().requests)
    p.m.sample("triage_http_requests_total", p.with({{"code", std::to_string(code)}}), n);
  if (const StreamServer* server = http.server()) {
    p.single("triage_http_timeouts_total", "counter",
             "HTTP connections cut off for being too slow (idle + slow).", timeouts(*server));
    refusals(p, "triage_http_refused_connections_total",
             "HTTP connections refused (per-address: the address holds its share; full: no slot "
             "left; scrapes: HttpMaxScrapes /metrics answers in flight) or cut off (idle: no "
             "complete request in time; slow: the answer not read in time; displaced: no request "
             "yet when a newer connection needed the slot).",
             *server, {"per-address", "full", "idle", "slow", "displaced"});
    p.m.sample("triage_http_refused_connections_total", p.with({{"reason", "scrapes"}}),
               http.stats().scrapes_refused);
  }
}

void analyses(Page& p, const JobEndPipeline& pipeline) {
  p.m.family("triage_analyses_total", "counter", "Job analyses run by this node, by result.");
  for (const auto& [r, n] : pipeline.stats().analyses)
    p.m.sample("triage_analyses_total", p.with({{"result", r}}), n);
  p.single("triage_analyses_running", "gauge", "Analyses running now.",
           as_count(pipeline.running()));
  p.single("triage_analyses_queued", "gauge", "Ended jobs waiting for their analysis.",
           as_count(pipeline.queued()));
  p.single("triage_peer_fetch_failures_total", "counter",
           "Peers that did not deliver their evidence.", pipeline.stats().peer_fetch_failures);
}

void agent_info(Page& p, const NodeState& node, int64_t started_usec) {
  p.single("triage_jobs_in_memory", "gauge", "Jobs held in memory.",
           as_count(node.jobs().jobs().size()));
  p.m.family("triage_agent_info", "gauge", "The agent's version and boot.");
  p.m.sample("triage_agent_info", p.with({{"version", kVersion}, {"boot_id", node.boot_id()}}),
             static_cast<uint64_t>(1));
  p.single("triage_agent_start_time_seconds", "gauge", "When the agent started.",
           static_cast<uint64_t>(started_usec / 1000000));
}

}  // namespace

// The live loop (issue 15). No job label: a series per job would grow without bound; the job's
// record and its AdminComment say which job.
void live_hangs(Page& p, const LiveMonitor& live) {
  const LiveMonitor::Stats& s = live.stats();
  p.single("triage_live_jobs_followed", "gauge",
           "Running jobs whose logs this node follows for live hang detection.",
           as_count(live.followed()));
  p.single("triage_live_hangs_total", "counter", "Running jobs flagged as hung (hang (live)).",
           s.hangs);
  // Prometheus's base unit is the second: GPU-seconds (divide by 3600 for GPU-hours).
  p.m.family("triage_live_stalled_gpu_seconds_total", "counter",
             "GPU-seconds of flagged jobs between their last step and their resumption or end.");
  p.m.sample("triage_live_stalled_gpu_seconds_total", p.host(), s.stalled_gpu_hours * 3600);
  p.single("triage_live_early_warnings_total", "counter",
           "Failure lines (first of their class) seen in running jobs' logs.", s.early_warnings);
  p.m.family("triage_live_hang_actions_total", "counter",
             "Hang actions the agent carried out (scancel, scontrol requeue worked), by action.");
  for (const char* a : {"cancel", "requeue"}) {
    const auto it = s.actions.find(a);
    p.m.sample("triage_live_hang_actions_total", p.with({{"action", a}}),
               it == s.actions.end() ? uint64_t{0} : it->second);
  }
  p.single("triage_live_hang_action_failures_total", "counter",
           "Tries of a hang action whose command failed (each is tried up to 3 times).",
           s.action_failures);
  p.single("triage_live_hang_actions_not_done_total", "counter",
           "Hang actions not run: slurmctld showed another attempt of the job, or it no longer "
           "ran.",
           s.actions_not_done);
  p.single("triage_live_comment_failures_total", "counter",
           "AdminComment updates for flagged jobs that failed.", s.comment_failures);
  p.single("triage_live_poll_failures_total", "counter",
           "Polls of a running job's log that failed (unreadable log, read error).",
           s.poll_failures);
  p.single("triage_live_log_bytes_total", "counter", "Bytes of running jobs' logs scanned.",
           s.bytes_scanned);
  p.single("triage_live_pace_warnings_total", "counter",
           "Pace warnings raised in running jobs (a lasting slowdown or a straggler began).",
           s.pace_warnings);
  p.single("triage_live_jobs_pace_warned", "gauge",
           "Running jobs whose pace warning stands now (a lasting slowdown or a straggler).",
           as_count(live.pace_warned()));
}

std::string render_agent_metrics(const AgentMetricsSources& in) {
  Page p{MetricsText{}, in.host};
  const NodeState& node = in.node;
  kernel_log_counters(p, node.stats());
  if (node.dstate()) proc_stat_gauges(p, *node.dstate());
  if (node.sysfs()) {
    gpu_ras(p, *node.sysfs());
    pcie_aer(p, *node.sysfs());
    ib_ports(p, *node.sysfs());
    sysfs_reader(p, *node.sysfs());
  }
  kernel_source(p, in.kernel);
  node_events(p, node);
  if (node.dstate()) dstate(p, *node.dstate());
  node_health(p, in.health);
  spool(p, node);
  socket(p, in.socket);
  http(p, in.http);
  analyses(p, in.analyses);
  agent_info(p, node, in.started_usec);
  if (in.fleet != nullptr && in.history != nullptr)
    render_fleet_metrics(p.m, {in.host, *in.fleet, *in.history, in.health, now_usec()});
  if (in.live != nullptr) live_hangs(p, *in.live);
  return p.m.text();
}

}  // namespace triage::agent
