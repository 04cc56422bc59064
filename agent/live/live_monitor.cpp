#include "agent/live/live_monitor.h"

#include <cstdlib>
#include <utility>

#include <spdlog/spdlog.h>

#include "agent/job_end/job_end.h"
#include "agent/live/hang_commands.h"
#include "agent/live/hang_comment.h"
#include "common/child_process.h"
#include "common/text.h"
#include "common/time_util.h"
#include "common/wait_status.h"

namespace triage::agent {

namespace {

// A follower that moved is saved at most this often (a crash re-reads at most this much).
constexpr int64_t kSaveIntervalUsec = int64_t{60} * 1000000;
// A job whose log path or owner could not be learnt is tried again after this long.
constexpr int64_t kSetupRetryUsec = int64_t{60} * 1000000;
}  // namespace

LiveMonitor::LiveMonitor(const AgentConfig& cfg, EventLoop& loop, NodeState& node, Hooks hooks)
    : cfg_(cfg), node_(node), hooks_(std::move(hooks)), reports_(loop) {
  policy_.factor = static_cast<double>(cfg_.hang_stall_factor);
  policy_.min_seconds = static_cast<double>(cfg_.hang_stall_min_sec);
}

bool LiveMonitor::load_catalog(const std::vector<std::string>& extra_layers) {
  if (plan_) return true;
  if (catalog_failed_) return false;
  std::vector<InputError> errors;
  auto catalog = std::make_unique<SignatureCatalog>(SignatureCatalog::load(extra_layers, errors));
  if (!errors.empty()) {
    spdlog::error(
        "live hang detection is off: the log-signature catalog has {} error(s), first: {}",
        errors.size(), errors.front().what());
    catalog_failed_ = true;
    return false;
  }
  catalog_ = std::move(catalog);
  plan_ = std::make_unique<ScanPlan>(*catalog_);
  return true;
}

void LiveMonitor::tick(const LiveInstant& now) {
  for (const uint64_t id : node_.jobs().running()) {
    const JobRecord* j = node_.jobs().find(id);
    if (j == nullptr || !should_follow(*j) || jobs_.count(id) != 0) continue;
    if (!load_catalog()) return;
    start(id, *j, now);
  }
  std::vector<uint64_t> ended;
  for (auto& [id, f] : jobs_) {
    const JobRecord* j = node_.jobs().find(id);
    // The job started over here (its job_end and the next attempt's start between two ticks, or
    // the job_end lost): this attempt's record is closed, the next tick follows the new one.
    const bool other_attempt = j != nullptr && f.job &&
                               (j->attempt_seq != f.attempt_seq ||
                                (j->restart_count && *j->restart_count > f.attempt.restart_count));
    if (j == nullptr || !should_follow(*j) || f.gone || other_attempt) {
      ended.push_back(id);
    } else if (!f.busy && f.job && action_pending(f.record) &&
               now.mono_usec >= f.action_retry_mono) {
      act(id, f.record.action == "cancel" ? HangOutcome::kCancel : HangOutcome::kRequeue, now);
    } else if (!f.busy && f.job) {
      poll(id, f, now);
    } else if (!f.busy && !f.job && now.mono_usec >= f.retry_mono) {
      start(id, *j, now);
    }
  }
  for (const uint64_t id : ended)
    stop(id, now);
}

void LiveMonitor::start(uint64_t job_id, const JobRecord& job, const LiveInstant& now) {
  Followed& f = jobs_[job_id];
  f.busy = true;
  f.attempt_seq = job.attempt_seq;
  const uint32_t uid = *job.uid;
  const std::optional<uint32_t> gid = job.gid;
  hooks_.offload([this, job_id, uid, gid, now]() -> std::function<void()> {
    // On a worker: slurmctld and the passwd database may be slow.
    std::string error;
    std::optional<JobFacts> facts = hooks_.load_job(job_id, error);
    std::optional<Identity> owner;
    std::string home;
    try {
      gid_t g = gid.value_or(0);
      owner = identity_for_uid(uid, gid ? &g : nullptr);
      home = home_of(uid);
    } catch (const std::exception& e) {
      error = e.what();
    }
    return [this, job_id, facts = std::move(facts), owner = std::move(owner),
            home = std::move(home), error, now]() mutable {
      set_up(job_id, std::move(facts), std::move(owner), std::move(home), error, now);
    };
  });
}

void LiveMonitor::set_up(uint64_t job_id, std::optional<JobFacts> facts,
                         std::optional<Identity> owner, std::string home, const std::string& error,
                         const LiveInstant& now) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Followed& f = it->second;
  f.busy = false;
  if (!facts || !owner || facts->stdout_path.empty()) {
    const std::string why = !facts   ? "slurmctld: " + error
                            : !owner ? "owner: " + error
                                     : std::string("slurmctld names no StdOut file");
    if (why != f.last_error) spdlog::warn("job {}: not followed live: {}", job_id, log_text(why));
    f.last_error = why;
    f.retry_mono = now.mono_usec + kSetupRetryUsec;
    return;
  }
  FollowState state{.path = facts->stdout_path};
  int64_t lines = 0;
  const LiveAttempt attempt = attempt_of(*facts);
  const auto saved = latest_live_entry(node_.spool().read_job(job_id));
  if (saved && resumes(*saved, attempt, facts->stdout_path)) {
    state = saved->follow;  // an agent restart: resume where the last one stood
    f.record = saved->record;
    lines = saved->lines;
  } else {
    // A new attempt (or the first): whatever an earlier attempt flagged or did is its own.
    f.record = LiveRecord{};
    f.record.followed_since_usec = now.wall_usec;
    if (saved && saved->attempt && saved->attempt->restart_count != attempt.restart_count) {
      spdlog::info("job {}: a new attempt ({}): followed afresh", job_id, to_string(attempt));
    }
  }
  f.attempt = attempt;
  // A requeued attempt whose prolog Slurm did not run again sent no job_start: the job table learns
  // its attempt here, for the job-end evidence.
  if (JobRecord* j = node_.jobs().find(job_id); j != nullptr && !j->restart_count)
    j->restart_count = attempt.restart_count;
  f.facts = std::move(*facts);
  f.owner = *owner;
  f.home = std::move(home);
  f.job = std::make_shared<LiveJob>(job_id, state, *owner, *plan_, lines);
  f.saved_offset = state.offset;
  f.saved_mono = now.mono_usec;
  // A resumed stall counts from here: the time the agent was away is not known on this clock.
  f.gpu_counted_mono = now.mono_usec;
  spdlog::info("job {}: following {} as uid {} from byte {}", job_id, log_text(state.path),
               owner->uid, state.offset);
}

