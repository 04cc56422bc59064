#include "agent/agent.h"

#include <signal.h>

#include <future>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "agent/health/preflight.h"
#include "agent/history/history_gather.h"
#include "agent/history/switch_topology.h"
#include "agent/job_end/peer_evidence.h"
#include "agent/live/busy_wait_probe.h"
#include "agent/live/hang_commands.h"
#include "agent/server/agent_metrics.h"
#include "agent/slurm/job_comment.h"
#include "agent/slurm/job_ref.h"
#include "common/build_config.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

Agent::Agent(AgentConfig config, std::unique_ptr<SlurmClient> slurm, AgentOptions options)
    : cfg_(std::move(config)),
      opts_(std::move(options)),
      slurm_(std::move(slurm)),
      // One more than the analyses need, for the live follower's polls.
      workers_(cfg_.analysis_concurrency + 2),
      node_(cfg_, loop_),
      feeds_(cfg_, loop_, node_),
      health_(
          cfg_, loop_, node_, workers_, slurm_, [this](const std::string& state) { notify(state); },
          opts_.health_commands),
      history_({cfg_.spool_dir + "/history", {cfg_.history_days, cfg_.history_max_jobs}}),
      pipeline_(
          cfg_, loop_, node_, workers_, slurm_, opts_.peer_url,
          [this](const JobRecord& j, int64_t start, int64_t end) {
            return node_evidence(j, start, end);
          },
          JobEndPipeline::KernelReader{[this] { return feeds_.kernel_status(); },
                                       [this] { feeds_.kernel_look_again(); }}),
      comments_({parse_comment_field(cfg_.accounting_comment).value_or(CommentField::kNone),
                 cfg_.spool_dir},
                loop_, workers_,
                slurm_command_runner(std::chrono::milliseconds(cfg_.slurm_command_timeout_ms))),
      requeue_(
          loop_, workers_, comments_,
          slurm_command_runner(std::chrono::milliseconds(cfg_.slurm_command_timeout_ms)),
          load_job(), [this] { return suspects_in(history_.records()); }, cfg_.spool_dir),
      live_(cfg_, loop_, node_, live_hooks()),
      socket_(cfg_, loop_, node_, callers_,
              SocketApi::Hooks{[this] { return health_on_loop(); },
                               [this](const JobRecord& j) { return node_evidence(j, 0, 0); },
                               [this](JobRecord& j) { job_ended(j); },
                               [this](uint64_t job_id, const std::string& gpus) {
                                 return preflight_on_loop(job_id, gpus);
                               }}),
      http_(cfg_, loop_, node_, callers_,
            HttpApi::Hooks{
                [this] { return health_on_loop(); }, [this] { return metrics_on_loop(); },
                [this](const JobRecord& j, int64_t start, int64_t end) {
                  return node_evidence(j, start, end);
                },
                [this](int64_t since) { return history_.answer(cfg_.node_name, since); },
                [this](const OutcomeRecord& r) { return history_.add(r, now_usec() / 1000000); }}) {
  node_.set_on_change([this] { health_.schedule(); });
  health_.set_health_fresh([this] {
    const bool reader = opts_.kernel_ingest && cfg_.kernel_source != "none";
    return health_pass_fresh(reader, feeds_.kernel_status().caught_up_usec, opts_.collectors,
                             node_.dstate().has_value(), node_.sysfs().has_value());
  });
  pipeline_.set_on_outcome([this](const OutcomeRecord& r) {
    fleet_.count_outcome(r);
    (void)history_.add(r, now_usec() / 1000000);
  });
  pipeline_.set_on_analysed([this](AnalysedJob a) { requeue_.on_analysed(std::move(a)); });
  requeue_.set_on_result([this](const JobRequeue::Result& r) {
    if (r.outcome == RequeueOutcome::kRequeue || r.outcome == RequeueOutcome::kRefuse)
      fleet_.count_requeue(r.requeued ? RequeueResult::kDone : RequeueResult::kRefused, r.code);
  });
  requeue_.set_attempt_records(
      [this](uint64_t job_id) {
        std::vector<OutcomeRecord> out;
        for (const OutcomeRecord& r : history_.records())
          if (r.job_id == job_id) out.push_back(r);
        return out;
      },
      [this](uint64_t job_id, int64_t since, const std::vector<std::string>& nodes) {
        // Each peer at its NodeAddr, as the evidence is fetched; only the target differs.
        std::vector<PeerRequest> requests =
            peer_requests(slurm_, job_id, nodes, EvidenceWindow{}, cfg_.node_name, opts_.peer_url);
        for (PeerRequest& r : requests)
          r.target = "/v1/history?since=" + std::to_string(since);
        std::vector<OutcomeRecord> found =
            job_records_in_answers(fetch_from_peers(requests, peer_fetch_options(cfg_)), job_id);
        spdlog::info("job {}: {} record(s) of its attempts from {} other node(s)", job_id,
                     found.size(), requests.size());
        return found;
      });
  pipeline_.set_live_record([this](uint64_t job_id, int restart_count) {
    return live_.hand_over(job_id, restart_count);
  });
  // Each node's leaf switch, from slurmctld's topology (one scontrol per multi-node job's end).
  pipeline_.set_leaf_switches(
      [this] { return current_topology(static_cast<int>(cfg_.slurm_command_timeout_ms)).leaf_of; });
}

