#include "agent/job_requeue.h"

#include <cerrno>
#include <charconv>
#include <system_error>

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "agent/suspect_nodes.h"
#include "common/error.h"
#include "common/hostlist.h"
#include "common/model.h"
#include "common/report_names.h"
#include "common/safe_io.h"

namespace triage::agent {

TriageSummary summary_of(const OutcomeRecord& r, const std::string& report) {
  TriageSummary s;
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

struct JobRequeue::Job {
  AnalysedJob a;
  RequeueFacts facts;
  RequeueDecision decision;
  std::string excluded_now;  // ExcNodeList before the requeue
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

}  // namespace

JobRequeue::JobRequeue(EventLoop& loop, WorkerPool& workers, AccountingComments& comments,
                       SlurmCommandRunner run, Suspects suspects, std::string state_dir)
    : loop_(loop),
      workers_(workers),
      comments_(comments),
      run_(std::move(run)),
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
    if (e.code().value() != ENOENT) spdlog::warn("requeue: {}", e.what());
    return;
  } catch (const std::exception& e) {
    spdlog::warn("requeue: {}/{} is unusable ({}); set aside", state_dir_, kHeldFile, e.what());
    return;
  }
  if (!held.is_object()) return;
  for (const auto& [id, exclusions] : held.items()) {
    uint64_t job_id = 0;
    const auto [end, ec] = std::from_chars(id.data(), id.data() + id.size(), job_id);
    if (ec != std::errc() || end != id.data() + id.size() || job_id == 0 ||
        !exclusions.is_string()) {
      continue;
    }
    held_[job_id] = exclusions.get<std::string>();
  }
  for (const auto& [job_id, exclusions] : held_)
    finish_interrupted(job_id, exclusions);
}

// A requeue the agent held but did not release before it stopped: released once Slurm shows the
// job pending with the exclusion in place, else left held and said so.
void JobRequeue::finish_interrupted(uint64_t job_id, const std::string& exclusions) {
  (void)workers_.submit([this, job_id, exclusions] {
    const SlurmCommandResult show = run_(show_job_argv(job_id));
    const std::optional<ShownJob> j = show.ok ? parse_show_job(show.out) : std::nullopt;
    bool covered = j && j->state == "PENDING";
    try {
      covered = covered && merge_exclusions(j->excluded, expand_hostlist(exclusions)) ==
                               merge_exclusions(j->excluded, {});
    } catch (const InputError&) {
      covered = false;
    }
    const SlurmCommandResult released =
        covered ? run_(release_argv(job_id)) : SlurmCommandResult{false, "", ""};
    loop_.post([this, job_id, covered, released, exclusions] {
      if (covered && released.ok) {
        spdlog::info("job {}: released: its requeue (excluding {}) was interrupted by a restart",
                     job_id, exclusions);
      } else {
        spdlog::error(
            "job {}: a requeue interrupted by a restart left it held; Slurm does not "
            "show it pending with {} excluded{}: `scontrol release {}` lets it run",
            job_id, exclusions, released.error.empty() ? "" : " (" + released.error + ")", job_id);
      }
      unmark_held(job_id);
    });
  });
}

void JobRequeue::mark_held(uint64_t job_id, const std::string& exclusions) {
  held_[job_id] = exclusions;
  save_held();
}

void JobRequeue::unmark_held(uint64_t job_id) {
  if (held_.erase(job_id) != 0) save_held();
}

void JobRequeue::save_held() {
  nlohmann::json held = nlohmann::json::object();
  for (const auto& [id, exclusions] : held_)
    held[std::to_string(id)] = exclusions;
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
    comments_.submit(id, compose_triage_summary(summary_of(a.record, a.report_path)));
    return;
  }
  auto job = std::make_shared<Job>();
  job->a = std::move(a);
  ++in_flight_;
  const bool submitted = workers_.submit([this, job, id] {
    const SlurmCommandResult r = run_(show_job_argv(id));
    std::optional<ShownJob> shown = r.ok ? parse_show_job(r.out) : std::nullopt;
    if (!r.ok) spdlog::warn("job {}: scontrol show job: {}", id, r.error);
    loop_.post([this, job, shown] { decide(job, shown); });
  });
  if (!submitted) decide(job, std::nullopt);
}