void LiveMonitor::poll(uint64_t job_id, Followed& f, const LiveInstant& now) {
  f.busy = true;
  hooks_.offload([this, job = f.job, job_id, now, policy = policy_]() -> std::function<void()> {
    LiveObservation obs;
    try {
      obs = job->poll(now, policy);
    } catch (const std::exception& e) {
      obs.job_id = job_id;
      obs.at = now;
      obs.status = LogStatus::kUnreadable;
      obs.error = e.what();  // obs.follow stays empty: nothing else is known
    }
    return [this, obs = std::move(obs)]() mutable { on_poll(std::move(obs)); };
  });
}

void LiveMonitor::on_poll(LiveObservation obs) {
  const auto it = jobs_.find(obs.job_id);
  if (it == jobs_.end()) return;
  const uint64_t job_id = obs.job_id;
  Followed& f = it->second;
  f.busy = false;
  stats_.bytes_scanned += obs.bytes;
  if (obs.status == LogStatus::kUnreadable) {
    ++stats_.poll_failures;
    if (obs.error != f.last_error)
      spdlog::warn("job {}: live log: {}", job_id, log_text(obs.error));
    f.last_error = obs.error;
    if (obs.follow.path.empty()) return;  // the poll threw: nothing else is known
  }
  const size_t warned = add_warnings(f.record, obs.new_warnings, obs.at.wall_usec);
  for (size_t i = f.record.warnings.size() - warned; i < f.record.warnings.size(); ++i) {
    const LiveWarning& w = f.record.warnings[i];
    spdlog::warn("job {}: early warning {} at line {}: {}", job_id, log_text(w.cls), w.line,
                 log_text(w.text));
  }
  stats_.early_warnings += warned;
  bool changed = warned > 0;
  if (mark_resumed(f.record, obs.new_steps, obs.at.wall_usec)) {
    spdlog::info("job {}: steps again after the flagged stall", job_id);
    changed = true;
  }
  // The pace warning: recorded, counted and shown in an interim report, never judged as a stall or
  // acted on.
  bool pace_report = false;
  if (obs.pace) {
    const PaceChange pc = take_pace_warning(f.record, obs.pace->line, obs.at.wall_usec);
    if (pc == PaceChange::kRaised) {
      ++stats_.pace_warnings;
      spdlog::warn("job {}: {}", job_id, log_text(f.record.pace_warning));
    } else if (pc == PaceChange::kCleared) {
      spdlog::info("job {}: pace warning cleared: the job keeps its pace again", job_id);
    }
    changed = changed || pc != PaceChange::kNone;
    pace_report = pace_report_due(f.pace_reported, obs.pace->key);
    if (pace_report) f.pace_reported = obs.pace->key;
  }
  stats_.stalled_gpu_hours += stalled_gpu_hours(f.record, f.facts.gpus, f.last_step_mono,
                                                f.gpu_counted_mono, obs.at.mono_usec);
  f.gpu_counted_mono = obs.at.mono_usec;
  const bool moved = obs.follow.offset != f.saved_offset;
  f.follow = std::move(obs.follow);
  f.lines = obs.lines;
  if (save_due(changed, moved, f.saved_mono, obs.at.mono_usec, kSaveIntervalUsec))
    save(job_id, f, obs.at);
  const bool watchdog_report = interim_report_due(f.record, obs.new_watchdog_lines);
  if (watchdog_report) {
    spdlog::info("job {}: NCCL watchdog lines after the flagged stall; interim report refreshed",
                 job_id);
  }
  if (watchdog_report || pace_report)
    write_interim_report(job_id, f, own_evidence(job_id, f, obs.at));
  if (obs.verdict.stalled) judge(job_id, f, obs.verdict, obs.at);
}