Agent::~Agent() {
  stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  for (auto& t : ticks_)
    t->stop();
  // After the loop: a hand-over still waiting on it has been answered (or refused) by now.
  feeds_.shut_down();
  workers_.stop();
  pipeline_.kill_all();
  requeue_.kill_all();
  live_.kill_all();
}

void Agent::start() {
  // A client that goes away mid-answer must not kill the agent.
  (void)::signal(SIGPIPE, SIG_IGN);  // cannot fail for a valid signal number
  started_usec_ = now_usec();
  callers_.slurm_uid = lookup_user(cfg_.slurm_user);
  if (!callers_.slurm_uid)
    spdlog::warn("SlurmUser '{}' does not exist; only root may post lifecycle messages",
                 cfg_.slurm_user);
  node_.open(opts_.boot_id.empty() ? read_agent_boot_id(cfg_.proc_root, cfg_.boot_id_file)
                                   : opts_.boot_id);
  history_.open(now_usec() / 1000000);
  comments_.open();
  requeue_.open();

  socket_.open();
  http_.open();
  if (!opts_.peer_url) {
    // Every node's agent listens on the same configured port.
    const int port = cfg_.http_port != 0 ? cfg_.http_port : http_.port();
    opts_.peer_url = [port](const std::string& node) {
      return "http://" + node + ":" + std::to_string(port);
    };
  }
  socket_.watch_inbox();
  socket_.scan_inbox();
  pipeline_.resume_waiting();  // jobs that ended before a restart
  if (opts_.collectors) feeds_.start_collectors();

  start_ticks();
  node_.maintain([this](uint64_t id) { return pipeline_.busy(id); });
  health_.evaluate();
  started_ = true;
  feeds_.start_kernel_ingest(opts_.kernel_ingest);
  notify("READY=1\nSTATUS=serving; " + std::to_string(node_.events().size()) + " node events, " +
         std::to_string(node_.jobs().jobs().size()) + " jobs");
  spdlog::info("agent {} ready: socket {}, http {}:{}, drain policy {}", cfg_.node_name,
               cfg_.socket_path, cfg_.http_address, http_.port(), cfg_.drain_policy);
}

// Periodic work on the loop: health, inbox backstop, maintenance, systemd watchdog. Each tick runs
// at once and then every interval; its work is posted to the loop.
void Agent::start_ticks() {
  auto every = [this](const char* name, int64_t ms, std::function<void()> fn) {
    ticks_.push_back(std::make_unique<PeriodicThread>(
        name, ms, [this, fn = std::move(fn)] { (void)loop_.post(fn); }));
    ticks_.back()->start();
  };
  every("health", 1000, [this] { health_.evaluate(); });
  every("live", kLivePollMs, [this] { live_.tick(live_now()); });
  every("inbox", 30000, [this] { socket_.scan_inbox(); });
  every("maintain", 60000, [this] {
    node_.maintain([this](uint64_t id) { return pipeline_.busy(id); });
    history_.maintain(now_usec() / 1000000);
  });
  uint64_t watchdog_usec = 0;
  if (opts_.notify_systemd && sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
    every("watchdog", static_cast<int64_t>(watchdog_usec / 2000),
          [] { sd_notify(0, "WATCHDOG=1"); });
  }
}

void Agent::run() {
  loop_.run();
}

void Agent::run_in_background() {
  loop_thread_ = std::thread([this] { loop_.run(); });
  // Wait until the loop thread is the one running tasks.
  call([] {});
}

