#include "agent/base/config.h"

#include <unistd.h>

#include <sstream>

#include "common/build_config.h"
#include "common/live_stall_defaults.h"
#include "common/rules_file.h"
#include "common/text.h"
#include "common/tsdb_config_keys.h"

namespace triage::agent {

namespace {

ConfigKeySpec key(std::string name, ConfigType type, std::string def, std::string help,
                  int64_t min = INT64_MIN, int64_t max = INT64_MAX) {
  ConfigKeySpec s;
  s.name = std::move(name);
  s.type = type;
  s.default_value = std::move(def);
  s.help = std::move(help);
  s.min = min;
  s.max = max;
  return s;
}

ConfigKeySpec choice(std::string name, std::string def, std::vector<std::string> choices,
                     std::string help) {
  ConfigKeySpec s = key(std::move(name), ConfigType::kEnum, std::move(def), std::move(help));
  s.choices = std::move(choices);
  return s;
}

std::string short_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  std::string h = buf;
  if (const size_t dot = h.find('.'); dot != std::string::npos) h.resize(dot);
  return h;
}

std::vector<std::string> comma_list(const std::string& s) {
  std::vector<std::string> out;
  for (std::string_view part : split(s, ',')) {
    part = trim(part);
    if (!part.empty()) out.emplace_back(part);
  }
  return out;
}

AgentConfig map_config(const KvConfig& kv) {
  AgentConfig c;
  c.node_name = kv.get("NodeName");
  if (c.node_name.empty()) c.node_name = short_hostname();
  c.slurm_user = kv.get("SlurmUser");
  c.spool_dir = kv.get("SpoolDir");
  c.inbox_dir = kv.get("InboxDir");
  if (c.inbox_dir.empty()) c.inbox_dir = c.spool_dir + "/inbox";
  c.spool_retention_sec = kv.get_seconds("SpoolRetention");
  c.spool_max_bytes = kv.get_bytes("SpoolMaxSize");
  c.max_node_events = static_cast<size_t>(kv.get_int("MaxNodeEvents"));
  c.history_days = kv.get_int("HistoryDays");
  c.history_max_jobs = static_cast<size_t>(kv.get_int("HistoryMaxJobs"));
  c.socket_path = kv.get("SocketPath");
  c.socket_timeout_ms = kv.get_seconds("SocketTimeout") * 1000;
  c.socket_write_timeout_ms = kv.get_seconds("SocketWriteTimeout") * 1000;
  c.socket_max_clients = static_cast<size_t>(kv.get_int("SocketMaxClients"));
  c.socket_max_clients_per_user = static_cast<size_t>(kv.get_int("SocketMaxClientsPerUser"));
  c.socket_reserved_clients = static_cast<size_t>(kv.get_int("SocketReservedClients"));
  c.http_address = kv.get("HttpAddress");
  c.http_port = static_cast<int>(kv.get_int("HttpPort"));
  c.http_timeout_ms = kv.get_seconds("HttpTimeout") * 1000;
  c.http_write_timeout_ms = kv.get_seconds("HttpWriteTimeout") * 1000;
  c.http_max_connections = static_cast<size_t>(kv.get_int("HttpMaxConnections"));
  c.http_max_connections_per_address =
      static_cast<size_t>(kv.get_int("HttpMaxConnectionsPerAddress"));
  c.http_max_scrapes = static_cast<size_t>(kv.get_int("HttpMaxScrapes"));
  c.http_max_header_bytes = static_cast<size_t>(kv.get_bytes("HttpMaxHeaderSize"));
  c.munge_socket = kv.get("MungeSocket");
  c.drain_policy = to_lower(kv.get("DrainPolicy"));
  c.remediate = to_lower(kv.get("Remediate"));
  c.remediate_dry_run = to_lower(kv.get("RemediateDryRun")) == "yes";
  c.max_triage_drain_fraction = parse_double(kv.get("MaxTriageDrainFraction")).value_or(0.10);
  c.max_triage_drain_nodes = kv.get_int("MaxTriageDrainNodes");
  c.boot_id_file = kv.get("BootIdFile");
  c.kernel_source = to_lower(kv.get("KernelSource"));
  c.kernel_path = kv.get("KernelPath");
  c.rules_dir = kv.get("RulesDir");
  c.proc_root = kv.get("ProcRoot");
  c.sysfs_root = kv.get("SysfsRoot");
  c.infiniband_dir = kv.get("InfinibandDir");
  c.dstate_interval_ms = kv.get_seconds("DStateSampleInterval") * 1000;
  c.dstate_read_timeout_ms = kv.get_seconds("DStateReadTimeout") * 1000;
  c.dstate_persistent_after_sec = kv.get_seconds("DStatePersistentAfter");
  c.dstate_whole_node_interval_sec = kv.get_seconds("DStateWholeNodeInterval");
  c.cgroup_root = kv.get("CgroupRoot");
  c.sysfs_interval_ms = kv.get_seconds("SysfsSampleInterval") * 1000;
  c.sysfs_read_timeout_ms = kv.get_seconds("SysfsReadTimeout") * 1000;
  c.max_stuck_readers = static_cast<size_t>(kv.get_int("MaxStuckReaders"));
  c.gpu_device_dir = kv.get("GpuDeviceDir");
  c.gpu_holder_interval_ms = kv.get_seconds("GpuHolderScanInterval") * 1000;
  c.leftover_grace_sec = kv.get_seconds("LeftoverGrace");
  c.analyzer_path = kv.get("AnalyzerPath");
  c.analysis_timeout_sec = kv.get_seconds("AnalysisTimeout");
  c.analysis_concurrency = static_cast<size_t>(kv.get_int("AnalysisConcurrency"));
  c.analysis_output_max = static_cast<size_t>(kv.get_bytes("AnalysisOutputMax"));
  c.report_path = kv.get("ReportPath");
  c.evidence_settle_ms = kv.get_seconds("EvidenceSettleDelay") * 1000;
  c.peer_fetch_timeout_ms = kv.get_seconds("PeerFetchTimeout") * 1000;
  c.attribution_grace_sec = kv.get_seconds("AttributionGrace");
  c.accounting_comment = to_lower(kv.get("AccountingComment"));
  c.slurm_command_timeout_ms = kv.get_seconds("SlurmCommandTimeout") * 1000;
  c.hang_stall_min_sec = kv.get_seconds("HangStallMin");
  c.stall_after_sec = kv.get_seconds("StallAfter");
  c.hang_stall_factor = kv.get_int("HangStallFactor");
  c.prometheus_url = kv.get("PrometheusURL");
  c.prometheus_host_label = kv.get("PrometheusHostLabel");
  c.tsdb_query_timeout_sec = kv.get_seconds("TsdbQueryTimeout");
  c.log_level = to_lower(kv.get("LogLevel"));

  collector::HealthPolicy& h = c.health;
  h.window_usec = kv.get_seconds("HealthWindow") * 1000000;
  auto count = [&](const char* k) { return static_cast<uint64_t>(kv.get_int(k)); };
  h.gpu_reset_degraded = count("GpuResetDegradedCount");
  h.gpu_reset_drain = count("GpuResetDrainCount");
  h.ring_timeout_degraded = count("RingTimeoutDegradedCount");
  h.ring_timeout_drain = count("RingTimeoutDrainCount");
  h.hung_task_degraded = count("HungTaskDegradedCount");
  h.hung_task_drain = count("HungTaskDrainCount");
  h.ras_correctable_degraded = count("CorrectableErrorDegradedCount");
  h.pcie_nonfatal_degraded = count("PcieNonfatalDegradedCount");
  h.rcu_stall_repeat_drain = count("RcuStallRepeatDrainCount");
  h.xid31_repeat_degraded = count("Xid31RepeatDegradedCount");
  h.dstate_gpu_reboot = count("DStateGpuRebootCount");
  h.dstate_degraded = count("DStateDegradedCount");
  h.gpu_wchan_markers = comma_list(kv.get("DStateGpuWchan"));
  return c;
}

ConfigLoad finish(KvConfig& kv, std::vector<InputError> errors,
                  const std::vector<std::string>& overrides) {
  ConfigLoad out;
  for (const auto& o : overrides) {
    if (auto err = kv.set(o, "--set " + o)) errors.push_back(*err);
  }
  // Reserving every socket slot for root and SlurmUser would lock all other users out.
  if (errors.empty() && kv.get_int("SocketReservedClients") >= kv.get_int("SocketMaxClients")) {
    errors.emplace_back(kv.origin("SocketReservedClients"), 0,
                        "SocketReservedClients=" + kv.get("SocketReservedClients") +
                            " must be below SocketMaxClients=" + kv.get("SocketMaxClients") + " (" +
                            kv.origin("SocketMaxClients") + ")");
  }
  // A share of a partition: above 0 (0 would forbid every drain; DrainPolicy=recommend does that)
  // and at most 1.
  if (errors.empty()) {
    const std::optional<double> f = parse_double(kv.get("MaxTriageDrainFraction"));
    if (!f || !(*f > 0.0 && *f <= 1.0)) {
      errors.emplace_back(kv.origin("MaxTriageDrainFraction"), 0,
                          "MaxTriageDrainFraction=" + kv.get("MaxTriageDrainFraction") +
                              " must be a share of a partition above 0 and at most 1 (e.g. 0.10)");
    }
  }
  if (errors.empty() && to_lower(kv.get("Remediate")) == "reboot" &&
      to_lower(kv.get("DrainPolicy")) != "auto") {
    errors.emplace_back(kv.origin("Remediate"), 0,
                        "Remediate=reboot acts on nodes and needs DrainPolicy=auto (DrainPolicy=" +
                            kv.get("DrainPolicy") + ", " + kv.origin("DrainPolicy") + ")");
  }
  out.errors = std::move(errors);
  if (out.errors.empty()) out.config = map_config(kv);
  out.dump = kv.dump();
  return out;
}

}  // namespace