NodeEvidence LiveMonitor::own_evidence(uint64_t job_id, const Followed& f, const LiveInstant& now) {
  NodeEvidence own;
  own.host = cfg_.node_name;
  if (const JobRecord* j = node_.jobs().find(job_id))
    own = hooks_.own_evidence(*j, f.facts.start_time * 1000000, now.wall_usec);
  return own;
}

std::vector<NodeEvidence> LiveMonitor::job_nodes(const Followed& f, const NodeEvidence& own) {
  std::vector<NodeEvidence> nodes;
  nodes.reserve(1 + f.remote.peers.size());
  nodes.push_back(own);
  nodes.insert(nodes.end(), f.remote.peers.begin(), f.remote.peers.end());
  return nodes;
}

Corroboration LiveMonitor::corroboration(const Followed& f, const NodeEvidence& own) {
  return corroborate(job_nodes(f, own), f.facts.start_time * 1000000, f.remote);
}

HangDecision LiveMonitor::decide(const JobRecord& job, const Followed& f, const StallVerdict& v,
                                 const Corroboration& c) const {
  return decide_hang_action(hang_facts(job, f.record, v, c, /*batch=*/true, f.facts));
}

void LiveMonitor::judge(uint64_t job_id, Followed& f, const StallVerdict& v,
                        const LiveInstant& now) {
  const JobRecord* j = node_.jobs().find(job_id);
  if (j == nullptr) return;
  NodeEvidence own = own_evidence(job_id, f, now);
  if (decide(*j, f, v, corroboration(f, own)).outcome == HangOutcome::kNone) return;
  // Slurm's word that the job still runs comes first (a suspended job prints nothing either), and
  // with it the AdminComment as it stands now; the other nodes and the Prometheus are asked at
  // most once a minute.
  const bool ask_remote =
      hooks_.remote_evidence &&
      remote_evidence_due(f.remote.asked_usec, now.mono_usec, kRemoteEvidenceIntervalUsec);
  f.busy = true;
  hooks_.offload([this, job_id, v, own = std::move(own), ask_remote,
                  now]() -> std::function<void()> {
    std::string error;
    std::optional<JobFacts> facts = hooks_.load_job(job_id, error);
    if (!facts) spdlog::warn("job {}: stall not confirmed: slurmctld: {}", job_id, log_text(error));
    std::optional<RemoteEvidence> remote;
    if (facts && facts->state == "RUNNING" && ask_remote) {
      remote = hooks_.remote_evidence(*facts, v.last_step_usec, now.wall_usec);
      remote->asked_usec = now.mono_usec;
    }
    return [this, job_id, v, own, facts = std::move(facts), remote = std::move(remote),
            now]() mutable { carry_out(job_id, v, own, std::move(facts), std::move(remote), now); };
  });
}