void JobRequeue::decide(const JobPtr& job, const std::optional<ShownJob>& shown) {
  const AnalysedJob& a = job->a;
  RequeueFacts& f = job->facts;
  f.asked_max = a.requeue_max;
  f.admin_allows = a.requeue_allowed;
  f.known = shown.has_value();
  f.batch = shown && shown->batch;
  f.requeueable = shown && shown->requeue;
  f.restarts = shown ? shown->restarts : a.facts.restart_count;
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
  job->excluded_now = shown ? shown->excluded : "";
  job->attempt = f.restarts;
  job->decision = decide_requeue(f);
  spdlog::info("job {}: --triage-requeue={}: {}", a.facts.job_id, f.asked_max,
               job->decision.reason);
  if (job->decision.outcome == RequeueOutcome::kRequeue) {
    carry_out(job);
    return;
  }
  const uint64_t id = a.facts.job_id;
  const std::string summary = compose_triage_summary(summary_of(a.record, a.report_path));
  if (!failed(f.status)) {
    // A job that did not fail needs no word on the requeue in its report.
    comments_.submit(id, summary);
    finish(job, false);
    return;
  }
  report_pass(job, [this, job, id, summary] {
    comments_.submit(id, summary);
    finish(job, false);
  });
}

void JobRequeue::carry_out(const JobPtr& job) {
  const uint64_t id = job->a.facts.job_id;
  const std::string report =
      job->a.report_path.empty() ? "" : attempt_report_name(job->a.report_path, job->attempt);
  const std::string summary = compose_triage_summary(summary_of(job->a.record, report));
  std::string exclusions;
  try {
    exclusions = merge_exclusions(job->excluded_now, job->decision.exclude);
  } catch (const InputError& e) {
    spdlog::warn("job {}: its ExcNodeList '{}' is not a hostlist ({}); replaced", id,
                 job->excluded_now, e.what());
    exclusions = compress_hostlist(job->decision.exclude);
  }
  const bool comment = comments_.enabled();
  const CommentField field = comments_.field();
  mark_held(id, exclusions);
  const bool submitted = workers_.submit([this, job, id, summary, exclusions, comment, field] {
    CommentWrite written{CommentWriteState::kUnchanged, "AccountingComment=none"};
    if (comment) written = write_accounting_comment(run_, field, id, summary);
    const SlurmCommandResult hold = run_(requeue_hold_argv(id));
    SlurmCommandResult exclude;
    if (hold.ok) exclude = run_(exclude_nodes_argv(id, exclusions));
    loop_.post([this, job, summary, hold, exclude, written, exclusions] {
      if (comments_.enabled()) comments_.record_try(job->a.facts.job_id, summary, written);
      step(job, requeue_hold_argv(job->a.facts.job_id), hold);
      if (hold.ok) step(job, exclude_nodes_argv(job->a.facts.job_id, exclusions), exclude);
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
    spdlog::warn("job {}: requeue refused by Slurm: {}", id, hold.error);
    report_pass(job, [this, job] { finish(job, false); });
    return;
  }
  if (!exclude.ok) {
    // Released, it could start on the very node that failed it: it waits for a person instead.
    d.outcome = RequeueOutcome::kRefuse;
    d.reason += "; the job was requeued and held, but Slurm refused the exclusion (" +
                exclude.error + "), so it stays held: `scontrol release " + std::to_string(id) +
                "` lets it run (possibly on the same nodes)";
    spdlog::error("job {}: requeued and held, exclusion refused ({}); left held", id,
                  exclude.error);
    report_pass(job, [this, job] { finish(job, false); });
    return;
  }
  job->steps.push_back("released once this report was written (scontrol release " +
                       std::to_string(id) + ")");
  report_pass(job, [this, job] { release(job); });
}

void JobRequeue::release(const JobPtr& job) {
  const uint64_t id = job->a.facts.job_id;
  const bool submitted = workers_.submit([this, job, id] {
    const SlurmCommandResult r = run_(release_argv(id));
    loop_.post([this, job, r, id] {
      unmark_held(id);
      if (!r.ok) {
        ++stats_.release_failures;
        spdlog::error(
            "job {}: requeued and held, but the release failed ({}); it stays held until "
            "`scontrol release {}`",
            id, r.error, id);
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
          id, o.timed_out ? "timed out" : o.err.substr(0, 300));
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
