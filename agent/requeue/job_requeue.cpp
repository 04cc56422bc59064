#include "agent/requeue/job_requeue.h"

#include <cerrno>
#include <charconv>
#include <system_error>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "agent/history/suspect_nodes.h"
#include "agent/requeue/attempt_check.h"
#include "agent/requeue/crashloop.h"
#include "common/error.h"
#include "common/hostlist.h"
#include "common/model.h"
#include "common/report_names.h"
#include "common/safe_io.h"
#include "common/text.h"

namespace triage::agent {

TriageSummary summary_of(const OutcomeRecord& r, const std::string& report,
                         const std::string& requeue) {
  TriageSummary s;
  s.requeue = requeue;
  s.cls = r.cls.value_or(r.status);
  s.blame = r.blame.value_or("none");
  for (const ImplicatedNode& n : r.implicated)
    s.nodes.push_back(n.node);
  s.report = report;
  return s;
}

std::set<std::string> suspects_in(const std::deque<OutcomeRecord>& history) {
  std::vector<JobOutcome> jobs;
  jobs.reserve(history.size());
  for (const OutcomeRecord& r : history) {
    std::string why;
    if (auto j = parse_job_outcome(outcome_to_json(r), why)) jobs.push_back(std::move(*j));
  }
  const SuspectRanking ranking = rank_suspects(distinct_jobs(std::move(jobs)), SuspectPolicy{});
  std::set<std::string> out;
  for (const SuspectNode& s : ranking.suspects)
    out.insert(s.node);
  return out;
}

std::vector<std::string> nodes_of_earlier_attempts(const JobFacts& now,
                                                   const std::vector<std::string>& job_nodes,
                                                   size_t max) {
  std::vector<std::string> nodes = job_nodes;
  try {
    for (std::string& n : expand_hostlist(now.excluded_nodes, "ExcNodeList"))
      nodes.push_back(std::move(n));
  } catch (const InputError&) {
    // An ExcNodeList that is not a hostlist names no node to ask.
  }
  std::vector<std::string> out;
  for (std::string& n : nodes) {
    if (out.size() >= max) break;
    if (std::find(out.begin(), out.end(), n) == out.end()) out.push_back(std::move(n));
  }
  return out;
}

struct JobRequeue::Job {
  AnalysedJob a;
  std::optional<OutcomeRecord> previous;  // the record of the attempt before this one
  RequeueFacts facts;
  RequeueDecision decision;
  std::optional<JobRef> ref;    // the attempt as Slurm's commands name it (from slurmctld's record)
  std::string attempt_changed;  // why Slurm's job is not the analysed attempt ("" when it is)
  std::string excluded_now;     // ExcNodeList before the requeue
  int attempt = 0;
  std::vector<std::string> steps;
};

namespace {

bool failed(const std::string& status) {
  return status == "failed" || status == "hanging";
}

RequeueNote note_of(const RequeueFacts& f, const RequeueDecision& d, int attempt,
                    const std::vector<std::string>& steps) {
  RequeueNote n;
  n.outcome = std::string(to_string(d.outcome));
  n.reason = d.reason;
  if (d.outcome == RequeueOutcome::kRequeue) n.excluded = d.exclude;
  n.attempt = attempt;
  n.max = f.asked_max;
  n.steps = steps;
  return n;
}

}  // namespace

namespace {

constexpr const char* kHeldFile = "requeue-held.json";
constexpr int64_t kPreviousAttemptWindowSec = int64_t{7} * 86400;

}  // namespace

JobRequeue::JobRequeue(EventLoop& loop, WorkerPool& workers, AccountingComments& comments,
                       SlurmCommandRunner run, LoadJob load_job, Suspects suspects,
                       std::string state_dir)
    : loop_(loop),
      workers_(workers),
      comments_(comments),
      run_(std::move(run)),
      load_job_(std::move(load_job)),
      suspects_(std::move(suspects)),
      state_dir_(std::move(state_dir)),
      reports_(loop) {}

void JobRequeue::open() {
  nlohmann::json held;
  try {
    UniqueFd dir = open_dir(state_dir_);
    UniqueFd f = open_regular_file_at(dir.get(), kHeldFile, true);
    held = nlohmann::json::parse(read_fd_limited(f.get(), size_t{1} << 20));
  } catch (const std::system_error& e) {
    if (e.code().value() != ENOENT) spdlog::warn("requeue: {}", log_text(e.what()));
    return;
  } catch (const std::exception& e) {
    spdlog::warn("requeue: {}/{} is unusable ({}); set aside", state_dir_, kHeldFile,
                 log_text(e.what()));
    return;
  }
  if (!held.is_object()) return;
  for (const auto& [id, entry] : held.items()) {
    uint64_t job_id = 0;
    const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), job_id);
    if (ec != std::errc() || end != id.data() + id.size() || job_id == 0) continue;
    Held h;
    if (entry.is_string()) {
      h.exclusions = entry.get<std::string>();  // an older agent's entry: no restart count
    } else if (entry.is_object() && entry.value("exclusions", nlohmann::json()).is_string()) {
      h.exclusions = entry["exclusions"].get<std::string>();
      h.restarts = entry.value("restarts", -1);
    } else {
      continue;
    }
    held_[job_id] = h;
  }
  for (const auto& [job_id, h] : held_)
    finish_interrupted(job_id, h);
}