void LiveMonitor::carry_out(uint64_t job_id, const StallVerdict& v, const NodeEvidence& own,
                            std::optional<JobFacts> facts, std::optional<RemoteEvidence> remote,
                            const LiveInstant& now) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Followed& f = it->second;
  f.busy = false;
  if (!facts) return;
  if (attempt_of(*facts) != f.attempt) {
    // The stall was judged on an attempt Slurm no longer runs (requeued by someone, restarted):
    // nothing is flagged or done to the one it runs now, which is followed afresh.
    const std::string why = attempt_mismatch(f.attempt, *facts);
    spdlog::warn("job {}: stall of the followed attempt left alone: {}", job_id, log_text(why));
    f.record.action_reason = "nothing done: " + why;
    save(job_id, f, now);
    f.gone = true;
    return;
  }
  if (facts->state != "RUNNING") {
    // Suspended: silent for a reason. Ended without a job_end here: nothing more to follow.
    f.gone = facts->state != "SUSPENDED" && facts->state != "PENDING";
    return;
  }
  f.facts = std::move(*facts);
  if (remote) {
    for (const NodeEvidence& p : remote->peers) {
      if (!p.reachable)
        spdlog::warn("job {}: no live evidence from {}: {}", job_id, p.host, log_text(p.error));
    }
    f.remote = std::move(*remote);
  }
  const JobRecord* j = node_.jobs().find(job_id);
  if (j == nullptr) return;
  const Corroboration c = corroboration(f, own);
  const HangDecision d = decide(*j, f, v, c);
  if (d.outcome == HangOutcome::kNone) return;
  const bool flagging = stall_unflagged(f.record);
  if (flagging) flag(job_id, f, v, c, d, now);
  if (d.outcome == HangOutcome::kCancel || d.outcome == HangOutcome::kRequeue) {
    f.record.action_reason = d.reason;
    act(job_id, d.outcome, now);
  }
  // After the action is recorded: a cancel at the first flag is in the interim report too.
  if (flagging) write_interim_report(job_id, f, own);
}

void LiveMonitor::flag(uint64_t job_id, Followed& f, const StallVerdict& v, const Corroboration& c,
                       const HangDecision& d, const LiveInstant& now) {
  flag_stall(f.record, v, c, now.wall_usec);
  // A cancel or requeue already issued stays the record's action: it is never issued twice.
  if (f.record.action.empty() || f.record.action == "notify") {
    f.record.action = "notify";
    f.record.action_reason = d.reason;
    f.record.action_usec = now.wall_usec;
  }
  ++stats_.hangs;
  f.last_step_mono = v.last_step_mono;
  stats_.stalled_gpu_hours +=
      stalled_gpu_hours(f.record, f.facts.gpus, f.last_step_mono, 0, now.mono_usec);
  f.gpu_counted_mono = now.mono_usec;
  spdlog::warn("job {}: hang (live) at step {}{}: {}{}", job_id, v.last_step,
               f.record.stalls > 1 ? " (stall " + std::to_string(f.record.stalls) + ")" : "",
               log_text(v.basis),
               log_text(c.lines.empty() ? "" : "; corroborated by " + c.lines.front()));
  save(job_id, f, now);
  set_comment(job_id, f);
}