void Agent::stop() {
  if (!started_.exchange(false)) return;
  notify("STOPPING=1");
  feeds_.stop_kernel_ingest();
  loop_.post([this] {
    socket_.stop();
    http_.stop();
    pipeline_.kill_all();
    requeue_.kill_all();
    live_.kill_all();
  });
  loop_.stop();
}

void Agent::notify(const std::string& state) {
  if (opts_.notify_systemd) sd_notify(0, state.c_str());
}

void Agent::call(const std::function<void()>& fn) {
  if (loop_.on_loop_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  if (!loop_.post([&] {
        fn();
        done.set_value();
      })) {
    throw std::runtime_error("the agent is stopping");
  }
  fut.wait();
}

bool Agent::ingest(std::vector<KernelEvent> events, std::string position) {
  return node_.ingest(std::move(events), std::move(position));
}

std::string Agent::kernel_position() {
  return node_.durable_position();
}

NodeVerdict Agent::verdict() {
  NodeVerdict v;
  call([&] { v = health_.verdict(); });
  return v;
}

std::string Agent::metrics() {
  std::string m;
  call([&] { m = metrics_on_loop(); });
  return m;
}

nlohmann::json Agent::health_report() {
  nlohmann::json h;
  call([&] { h = health_on_loop(); });
  return h;
}

NodeEvidence Agent::node_evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec) {
  return node_.evidence(job, start_usec, end_usec, health_.verdict());
}

std::string Agent::metrics_on_loop() {
  const KernelIngestStatus kernel = feeds_.kernel_status();
  return render_agent_metrics(AgentMetricsSources{cfg_.node_name, node_, kernel, health_, socket_,
                                                  http_, pipeline_, started_usec_, &fleet_,
                                                  &history_, &live_});
}

JobRequeue::LoadJob Agent::load_job() {
  return [this](uint64_t job_id, std::string& error) {
    return slurm_.with([&](SlurmClient* c) -> std::optional<JobFacts> {
      if (c == nullptr) {
        error = "no slurmctld client";
        return std::nullopt;
      }
      return c->load_job(job_id, error);
    });
  };
}

LiveMonitor::Hooks Agent::live_hooks() {
  LiveMonitor::Hooks h;
  h.offload = [this](std::function<std::function<void()>()> work) {
    (void)workers_.submit([this, work = std::move(work)] { (void)loop_.post(work()); });
  };
  h.load_job = load_job();
  h.run_command = slurm_command_runner(std::chrono::milliseconds(cfg_.slurm_command_timeout_ms));
  h.own_evidence = [this](const JobRecord& j, int64_t start, int64_t end) {
    return node_evidence(j, start, end);
  };
  h.remote_evidence = [this, prometheus = busy_wait_settings(cfg_)](
                          const JobFacts& facts, int64_t stalled_since_usec, int64_t now_usec) {
    RemoteEvidence r;
    r.peers = fetch_peer_evidence(slurm_, facts.job_id, facts.nodes,
                                  EvidenceWindow{facts.start_time, now_usec / 1000000},
                                  cfg_.node_name, opts_.peer_url, peer_fetch_options(cfg_));
    const BusyWaitReading bw = probe_busy_wait(
        prometheus, StalledJob{facts.nodes, facts.start_time * 1000000, stalled_since_usec, ""},
        now_usec);
    if (bw.asked) {
      spdlog::info("job {}: cluster Prometheus: {}", facts.job_id,
                   log_text(bw.error.empty() ? bw.line : bw.error));
    }
    r.busy_wait = bw.busy_wait;
    r.busy_wait_line = bw.line;
    return r;
  };
  return h;
}

nlohmann::json Agent::preflight_on_loop(uint64_t job_id, const std::string& gpus) {
  // Only what the agent already holds: the prolog waits at most 50 ms for this answer.
  PreflightFacts facts;
  facts.verdict = health_.verdict();
  facts.ports_down = node_.ib_ports_down_now();
  if (const auto& d = node_.dstate()) facts.leftovers = stuck_leftovers(*d, node_.jobs());
  if (const auto& g = node_.gpu_holders()) {
    facts.leftovers = merge_leftovers(
        std::move(facts.leftovers),
        gpu_leftovers(*g, node_.jobs(), now_usec(), cfg_.leftover_grace_sec * 1000000));
  }
  if (const auto& s = node_.sysfs()) facts.gpus_present = s->gpus;
  facts.gpus_expected = parse_job_gpus(gpus);
  const PreflightAnswer a = decide_preflight(facts);
  ++preflight_answers_[a.fit ? "fit" : "unfit"];
  if (a.fit) return {{"fit", true}};
  const std::string reason = preflight_reason(a);
  spdlog::warn("preflight: job {} refused on {}: {}", job_id, cfg_.node_name, log_text(reason));
  refused_jobs_.insert(job_id);
  health_.label_preflight_drain(reason);
  record_refusal(job_id, reason);
  // At most 8 lines: the prolog reads the answer into a fixed buffer.
  std::vector<std::string> evidence;
  for (const auto& line : a.evidence) {
    if (evidence.size() == 8) break;
    evidence.push_back(line);
  }
  return {{"fit", false}, {"reason", reason}, {"evidence", evidence}};
}