// A requeue the agent held but did not release before it stopped: released once slurmctld shows
// the same task pending again after our hold (its restart count one more than the analysed
// attempt's) with the exclusion in place; else left held and said so.
void JobRequeue::finish_interrupted(uint64_t job_id, const Held& held) {
  (void)workers_.submit([this, job_id, held] {
    std::string why;
    const std::optional<JobFacts> now = load_job_ ? load_job_(job_id, why) : std::nullopt;
    if (!now && why.empty()) why = "slurmctld could not be asked";
    std::optional<JobRef> ref;
    if (now) {
      try {
        ref = job_ref(*now);
        if (now->state != "PENDING") {
          why = "it is " + now->state + ", not pending";
        } else if (held.restarts >= 0 && now->restart_count != held.restarts + 1) {
          why = "its restart count is " + std::to_string(now->restart_count) + ", not " +
                std::to_string(held.restarts + 1) + " (requeued by someone else since)";
        } else if (merge_exclusions(now->excluded_nodes, expand_hostlist(held.exclusions)) !=
                   merge_exclusions(now->excluded_nodes, {})) {
          why = "its ExcNodeList is '" + now->excluded_nodes + "'";
        }
      } catch (const JobRefError& e) {
        why = e.what();
      } catch (const InputError& e) {
        why = e.what();
      }
    }
    const bool covered = ref && why.empty();
    const SlurmCommandResult released =
        covered ? run_(release_argv(*ref)) : SlurmCommandResult{false, "", ""};
    loop_.post([this, job_id, covered, released, held, why, ref] {
      const std::string name = ref ? ref->controller : std::to_string(job_id);
      if (covered && released.ok) {
        spdlog::info("job {}: released: its requeue (excluding {}) was interrupted by a restart",
                     name, held.exclusions);
      } else {
        spdlog::error(
            "job {}: a requeue interrupted by a restart left it held; not released ({}): "
            "`scontrol release {}` lets it run",
            name, log_text(released.error.empty() ? why : released.error), name);
      }
      unmark_held(job_id);
    });
  });
}

void JobRequeue::mark_held(uint64_t job_id, const Held& held) {
  held_[job_id] = held;
  save_held();
}

void JobRequeue::unmark_held(uint64_t job_id) {
  if (held_.erase(job_id) != 0) save_held();
}

void JobRequeue::save_held() {
  nlohmann::json held = nlohmann::json::object();
  for (const auto& [id, h] : held_)
    held[std::to_string(id)] = {{"exclusions", h.exclusions}, {"restarts", h.restarts}};
  try {
    UniqueFd dir = open_dir(state_dir_);
    atomic_write_at(dir.get(), kHeldFile, held.dump() + "\n", 0600);
  } catch (const std::exception& e) {
    spdlog::error("requeue: {} not durable: {}", kHeldFile, e.what());
  }
}