std::vector<ConfigKeySpec> agent_config_specs() {
  using T = ConfigType;
  const std::string analyzer = std::string(kInstalledBinDir) + "/slurm-triage";
  std::vector<ConfigKeySpec> specs = {
      key("NodeName", T::kString, "",
          "This node's name as Slurm knows it (SLURMD_NODENAME). Empty: the short host name."),
      key("SlurmUser", T::kString, "slurm",
          "The account slurmd/slurmctld run as; it may post lifecycle messages like root."),
      key("SpoolDir", T::kPath, "/var/spool/slurm-triage",
          "Crash-safe spool: node events, per-job records, analysis summaries (root, 0700)."),
      key("InboxDir", T::kPath, "",
          "Where the SPANK plugin drops messages when the socket does not answer. Empty: "
          "<SpoolDir>/inbox."),
      key("SpoolRetention", T::kDuration, "14d",
          "Job records and node events older than this are removed.", 3600),
      key("SpoolMaxSize", T::kBytes, "256M",
          "Upper bound of the spool; the oldest ended jobs and event segments go first.",
          1LL << 20),
      key("MaxNodeEvents", T::kInt, "20000", "Node events kept in memory (newest win).", 100,
          10000000),
      key("HistoryDays", T::kInt, "30",
          "Job outcomes (GET /v1/history, 'slurm-triage nodes --suspects') are kept this many "
          "days, and at most HistoryMaxJobs of them, whichever is smaller.",
          1, 3650),
      key("HistoryMaxJobs", T::kInt, "10000",
          "Job outcomes kept at most (about 0.5 KB of memory and of spool each).", 1, 1000000),
      key("SocketPath", T::kPath, "/run/slurm-triage/agent.sock",
          "The local Unix socket (JSON lines) for the plugin, the CLI and users."),
      key("SocketTimeout", T::kDuration, "5s",
          "A socket client must send a complete request line within this time of connecting or "
          "of its last answer; otherwise it is disconnected (a partial line does not count).",
          1, 3600),
      key("SocketWriteTimeout", T::kDuration, "10s",
          "A socket client whose answer waits unread this long is disconnected.", 1, 3600),
      key("SocketMaxClients", T::kInt, "256",
          "Concurrent socket connections, everybody together; more are refused.", 2, 65536),
      key("SocketMaxClientsPerUser", T::kInt, "8",
          "Concurrent socket connections of one uid other than root and SlurmUser; more are "
          "refused at once with an error line.",
          1, 65536),
      key("SocketReservedClients", T::kInt, "32",
          "Of SocketMaxClients, the connections only root and SlurmUser may use (the SPANK "
          "plugin's messages), whatever other users hold. Must be below SocketMaxClients.",
          0, 65535),
      key("HttpAddress", T::kString, "0.0.0.0",
          "Address of the HTTP endpoint (metrics, peer evidence); use the cluster network's."),
      key("HttpPort", T::kInt, "6829", "Port of the HTTP endpoint (0: any free port).", 0, 65535),
      key("HttpTimeout", T::kDuration, "10s",
          "An HTTP request must arrive completely within this time (slow clients are cut off).", 1,
          3600),
      key("HttpWriteTimeout", T::kDuration, "10s",
          "An HTTP client whose answer waits unread this long is disconnected.", 1, 3600),
      key("HttpMaxConnections", T::kInt, "128", "Concurrent HTTP connections; more are refused.", 1,
          65536),
      key("HttpMaxConnectionsPerAddress", T::kInt, "16",
          "Concurrent HTTP connections from one remote address; more are refused at once (503).", 1,
          65536),
      key("HttpMaxScrapes", T::kInt, "4",
          "Unauthenticated /metrics answers being sent at once; more are answered 503.", 1, 1024),
      key("HttpMaxHeaderSize", T::kBytes, "16K", "Largest accepted HTTP request head.", 1024,
          1LL << 20),
      key("MungeSocket", T::kPath, "",
          "munged's socket for peer authentication. Empty: libmunge's default."),
      choice("DrainPolicy", "recommend", {"recommend", "auto"},
             "recommend: report drain recommendations (metrics, log, 'slurm-triage nodes'); "
             "auto: also drain the node in Slurm (never overriding another drain)."),
      choice("Remediate", "off", {"off", "reboot"},
             "reboot: a fault the kernel rules mark `remedy = reboot` gets `scontrol reboot ASAP "
             "nextstate=DOWN`; the first health pass on the new boot resumes the node or leaves "
             "it DOWN with \"needs hands\" (docs/agent.md). Needs DrainPolicy=auto."),
      choice("RemediateDryRun", "no", {"no", "yes"},
             "yes: drains, reboots and resumes are logged (\"dry run: would ...\") and counted, "
             "not done."),
      key("MaxTriageDrainFraction", T::kString, "0.10",
          "The share of a partition the agents may hold drained, down or rebooting at once "
          "(counted from Slurm's node states and reasons; at least one node). Beyond it the "
          "agent recommends and alerts instead of acting."),
      key("MaxTriageDrainNodes", T::kInt, "0",
          "An absolute cap on the nodes of a partition the agents may hold out at once (0: only "
          "MaxTriageDrainFraction).",
          0, 1000000),
      key("BootIdFile", T::kPath, "",
          "Where this boot's id is read. Empty: <ProcRoot>/sys/kernel/random/boot_id (the dev "
          "cluster points this at a file its RebootProgram rewrites)."),
      choice("KernelSource", "journal", {"journal", "kmsg", "file", "none"},
             "Where kernel messages come from: the systemd journal (kernel transport), "
             "/dev/kmsg, or a text file (testing)."),
      key("KernelPath", T::kPath, "",
          "Journal directory, kmsg device or text file for KernelSource. Empty: the source's "
          "default (system journal, /dev/kmsg)."),
      key("RulesDir", T::kPath, "",
          "An extra directory of kernel .rules loaded after /etc/slurm/triage.d/."),
      key("ProcRoot", T::kPath, "/proc", "Where /proc is (tests point this at a fixture tree)."),
      key("SysfsRoot", T::kPath, "/sys", "Where /sys is (tests point this at a fixture tree)."),
      key("InfinibandDir", T::kPath, "",
          "Where the InfiniBand/RoCE devices are. Empty: <SysfsRoot>/class/infiniband (the dev "
          "cluster points each node at a fake tree)."),
      key("CgroupRoot", T::kPath, "/sys/fs/cgroup",
          "Where the cgroup tree is, in which the Slurm jobs' cgroups are found (tests point this "
          "at a fixture tree)."),
      key("DStateSampleInterval", T::kDuration, "5s", "How often D-state tasks are counted.", 1,
          3600),
      key("DStateReadTimeout", T::kDuration, "2s",
          "A /proc read slower than this is treated as hung and its pid skipped.", 1, 600),
      key("DStatePersistentAfter", T::kDuration, "60s",
          "A task in D state across samples for this long counts as stuck.", 0, 86400),
      key("DStateWholeNodeInterval", T::kDuration, "60s",
          "How often the whole process table is walked for D-state tasks; the samples between "
          "walks read only the Slurm jobs' tasks and the tasks already in D (0: walk at every "
          "sample).",
          0, 86400),
      key("SysfsSampleInterval", T::kDuration, "30s",
          "How often GPU RAS and PCIe AER counters and InfiniBand ports are read.", 1, 86400),
      key("SysfsReadTimeout", T::kDuration, "5s",
          "A sysfs read slower than this is a stuck-sysfs-read event.", 1, 600),
      key("MaxStuckReaders", T::kInt, "8",
          "Threads allowed to stay blocked in hung reads (per collector) before reads pause.", 1,
          64),
      key("GpuDeviceDir", T::kPath, "/dev",
          "Where the GPU device files are (nvidia<N>, dri/renderD<N>, kfd): the preflight's GPU "
          "inventory and the processes holding a GPU (the dev cluster points each node at a fake "
          "one)."),
      key("GpuHolderScanInterval", T::kDuration, "30s",
          "How often /proc is walked for processes of Slurm jobs holding a GPU device file open "
          "(one read of each process's cgroup file, and the open files of those in a job).",
          1, 3600),
      key("LeftoverGrace", T::kDuration, "30s",
          "A process of an ended job still holding a GPU this long after the job's end makes the "
          "preflight refuse the node. 30 s is Slurm's default KillWait, the time slurmstepd gives "
          "a job's processes between SIGTERM and SIGKILL: one still there by then is not "
          "finishing its exit.",
          0, 86400),
      key("AnalyzerPath", T::kPath, analyzer, "The slurm-triage program run for each ended job."),
      key("AnalysisTimeout", T::kDuration, "10m", "An analysis running longer is killed.", 1,
          86400),
      key("AnalysisConcurrency", T::kInt, "2", "Analyses (evidence gathering included) at once.", 1,
          64),
      key("AnalysisOutputMax", T::kBytes, "1M", "Analyzer output kept from each run.", 4096,
          64LL << 20),
      key("ReportPath", T::kString, "",
          "Where triage.md goes, as a Slurm filename pattern (%j %u %x ...). Empty: the "
          "analyzer's placement (the job dir, or beside the job's output)."),
      key("EvidenceSettleDelay", T::kDuration, "2s",
          "Longest wait after job end for the kernel log reader to catch up before evidence is "
          "gathered (late kernel lines); the wait ends as soon as it has read all there is.",
          0, 300),
      key("PeerFetchTimeout", T::kDuration, "10s",
          "Time allowed for fetching evidence from the job's other nodes.", 1, 600),
      key("AttributionGrace", T::kDuration, "60s",
          "Node-wide hardware events this long after a job's end still belong to it.", 0, 3600),
      choice("AccountingComment", "AdminComment", {"AdminComment", "Comment", "none"},
             "The job field the analysis summary (triage=<class>;blame=...;nodes=...;report=...) "
             "is merged into, through sacctmgr once the job has ended (other tools' text there is "
             "kept); none: not written. Comment is stored only with "
             "AccountingStoreFlags=job_comment."),
      key("SlurmCommandTimeout", T::kDuration, "15s",
          "Longest wait for each sacct, sacctmgr or scontrol call of the summary and of a "
          "requeue (they run beside the job-end path, never in it).",
          1, 600),
      key("HangStallMin", T::kDuration, std::to_string(kDefaultHangStallMinSeconds) + "s",
          "A running job is flagged as hung after no new step for max(HangStallFactor x its "
          "steady step time, this); checkpoint and evaluation lines and the longest gap it "
          "already survived extend it.",
          1, 604800),
      key("HangStallFactor", T::kInt, std::to_string(kDefaultHangStallFactor),
          "Steady step times of silence before a running job is flagged as hung (see "
          "HangStallMin).",
          2, 1000),
      key("StallAfter", T::kDuration, std::to_string(kDefaultStallAfterSeconds) + "s",
          "An ended job's report says its training stopped before the end (a hang, also behind "
          "a cancel) when its last step is older than max(20 x its step time, this) at the end "
          "(analyze --stall-after).",
          1, 604800),
      choice("LogLevel", "info", {"trace", "debug", "info", "warn", "error"},
             "The agent's own log verbosity."),
      key("HealthWindow", T::kDuration, "24h", "Counted health rules look this far back.", 60),
      key("GpuResetDegradedCount", T::kInt, "1", "GPU resets in the window: degraded (0: off).", 0),
      key("GpuResetDrainCount", T::kInt, "3", "GPU resets in the window: drain (0: off).", 0),
      key("RingTimeoutDegradedCount", T::kInt, "1",
          "GPU ring timeouts in the window: degraded (0: off).", 0),
      key("RingTimeoutDrainCount", T::kInt, "3", "GPU ring timeouts in the window: drain (0: off).",
          0),
      key("HungTaskDegradedCount", T::kInt, "1",
          "Hung-task reports in the window: degraded (0: off).", 0),
      key("HungTaskDrainCount", T::kInt, "10", "Hung-task reports in the window: drain (0: off).",
          0),
      key("CorrectableErrorDegradedCount", T::kInt, "10",
          "Correctable GPU RAS errors: degraded (0: off).", 0),
      key("PcieNonfatalDegradedCount", T::kInt, "1",
          "PCIe non-fatal error reports: degraded (0: off).", 0),
      key("RcuStallRepeatDrainCount", T::kInt, "1",
          "RCU stall warnings repeated for a still-stalled grace period: drain (0: off).", 0),
      key("Xid31RepeatDegradedCount", T::kInt, "2",
          "Bursts of Xid 31 on one GPU (and no other) in the window: degraded (0: off).", 0),
      key("DStateGpuRebootCount", T::kInt, "3",
          "Tasks stuck in D state in GPU driver paths: reboot at the next job boundary (0: off).",
          0),
      key("DStateDegradedCount", T::kInt, "20",
          "Tasks stuck in D state anywhere: degraded (0: off).", 0),
      key("DStateGpuWchan", T::kString, "amdgpu,cper,aca_,kfd",
          "Comma-separated wchan fragments that mark a GPU driver path."),
  };
  // The analyzer's full mode reads these from the same file (common/tsdb_config_keys.h).
  for (ConfigKeySpec& k : tsdb_config_keys())
    specs.push_back(std::move(k));
  return specs;
}

std::vector<std::string> agent_rule_layers(const AgentConfig& cfg) {
  return default_rule_layers(cfg.rules_dir.empty() ? std::vector<std::string>{}
                                                   : std::vector<std::string>{cfg.rules_dir});
}

ConfigLoad load_agent_config(const std::string& path, const std::vector<std::string>& overrides) {
  KvConfig kv(agent_config_specs());
  std::vector<InputError> errors;
  if (!path.empty()) errors = kv.parse_file(path);
  return finish(kv, std::move(errors), overrides);
}

ConfigLoad load_agent_config_text(const std::string& text, const std::string& origin) {
  KvConfig kv(agent_config_specs());
  std::vector<InputError> errors = kv.parse(text, origin);
  return finish(kv, std::move(errors), {});
}

std::string render_config_example() {
  std::ostringstream out;
  for (const ConfigKeySpec& s : agent_config_specs()) {
    out << "# " << s.help << "\n";
    if (s.type == ConfigType::kEnum) {
      std::string list;
      for (const auto& c : s.choices)
        list += (list.empty() ? "" : " | ") + c;
      out << "# One of: " << list << "\n";
    }
    out << "#" << s.name << "=" << s.default_value << "\n\n";
  }
  return out.str();
}

}  // namespace triage::agent