void LiveMonitor::act(uint64_t job_id, HangOutcome outcome, const LiveInstant& now) {
  Followed& f = jobs_.at(job_id);
  const std::string what(to_string(outcome));
  // Recorded before the command runs: a second stalled poll must never issue it twice, and an
  // agent that stops meanwhile finds it (action_pending) and checks the attempt before a retry.
  f.record.action = what;
  if (f.record.action_tries == 0) f.record.action_usec = now.wall_usec;
  // The one place each command is built (agent/live/hang_commands.h), for exactly this job or array
  // task.
  std::vector<std::string> argv;
  try {
    argv = outcome == HangOutcome::kCancel ? cancel_job_argv(job_ref(f.facts))
                                           : requeue_job_argv(job_ref(f.facts));
  } catch (const JobRefError& e) {
    // Refused, never guessed: a bare id may be the whole array (agent/slurm/job_ref.h).
    f.record.action_result = "not-done";
    f.record.action_error = std::string("not done: ") + e.what();
    save(job_id, f, now);
    ++stats_.actions_not_done;
    spdlog::error("job {}: {} refused: {}", job_id, what, log_text(e.what()));
    return;
  }
  ++f.record.action_tries;
  f.busy = true;
  save(job_id, f, now);
  spdlog::warn("job {}: {} (try {} of {}; {})", job_id, log_text(command_line(argv)),
               f.record.action_tries, kMaxActionTries, log_text(f.record.action_reason));
  hooks_.offload([this, job_id, argv, what, flagged = f.attempt, now]() -> std::function<void()> {
    // Right before the command: the job Slurm shows must still be the attempt that was flagged.
    std::string error;
    const std::optional<JobFacts> shown = hooks_.load_job(job_id, error);
    std::string not_done = shown ? attempt_mismatch(flagged, *shown) : "";
    SlurmCommandResult done;
    if (!shown) {
      done.error = "slurmctld: " + error;  // not known: a failed try, tried again
    } else if (not_done.empty()) {
      done = hooks_.run_command(argv);
      if (!done.ok) done.error = command_line(argv) + ": " + done.error;
    }
    return [this, job_id, what, done = std::move(done), not_done = std::move(not_done), now] {
      on_action(job_id, what, done, not_done, now);
    };
  });
}

void LiveMonitor::on_action(uint64_t job_id, const std::string& what,
                            const SlurmCommandResult& done, const std::string& not_done,
                            const LiveInstant& now) {
  if (!not_done.empty()) {
    ++stats_.actions_not_done;
    spdlog::warn("job {}: {} not done: {}", job_id, what, log_text(not_done));
  } else if (done.ok) {
    ++stats_.actions[what];
  } else {
    ++stats_.action_failures;
    spdlog::error("job {}: {}", job_id, log_text(done.error));
  }
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  Followed& f = it->second;
  f.busy = false;
  if (!not_done.empty()) {
    f.record.action_result = "not-done";
    f.record.action_error = "not done: " + not_done;
    f.gone = true;  // that attempt no longer runs here; another one is followed afresh
  } else {
    record_action_try(f.record, done.ok, done.error);
    if (f.record.action_result == "retry") {
      f.action_retry_mono = now.mono_usec + action_retry_delay_usec(f.record.action_tries);
    }
  }
  save(job_id, f, now);
}