void Agent::job_ended(JobRecord& j) {
  // slurmd runs the epilog of an attempt whose prolog the preflight failed here: that attempt
  // never ran, Slurm requeued the job, and its next attempt is analysed where it runs.
  if (refused_jobs_.erase(j.job_id) > 0) {
    spdlog::info("job {}: its end on {} follows the preflight's refusal here; not analysed here",
                 j.job_id, cfg_.node_name);
    return;
  }
  pipeline_.on_job_end(j);
}

void Agent::record_refusal(uint64_t job_id, const std::string& reason) {
  // On a worker: slurmctld's AdminComment as it stands, then ours merged in. Only root and
  // Slurm's operators may write that field, so the next attempt's reader can trust it.
  const std::string node = cfg_.node_name;
  const bool submitted = workers_.submit([this, job_id, node, reason] {
    std::string error;
    const std::optional<JobFacts> facts = load_job()(job_id, error);
    if (!facts) {
      spdlog::error("preflight: job {} not marked as refused: {}", job_id, log_text(error));
      return;
    }
    const CommentMerge merge =
        merge_refused_comment(facts->admin_comment, compose_refused_segment(node, reason));
    if (!merge.write) {
      spdlog::info("preflight: job {}'s AdminComment left as it is: {}", job_id,
                   log_text(merge.reason));
      return;
    }
    try {
      const SlurmCommandResult done = slurm_command_runner(std::chrono::milliseconds(
          cfg_.slurm_command_timeout_ms))(set_admin_comment_argv(job_ref(*facts), merge.value));
      if (!done.ok) {
        spdlog::error("preflight: job {} not marked as refused: {}", job_id, log_text(done.error));
      }
    } catch (const JobRefError& e) {
      spdlog::error("preflight: job {} not marked as refused: {}", job_id, log_text(e.what()));
    }
  });
  if (!submitted) spdlog::error("preflight: no worker free to mark job {} as refused", job_id);
}

nlohmann::json Agent::health_on_loop() {
  nlohmann::json h;
  h["host"] = cfg_.node_name;
  h["boot_id"] = node_.boot_id();
  h["verdict"] = health_.verdict();
  if (const auto& d = node_.dstate()) {
    h["dstate"] = d->summary();
    if (!d->skipped_pids.empty()) h["dstate_skipped_pids"] = d->skipped_pids;
  }
  nlohmann::json stuck = nlohmann::json::array();
  if (const auto& s = node_.sysfs()) {
    for (const auto& r : s->stuck)
      stuck.push_back({{"path", r.path}, {"since_usec", r.since_usec}});
  }
  h["stuck_sysfs_reads"] = stuck;
  h["drain"] = {{"policy", cfg_.drain_policy},
                {"recommended", health_.verdict().verdict == "drain-recommended"},
                {"state", health_.drain_state()}};
  if (!health_.drain_reason().empty()) h["drain"]["reason"] = health_.drain_reason();
  health_.describe_owner(h["drain"]);
  const auto& recent = pipeline_.recent_summaries();
  h["recent_analyses"] = nlohmann::json(std::vector<nlohmann::json>(recent.begin(), recent.end()));
  h["spool"] = {{"write_failures", node_.spool().write_failures()},
                {"last_error", node_.spool().last_error()}};
  h["kernel"] = feeds_.kernel_status();
  h["kernel"]["position"] = node_.kernel_position();  // durable: where a restart resumes
  h["node_events"] = node_.events().size();
  h["history"] = {{"kept", history_.counts().kept},
                  {"dropped", history_.counts().dropped},
                  {"set_aside", history_.counts().set_aside},
                  {"pushes", pipeline_.stats().history_pushes},
                  {"push_failures", pipeline_.stats().history_push_failures}};
  if (!preflight_answers_.empty()) h["preflight"] = preflight_answers_;
  h["version"] = kVersion;
  return h;
}

}  // namespace triage::agent
