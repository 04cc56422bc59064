// The HTTP endpoint: /metrics for Prometheus, and the munge-authenticated /v1 endpoints peers use.
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/metrics_text.h"
#include "agent/munge_auth.h"
#include "collector/health/node_health.h"
#include "common/build_config.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

std::string json_body(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string error_response(int status, const std::string& why) {
  return http_response(status, "application/json", json_body({{"error", why}}));
}

// "/v1/jobs/4242/events" -> 4242
std::optional<uint64_t> job_from_path(const std::string& path) {
  static constexpr std::string_view kPrefix = "/v1/jobs/";
  static constexpr std::string_view kSuffix = "/events";
  if (path.size() <= kPrefix.size() + kSuffix.size() ||
      path.compare(0, kPrefix.size(), kPrefix) != 0 ||
      path.compare(path.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
    return std::nullopt;
  }
  const auto id = parse_uint(
      std::string_view(path).substr(kPrefix.size(), path.size() - kPrefix.size() - kSuffix.size()));
  if (!id || *id == 0) return std::nullopt;
  return id;
}

}  // namespace

void Agent::on_http_input(StreamServer::Conn& c) {
  HttpRequest req;
  const HttpParseResult p = parse_http_request(c.in, cfg_.http_max_header_bytes, req);
  if (p.state == HttpParse::kIncomplete) return;
  std::string response;
  if (p.state == HttpParse::kError) {
    ++stats_.http_requests[p.status];
    response = error_response(p.status, p.message);
  } else {
    response = handle_http(req);
  }
  c.in.clear();
  c.ignore_input = true;
  c.close_after_flush = true;
  http_->send(c, response);
}

std::string Agent::handle_http(const HttpRequest& req) {
  auto answer = [&](int status, const std::string& text) {
    ++stats_.http_requests[status];
    return text;
  };
  if (req.method != "GET") {
    return answer(
        405, http_response(405, "application/json", json_body({{"error", "only GET is supported"}}),
                           "Allow: GET\r\n"));
  }
  if (req.path == "/metrics") {
    return answer(200,
                  http_response(200, "text/plain; version=0.0.4; charset=utf-8", render_metrics()));
  }
  const std::optional<uint64_t> job_id = job_from_path(req.path);
  if (req.path != "/v1/health" && !job_id)
    return answer(404, error_response(404, "no such endpoint"));

  // Munge: the credential must decode, carry this exact request target, and come from someone
  // entitled to the answer.
  auto auth = req.headers.find("authorization");
  static constexpr std::string_view kScheme = "Munge ";
  if (auth == req.headers.end() || auth->second.compare(0, kScheme.size(), kScheme) != 0) {
    return answer(401, http_response(401, "application/json",
                                     json_body({{"error", "a munge credential is required"}}),
                                     "WWW-Authenticate: Munge\r\n"));
  }
  const MungeDecoded cred = munge_verify(cfg_.munge_socket, auth->second.substr(kScheme.size()));
  if (!cred.ok) {
    spdlog::warn("http: refused a credential: {}", cred.error);
    return answer(401, error_response(401, cred.error));
  }
  if (cred.payload != req.target) {
    return answer(401, error_response(401, "the credential was issued for another request"));
  }
  if (!job_id) {
    nlohmann::json h = health_report();
    return answer(200, http_response(200, "application/json", json_body(h)));
  }
  const JobRecord* j = job(*job_id);
  if (!privileged(cred.uid) && (j == nullptr || !j->uid || *j->uid != cred.uid)) {
    return answer(403, error_response(403, "uid " + std::to_string(cred.uid) +
                                               " may not read job " + std::to_string(*job_id)));
  }
  const auto q = parse_query(req.query);
  const int64_t start = q.count("start") != 0 ? parse_int(q.at("start")).value_or(0) * 1000000 : 0;
  const int64_t end = q.count("end") != 0 ? parse_int(q.at("end")).value_or(0) * 1000000 : 0;
  NodeEvidence n;
  if (j != nullptr) {
    n = node_evidence(*j, start, end);
  } else {
    // The node never heard of the job (its plugin messages were lost): node-wide events in the
    // window the leader gives are still this node's evidence.
    JobRecord unknown;
    unknown.job_id = *job_id;
    n = node_evidence(unknown, start, end);
  }
  return answer(200, http_response(200, "application/json", json_body(n)));
}

nlohmann::json Agent::health_report() {
  nlohmann::json h;
  call([&] {
    h["host"] = cfg_.node_name;
    h["boot_id"] = boot_id_;
    h["verdict"] = verdict_;
    if (dstate_) {
      h["dstate"] = dstate_->summary();
      if (!dstate_->skipped_pids.empty()) h["dstate_skipped_pids"] = dstate_->skipped_pids;
    }
    nlohmann::json stuck = nlohmann::json::array();
    if (sysfs_) {
      for (const auto& s : sysfs_->stuck)
        stuck.push_back({{"path", s.path}, {"since_usec", s.since_usec}});
    }
    h["stuck_sysfs_reads"] = stuck;
    h["drain"] = {{"policy", cfg_.drain_policy},
                  {"recommended", verdict_.verdict == "drain-recommended"},
                  {"state", drain_state_}};
    if (!drain_reason_.empty()) h["drain"]["reason"] = drain_reason_;
    h["recent_analyses"] = nlohmann::json(
        std::vector<nlohmann::json>(recent_summaries_.begin(), recent_summaries_.end()));
    h["spool"] = {{"write_failures", spool_.write_failures()}, {"last_error", spool_.last_error()}};
    h["kernel"] = kernel_status();
    h["kernel"]["position"] = kernel_position_;  // durable: where a restart resumes
    h["node_events"] = events_.size();
    h["version"] = kVersion;
  });
  return h;
}

std::string Agent::render_metrics() {
  MetricsText m;
  const MetricsText::Labels host = {{"host", cfg_.node_name}};
  auto with = [&](MetricsText::Labels extra) {
    extra["host"] = cfg_.node_name;
    return extra;
  };

  m.family("hw_oom_kills_total", "counter", "OOM killer invocations seen in the kernel log.");
  m.sample("hw_oom_kills_total", host, stats_.oom_kills);
  m.family("hw_dmesg_gpu_errors_total", "counter",
           "GPU and GPU-driver errors seen in the kernel log.");
  m.sample("hw_dmesg_gpu_errors_total", host, stats_.gpu_errors);
  if (dstate_) {
    if (dstate_->procs_blocked) {
      m.family("hw_procs_blocked", "gauge", "Tasks blocked on I/O (/proc/stat procs_blocked).");
      m.sample("hw_procs_blocked", host, *dstate_->procs_blocked);
    }
    if (dstate_->procs_running) {
      m.family("hw_procs_running", "gauge", "Runnable tasks (/proc/stat procs_running).");
      m.sample("hw_procs_running", host, *dstate_->procs_running);
    }
  }
  if (sysfs_) {
    static const char* kSeedBlocks[] = {"umc", "xgmi", "gfx", "mmhub", "sdma"};
    for (const auto& c : sysfs_->ras) {
      const std::string block = collector::ras_metric_block(c.block);
      const bool seed =
          std::find(std::begin(kSeedBlocks), std::end(kSeedBlocks), block) != std::end(kSeedBlocks);
      const MetricsText::Labels l = with({{"gpu", c.card}, {"device", c.device}});
      if (seed) {
        for (const char* type : {"ue", "ce"}) {
          const std::string name = "hw_gpu_ras_" + block + "_" + type + "_total";
          m.family(name, "counter",
                   std::string(type == std::string("ue") ? "Uncorrectable" : "Correctable") + " " +
                       block + " RAS errors (amdgpu sysfs counter).");
          m.sample(name, l, type == std::string("ue") ? c.ue : c.ce);
        }
      }
      m.family("triage_gpu_ras_errors_total", "counter",
               "amdgpu RAS error counters of every block.");
      m.sample("triage_gpu_ras_errors_total",
               with({{"gpu", c.card}, {"device", c.device}, {"block", c.block}, {"type", "ue"}}),
               c.ue);
      m.sample("triage_gpu_ras_errors_total",
               with({{"gpu", c.card}, {"device", c.device}, {"block", c.block}, {"type", "ce"}}),
               c.ce);
    }
    for (const auto& a : sysfs_->aer) {
      if (!a.card.empty()) {
        const std::string name = "hw_gpu_pcie_" + a.severity + "_total";
        m.family(name, "counter", "PCIe " + a.severity + " errors of the GPU (AER counter).");
        m.sample(name, with({{"gpu", a.card}, {"device", a.device}}), a.total);
      }
      m.family("triage_pcie_aer_errors_total", "counter",
               "PCIe AER error counters of every device.");
      m.sample("triage_pcie_aer_errors_total",
               with({{"device", a.device}, {"severity", a.severity}}), a.total);
    }
    m.family("triage_stuck_sysfs_reads", "gauge", "sysfs reads stuck in the kernel right now.");
    m.sample("triage_stuck_sysfs_reads", host, static_cast<uint64_t>(sysfs_->stuck.size()));
    m.family("triage_sysfs_read_errors", "gauge",
             "sysfs counter files that could not be read or parsed.");
    m.sample("triage_sysfs_read_errors", host, static_cast<uint64_t>(sysfs_->errors.size()));
  }

  const KernelIngestStatus k = kernel_status();
  m.family("triage_kernel_source_up", "gauge",
           "1 while the kernel log source is open and read (0: failing, retrying, or off).");
  m.sample("triage_kernel_source_up", with({{"source", k.source}}),
           static_cast<uint64_t>(k.state == "reading" || k.state == "waiting" ? 1 : 0));
  m.family("triage_kernel_source_errors_total", "counter",
           "Failures to open or read the kernel log source (each one is retried).");
  m.sample("triage_kernel_source_errors_total", host, k.source_errors);
  m.family("triage_kernel_records_total", "counter", "Kernel log records read.");
  m.sample("triage_kernel_records_total", host, k.records);
  m.family("triage_kernel_records_lost_total", "counter",
           "Kernel log records lost before the agent could read them (kmsg overruns).");
  m.sample("triage_kernel_records_lost_total", host, k.lost_records);
  m.family("triage_kernel_record_gaps_total", "counter",
           "Places where an unknown number of kernel records may be lost (a vacuumed journal "
           "cursor).");
  m.sample("triage_kernel_record_gaps_total", host, k.loss_gaps);

  m.family("triage_events_total", "counter", "Node events by kind.");
  for (const auto& [kind, n] : stats_.events_by_kind)
    m.sample("triage_events_total", with({{"kind", kind}}), n);
  m.family("triage_events_duplicate_total", "counter",
           "Events dropped because the spool already had them (replays).");
  m.sample("triage_events_duplicate_total", host, stats_.duplicates_dropped);
  m.family("triage_node_events", "gauge", "Node events held in memory.");
  m.sample("triage_node_events", host, static_cast<uint64_t>(events_.size()));

  if (dstate_) {
    m.family("triage_dstate_tasks", "gauge", "Processes in D state at the last sample.");
    m.sample("triage_dstate_tasks", host, static_cast<uint64_t>(dstate_->tasks.size()));
    m.family("triage_dstate_persistent_tasks", "gauge",
             "Processes in D state across samples (stuck).");
    m.sample("triage_dstate_persistent_tasks", host, dstate_->persistent);
    m.family("triage_dstate_tasks_by_wchan", "gauge",
             "Processes in D state by kernel wait channel.");
    for (const auto& [w, n] : dstate_->by_wchan)
      m.sample("triage_dstate_tasks_by_wchan", with({{"wchan", w}}), n);
    m.family("triage_dstate_skipped_pids", "gauge",
             "Processes the last sample could not read (hung /proc entries).");
    m.sample("triage_dstate_skipped_pids", host,
             static_cast<uint64_t>(dstate_->skipped_pids.size() + dstate_->stuck_pids.size()));
  }

  m.family("triage_node_health", "gauge", "1 for the node's current verdict.");
  for (const char* v : {"healthy", "degraded", "drain-recommended"}) {
    m.sample("triage_node_health", with({{"verdict", v}}),
             static_cast<uint64_t>(verdict_.verdict == v ? 1 : 0));
  }
  m.family("triage_drain_recommended", "gauge", "1 when the agent recommends draining this node.");
  m.sample("triage_drain_recommended", host,
           static_cast<uint64_t>(verdict_.verdict == "drain-recommended" ? 1 : 0));
  m.family("triage_drain_state", "gauge", "1 for the auto-drain state (DrainPolicy=auto).");
  m.sample("triage_drain_state", with({{"state", drain_state_}}), static_cast<uint64_t>(1));

  m.family("triage_spool_write_failures_total", "counter",
           "Spool writes that failed (disk full, I/O errors).");
  m.sample("triage_spool_write_failures_total", host, spool_.write_failures());
  m.family("triage_spool_pending_events", "gauge",
           "Events held in memory because the spool could not take them.");
  m.sample("triage_spool_pending_events", host, static_cast<uint64_t>(pending_events_.size()));
  m.family("triage_spool_dropped_events_total", "counter",
           "Events given up on because the spool could not take them for too long.");
  m.sample("triage_spool_dropped_events_total", host, stats_.spool_dropped_events);
  m.family("triage_spool_bytes", "gauge", "Spool size.");
  m.sample("triage_spool_bytes", with({{"area", "events"}}),
           static_cast<uint64_t>(stats_.spool_usage.event_bytes));
  m.sample("triage_spool_bytes", with({{"area", "jobs"}}),
           static_cast<uint64_t>(stats_.spool_usage.job_bytes));
  m.family("triage_spool_torn_lines_total", "counter",
           "Incomplete spool lines cut off at start (interrupted writes).");
  m.sample("triage_spool_torn_lines_total", host, stats_.spool_torn_lines);

  m.family("triage_lifecycle_messages_total", "counter", "Lifecycle messages accepted, by op.");
  for (const auto& [op, n] : stats_.lifecycle)
    m.sample("triage_lifecycle_messages_total", with({{"op", op}}), n);
  m.family("triage_socket_rejected_total", "counter", "Socket requests refused, by reason.");
  for (const auto& [why, n] : stats_.rejected)
    m.sample("triage_socket_rejected_total", with({{"reason", why}}), n);
  if (socket_) {
    m.family("triage_socket_clients", "gauge", "Connected socket clients.");
    m.sample("triage_socket_clients", host, static_cast<uint64_t>(socket_->connections()));
    m.family("triage_socket_refused_connections_total", "counter",
             "Socket connections refused (too many clients).");
    m.sample("triage_socket_refused_connections_total", host, socket_->refused());
    m.family("triage_socket_timeouts_total", "counter", "Socket clients dropped for idling.");
    m.sample("triage_socket_timeouts_total", host, socket_->timed_out());
  }
  m.family("triage_inbox_files_total", "counter", "Inbox files applied or refused.");
  m.sample("triage_inbox_files_total", with({{"result", "applied"}}), stats_.inbox_applied);
  m.sample("triage_inbox_files_total", with({{"result", "refused"}}), stats_.inbox_refused);

  m.family("triage_http_requests_total", "counter", "HTTP requests by status code.");
  for (const auto& [code, n] : stats_.http_requests) {
    m.sample("triage_http_requests_total", with({{"code", std::to_string(code)}}), n);
  }
  if (http_) {
    m.family("triage_http_timeouts_total", "counter",
             "HTTP connections cut off for being too slow.");
    m.sample("triage_http_timeouts_total", host, http_->timed_out());
    m.family("triage_http_refused_connections_total", "counter",
             "HTTP connections refused (too many).");
    m.sample("triage_http_refused_connections_total", host, http_->refused());
  }

  m.family("triage_analyses_total", "counter", "Job analyses run by this node, by result.");
  for (const auto& [r, n] : stats_.analyses)
    m.sample("triage_analyses_total", with({{"result", r}}), n);
  m.family("triage_analyses_running", "gauge", "Analyses running now.");
  m.sample("triage_analyses_running", host, static_cast<uint64_t>(analyses_.running()));
  m.family("triage_analyses_queued", "gauge", "Ended jobs waiting for their analysis.");
  m.sample("triage_analyses_queued", host, static_cast<uint64_t>(analysis_queue_.size()));
  m.family("triage_peer_fetch_failures_total", "counter",
           "Peers that did not deliver their evidence.");
  m.sample("triage_peer_fetch_failures_total", host, stats_.peer_fetch_failures);

  m.family("triage_jobs_in_memory", "gauge", "Jobs held in memory.");
  m.sample("triage_jobs_in_memory", host, static_cast<uint64_t>(jobs_.jobs().size()));
  m.family("triage_agent_info", "gauge", "The agent's version and boot.");
  m.sample("triage_agent_info", with({{"version", kVersion}, {"boot_id", boot_id_}}),
           static_cast<uint64_t>(1));
  m.family("triage_agent_start_time_seconds", "gauge", "When the agent started.");
  m.sample("triage_agent_start_time_seconds", host,
           static_cast<uint64_t>(stats_.started_usec / 1000000));
  return m.text();
}

}  // namespace triage::agent