void JobRequeue::on_analysed(AnalysedJob a) {
  const uint64_t id = a.facts.job_id;
  if (a.requeue_max <= 0) {
    comments_.submit(a.facts, compose_triage_summary(summary_of(a.record, a.report_path)));
    return;
  }
  auto job = std::make_shared<Job>();
  job->a = std::move(a);
  ++in_flight_;
  const OutcomeRecord& record = job->a.record;
  std::vector<OutcomeRecord> records =
      local_attempts_ ? local_attempts_(id) : std::vector<OutcomeRecord>{};
  job->previous = previous_attempt(records, record);
  // Another node may hold the attempt just before this one when this node does not.
  const bool ask_peers =
      peer_attempts_ && record.attempt.value_or(0) > 0 &&
      (!job->previous || !job->previous->attempt || *job->previous->attempt + 1 != *record.attempt);
  // The attempt before ended before this one started; a week's margin covers a requeued job held
  // that long, and keeps a peer's answer to the records of about that week (Slurm may reset the
  // submit time at a requeue, so that is no bound).
  const int64_t started = job->a.facts.start_time;
  const int64_t since =
      started > kPreviousAttemptWindowSec ? started - kPreviousAttemptWindowSec : 0;
  const std::vector<std::string> job_nodes = record.nodes();
  const bool submitted = workers_.submit([this, job, id, ask_peers, since, job_nodes,
                                          records = std::move(records)]() mutable {
    std::string error;
    std::optional<JobFacts> now = load_job_ ? load_job_(id, error) : std::nullopt;
    if (!now)
      spdlog::warn("job {}: slurmctld's record: {}", id, log_text(error.empty() ? "none" : error));
    std::optional<OutcomeRecord> previous = std::move(job->previous);
    if (ask_peers && now) {
      std::vector<OutcomeRecord> theirs =
          peer_attempts_(id, since, nodes_of_earlier_attempts(*now, job_nodes));
      records.insert(records.end(), std::make_move_iterator(theirs.begin()),
                     std::make_move_iterator(theirs.end()));
      previous = previous_attempt(records, job->a.record);
    }
    loop_.post([this, job, now = std::move(now), error, previous = std::move(previous)] {
      job->previous = previous;
      decide(job, now, error);
    });
  });
  if (!submitted) decide(job, std::nullopt, "the agent is stopping");
}

void JobRequeue::decide(const JobPtr& job, const std::optional<JobFacts>& now,
                        const std::string& error) {
  const AnalysedJob& a = job->a;
  RequeueFacts& f = job->facts;
  f.asked_max = a.requeue_max;
  f.admin_allows = a.requeue_allowed;
  f.known = now.has_value();
  f.batch = now && now->batch;
  f.requeueable = now && now->requeue_allowed;
  // The analysed attempt's: Slurm's own when it still shows that attempt (checked just below).
  f.restarts = a.facts.restart_count;
  if (now) {
    f.attempt_changed = job->attempt_changed = attempt_changed(a.facts, *now);
    try {
      job->ref = job_ref(*now);
    } catch (const JobRefError& e) {
      f.unnamed = e.what();
    }
  } else if (!error.empty()) {
    spdlog::info("job {}: requeue without slurmctld's record ({})", a.facts.job_id,
                 log_text(error));
  }
  f.status = a.record.status;
  f.blame = a.record.blame.value_or("");
  f.cls = a.record.cls.value_or("");
  f.implicated = a.record.implicated;
  f.job_nodes = a.record.nodes();
  // Ranking the history costs a walk over it: only where a suspect could change the decision.
  if (suspects_ && failed(f.status) &&
      (f.blame == "platform" || f.blame == "unknown" || f.blame.empty())) {
    f.suspects = suspects_();
  }
  job->excluded_now = now ? now->excluded_nodes : "";
  job->attempt = f.restarts;
  if (failed(f.status)) {
    const CrashloopVerdict loop = decide_crashloop(job->previous, a.record);
    if (loop.stop) f.crashloop = loop.reason;
    spdlog::info("job {}: crashloop check: {}", a.facts.job_id, log_text(loop.reason));
  }
  job->decision = decide_requeue(f);
  spdlog::info("job {}: --triage-requeue={}: {}", a.facts.job_id, f.asked_max,
               log_text(job->decision.reason));
  if (job->decision.outcome == RequeueOutcome::kRequeue) {
    carry_out(job);
    return;
  }
  const std::string summary = compose_triage_summary(summary_of(
      a.record, a.report_path, job->decision.code == "crashloop" ? "stopped-crashloop" : ""));
  if (!failed(f.status)) {
    // A job that did not fail needs no word on the requeue in its report.
    submit_summary(job, summary);
    finish(job, false);
    return;
  }
  report_pass(job, [this, job, summary] {
    submit_summary(job, summary);
    finish(job, false);
  });
}