void LiveMonitor::set_comment(uint64_t job_id, const Followed& f) {
  const CommentMerge merge = merge_triage_comment(
      f.facts.admin_comment, hang_comment_summary(f.record.flagged_usec, f.record.step));
  if (!merge.write) {
    spdlog::info("job {}: AdminComment left as it is: {}", job_id, log_text(merge.reason));
    return;
  }
  std::vector<std::string> argv;
  try {
    argv = set_admin_comment_argv(job_ref(f.facts), merge.value);
  } catch (const JobRefError& e) {
    spdlog::error("job {}: AdminComment not set: {}", job_id, log_text(e.what()));
    return;
  }
  hooks_.offload([this, job_id, argv]() -> std::function<void()> {
    SlurmCommandResult done = hooks_.run_command(argv);
    return [this, job_id, done = std::move(done)] {
      if (done.ok) return;
      ++stats_.comment_failures;
      spdlog::error("job {}: AdminComment not set: {}", job_id, log_text(done.error));
    };
  });
}

void LiveMonitor::write_interim_report(uint64_t job_id, Followed& f, const NodeEvidence& own) {
  if (f.handed_over) return;
  if (f.interim_running) {
    f.interim_again = true;
    return;
  }
  f.interim_running = true;
  Evidence ev;
  ev.job = f.facts;
  ev.report_path = expand_report_path(cfg_.report_path, f.facts);
  ev.nodes = job_nodes(f, own);
  ev.live = f.record;
  AnalysisRequest req;
  req.job_id = job_id;
  // basic: the interim report is about the stall or the pace; the metrics playbooks run after the
  // job.
  req.argv =
      analyzer_argv(cfg_.analyzer_path, "basic", cfg_.stall_after_sec, analysis_target(f.facts));
  req.who = f.owner;
  req.home = f.home;
  req.stdin_data =
      nlohmann::json(ev).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  req.timeout_ms = cfg_.analysis_timeout_sec * 1000;
  req.output_max = cfg_.analysis_output_max;
  reports_.start(std::move(req), [this, job_id](const AnalysisOutcome& o) {
    if (o.started && !o.timed_out && analysis_succeeded(o.wait_status)) {
      ++stats_.interim_reports;
      spdlog::info("job {}: interim report written", job_id);
    } else {
      spdlog::error("job {}: interim report failed: {}", job_id,
                    log_text(o.timed_out ? std::string("timed out") : o.err.substr(0, 400)));
    }
    const auto it = jobs_.find(job_id);
    if (it == jobs_.end()) return;
    it->second.interim_running = false;
    if (!std::exchange(it->second.interim_again, false)) return;
    write_interim_report(job_id, it->second, own_evidence(job_id, it->second, live_now()));
  });
}

void LiveMonitor::save(uint64_t job_id, Followed& f, const LiveInstant& now) {
  if (f.follow.path.empty()) return;  // not polled yet: nothing to resume from
  if (!node_.spool().append_job(job_id,
                                live_spool_record(f.follow, f.record, f.lines, f.attempt))) {
    spdlog::error("job {}: live state not durable: {}", job_id, node_.spool().last_error());
    return;
  }
  f.saved_mono = now.mono_usec;
  f.saved_offset = f.follow.offset;
}

void LiveMonitor::stop(uint64_t job_id, const LiveInstant& now) {
  const auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  if (it->second.busy) return;  // its answer is still coming; stopped on a later tick
  save(job_id, it->second, now);
  jobs_.erase(it);
}

size_t LiveMonitor::pace_warned() const {
  size_t n = 0;
  for (const auto& [id, f] : jobs_) {
    if (!f.record.pace_warning.empty()) ++n;
  }
  return n;
}

std::optional<LiveRecord> LiveMonitor::hand_over(uint64_t job_id, int restart_count) {
  const auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.attempt.restart_count == restart_count)
    it->second.handed_over = true;
  if (reports_.kill_job(job_id) != 0)
    spdlog::info("job {}: interim report abandoned: the final report is on its way", job_id);
  return record(job_id, restart_count);
}

std::optional<LiveRecord> LiveMonitor::record(uint64_t job_id, int restart_count) {
  const auto it = jobs_.find(job_id);
  if (it != jobs_.end() && it->second.job && it->second.attempt.restart_count == restart_count)
    return it->second.record;
  const auto saved = live_entry_of(node_.spool().read_job(job_id), restart_count);
  if (!saved) return std::nullopt;
  return saved->record;
}

}  // namespace triage::agent