// The summary goes into the job's latest accounting record, which after a requeue since the
// analysis is the next attempt's: then it is not written at all.
void JobRequeue::submit_summary(const JobPtr& job, const std::string& summary) {
  if (!job->attempt_changed.empty()) {
    spdlog::warn("job {}: summary not written to accounting: {}", job->a.facts.job_id,
                 log_text(job->attempt_changed));
    return;
  }
  if (job->ref) {
    comments_.submit(*job->ref, summary);
  } else {
    comments_.submit(job->a.facts, summary);
  }
}

void JobRequeue::carry_out(const JobPtr& job) {
  const uint64_t id = job->a.facts.job_id;
  const JobRef ref = *job->ref;  // decide_requeue requeues only a named attempt
  const std::string report =
      job->a.report_path.empty() ? "" : attempt_report_name(job->a.report_path, job->attempt);
  const std::string summary = compose_triage_summary(summary_of(job->a.record, report));
  std::string exclusions;
  try {
    exclusions = merge_exclusions(job->excluded_now, job->decision.exclude);
  } catch (const InputError& e) {
    spdlog::warn("job {}: its ExcNodeList '{}' is not a hostlist ({}); replaced", id,
                 log_text(job->excluded_now), log_text(e.what()));
    exclusions = compress_hostlist(job->decision.exclude);
  }
  const bool comment = comments_.enabled();
  const CommentField field = comments_.field();
  mark_held(id, Held{exclusions, job->attempt});
  const bool submitted = workers_.submit([this, job, ref, summary, exclusions, comment, field] {
    CommentWrite written{CommentWriteState::kUnchanged, "AccountingComment=none"};
    if (comment) written = write_accounting_comment(run_, field, ref, summary);
    const SlurmCommandResult hold = run_(requeue_hold_argv(ref));
    SlurmCommandResult exclude;
    if (hold.ok) exclude = run_(exclude_nodes_argv(ref, exclusions));
    loop_.post([this, job, ref, summary, hold, exclude, written, exclusions] {
      if (comments_.enabled()) comments_.record_try(ref, summary, written);
      step(job, requeue_hold_argv(ref), hold);
      if (hold.ok) step(job, exclude_nodes_argv(ref, exclusions), exclude);
      held(job, hold, exclude, written);
    });
  });
  if (!submitted) {
    unmark_held(id);
    job->decision.outcome = RequeueOutcome::kRefuse;
    job->decision.reason += "; but the agent is stopping, so the job is left as it is";
    finish(job, false);
  }
}

void JobRequeue::held(const JobPtr& job, const SlurmCommandResult& hold,
                      const SlurmCommandResult& exclude, const CommentWrite& /*comment*/) {
  const uint64_t id = job->a.facts.job_id;
  RequeueDecision& d = job->decision;
  if (!hold.ok || !exclude.ok) unmark_held(id);
  if (!hold.ok) {
    d.outcome = RequeueOutcome::kRefuse;
    d.reason += "; but Slurm refused the requeue (" + hold.error + "), so the job is left as it is";
    spdlog::warn("job {}: requeue refused by Slurm: {}", id, log_text(hold.error));
    report_pass(job, [this, job] { finish(job, false); });
    return;
  }
  if (!exclude.ok) {
    // Released, it could start on the very node that failed it: it waits for a person instead.
    d.outcome = RequeueOutcome::kRefuse;
    d.reason += "; the job was requeued and held, but Slurm refused the exclusion (" +
                exclude.error + "), so it stays held: `scontrol release " + job->ref->controller +
                "` lets it run (possibly on the same nodes)";
    spdlog::error("job {}: requeued and held, exclusion refused ({}); left held", id,
                  log_text(exclude.error));
    report_pass(job, [this, job] { finish(job, false); });
    return;
  }
  job->steps.push_back("released once this report was written (scontrol release " +
                       job->ref->controller + ")");
  report_pass(job, [this, job] { release(job); });
}

void JobRequeue::release(const JobPtr& job) {
  const uint64_t id = job->a.facts.job_id;
  const JobRef ref = *job->ref;
  const bool submitted = workers_.submit([this, job, id, ref] {
    const SlurmCommandResult r = run_(release_argv(ref));
    loop_.post([this, job, r, id, ref] {
      unmark_held(id);
      if (!r.ok) {
        ++stats_.release_failures;
        spdlog::error(
            "job {}: requeued and held, but the release failed ({}); it stays held until "
            "`scontrol release {}`",
            id, log_text(r.error), ref.controller);
      } else {
        spdlog::info("job {}: requeued excluding {}", id, compress_hostlist(job->decision.exclude));
      }
      finish(job, r.ok);
    });
  });
  if (!submitted) finish(job, false);
}

void JobRequeue::report_pass(const JobPtr& job, std::function<void()> then) {
  AnalysisRequest req = job->a.request;
  nlohmann::json evidence = nlohmann::json::parse(req.stdin_data, nullptr, false);
  if (!evidence.is_object() || req.argv.empty()) {
    ++stats_.report_pass_failures;
    then();
    return;
  }
  evidence["requeue"] = note_of(job->facts, job->decision, job->attempt, job->steps);
  req.stdin_data = evidence.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const uint64_t id = job->a.facts.job_id;
  reports_.start(std::move(req), [this, id, then = std::move(then)](const AnalysisOutcome& o) {
    if (!analysis_succeeded(o.wait_status) || o.timed_out) {
      ++stats_.report_pass_failures;
      spdlog::warn(
          "job {}: the report could not be updated with the requeue ({}); the decision "
          "is in this log",
          id, log_text(o.timed_out ? "timed out" : o.err.substr(0, 300)));
    }
    then();
  });
}

void JobRequeue::step(const JobPtr& job, const std::vector<std::string>& argv,
                      const SlurmCommandResult& r) {
  job->steps.push_back(command_line(argv) + ": " + (r.ok ? "done" : "refused: " + r.error));
}

void JobRequeue::finish(const JobPtr& job, bool requeued) {
  --in_flight_;
  switch (job->decision.outcome) {
    case RequeueOutcome::kRequeue:
      if (requeued) ++stats_.requeued;
      break;
    case RequeueOutcome::kRefuse:
      ++stats_.refused;
      break;
    case RequeueOutcome::kDecline:
    case RequeueOutcome::kNotAsked:
      ++stats_.declined;
      break;
  }
  if (!on_result_) return;
  Result r;
  r.job_id = job->a.facts.job_id;
  r.outcome = job->decision.outcome;
  r.requeued = requeued;
  r.reason = job->decision.reason;
  r.code =
      r.outcome == RequeueOutcome::kRequeue && !requeued ? "slurm-refused" : job->decision.code;
  if (requeued) r.excluded = job->decision.exclude;
  on_result_(r);
}

}  // namespace triage::agent
