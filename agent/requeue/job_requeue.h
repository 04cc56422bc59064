// What follows a worked analysis on the analysis leader: the job's summary in Slurm's accounting
// (agent/slurm/accounting_comment.h) and, for a job that asked for --triage-requeue, the requeue
// decision (agent/requeue/requeue_decision.h) carried out:
//
//   load_job -> same attempt? -> decide -> requeue:   summary -> requeuehold -> ExcNodeList
//                                                     -> report pass -> release
//                                          otherwise: report pass (why not) -> summary
//
// The job is read through libslurm (SlurmClient::load_job), never from `scontrol show job` text
// where a job name can hold " Restarts=0"; it is acted on only while Slurm shows the attempt that
// was analysed (agent/requeue/attempt_check.h), and named as that one attempt
// (agent/slurm/job_ref.h).
//
// The report pass runs the analyzer once more, as the job's owner, with the decision in its
// evidence: triage.md says what was done and why, and a copy stays as triage.attempt<N>.md that
// the next attempt's report does not replace. All of it happens before the release, because the
// next attempt truncates the job's output file when it starts (the hold keeps it from starting).
// The summary is written before the hold: sacctmgr changes a job's latest accounting record, which
// after the requeue is the next attempt's. A job between its hold and its release is listed in
// SpoolDir/requeue-held.json: an agent that stopped there releases it when it starts again, once
// Slurm shows that task pending again after our hold, with the exclusion in place (otherwise it
// stays held and the log says so).
//
// Loop thread only; the Slurm commands run on a worker.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/base/event_loop.h"
#include "agent/base/worker_pool.h"
#include "agent/history/outcome_record.h"
#include "agent/job_end/analysis_runner.h"
#include "agent/job_end/job_end.h"
#include "agent/requeue/requeue_decision.h"
#include "agent/slurm/accounting_comment.h"
#include "agent/slurm/job_comment.h"
#include "agent/slurm/job_ref.h"
#include "agent/slurm/slurm_command_runner.h"
#include "agent/slurm/slurm_commands.h"

namespace triage::agent {

// The summary of an analysed job: its class (its status when nothing failed), blame, the nodes
// its evidence implicates, and `report`; `requeue` when the requeue decision has a word for
// accounting ("stopped-crashloop").
TriageSummary summary_of(const OutcomeRecord& r, const std::string& report,
                         const std::string& requeue = "");

// The nodes whose agents may hold the record of the attempt before `now`'s: the job's nodes and
// those Slurm keeps it off (a requeue excluded the failed ones), each once, at most `max`.
std::vector<std::string> nodes_of_earlier_attempts(const JobFacts& now,
                                                   const std::vector<std::string>& job_nodes,
                                                   size_t max = 32);

// The nodes `history` ranks as suspects (agent/history/suspect_nodes.h), from this node's own
// records: every job that ran here, which is the view the leader of a job has without asking its
// peers.
std::set<std::string> suspects_in(const std::deque<OutcomeRecord>& history);

class JobRequeue {
 public:
  // One requeue-enabled job's end, for the integrator's counters (requeues done and refused).
  struct Result {
    uint64_t job_id = 0;
    RequeueOutcome outcome = RequeueOutcome::kNotAsked;
    bool requeued = false;  // pending again, with `excluded` excluded and released
    std::string reason;
    std::string code;  // RequeueDecision::code; "slurm-refused" when Slurm refused a step
    std::vector<std::string> excluded;
  };
  using OnResult = std::function<void(const Result&)>;
  using Suspects = std::function<std::set<std::string>()>;
  // slurmctld's record of a job (SlurmClient::load_job); nullopt with `error` when it cannot say.
  using LoadJob = std::function<std::optional<JobFacts>(uint64_t job_id, std::string& error)>;
  // The records of a job's attempts for the crashloop stop (agent/requeue/crashloop.h): this
  // node's history (loop thread), and other nodes' answers, for records that ended at or after
  // `since` (on a worker): a requeue keeps the next attempt off nodes of the one before, so the
  // earlier attempt's record may be only there.
  using LocalAttempts = std::function<std::vector<OutcomeRecord>(uint64_t job_id)>;
  using PeerAttempts = std::function<std::vector<OutcomeRecord>(
      uint64_t job_id, int64_t since, const std::vector<std::string>& nodes)>;

  struct Stats {
    uint64_t requeued = 0;
    uint64_t refused = 0;   // by policy or by Slurm
    uint64_t declined = 0;  // asked, but not a failure a requeue elsewhere helps
    uint64_t report_pass_failures = 0;
    uint64_t release_failures = 0;
  };

  // `state_dir`: where requeue-held.json is kept (the spool directory).
  JobRequeue(EventLoop& loop, WorkerPool& workers, AccountingComments& comments,
             SlurmCommandRunner run, LoadJob load_job, Suspects suspects, std::string state_dir);
  JobRequeue(const JobRequeue&) = delete;
  JobRequeue& operator=(const JobRequeue&) = delete;

  void set_on_result(OnResult on_result) { on_result_ = std::move(on_result); }
  void set_attempt_records(LocalAttempts local, PeerAttempts peers) {
    local_attempts_ = std::move(local);
    peer_attempts_ = std::move(peers);
  }

  // Finishes the requeues a previous run left between hold and release.
  void open();

  // The pipeline's hand-over (JobEndPipeline::set_on_analysed).
  void on_analysed(AnalysedJob job);
  // Kills running report passes (shutdown).
  void kill_all() { reports_.kill_all(); }

  size_t in_flight() const { return in_flight_; }
  const Stats& stats() const { return stats_; }

 private:
  struct Job;
  using JobPtr = std::shared_ptr<Job>;

  // A job between our hold and its release: what it is released with, and the restart count of
  // the attempt it came from (our requeuehold makes Slurm's one more; -1: not recorded).
  struct Held {
    std::string exclusions;
    int restarts = -1;
  };

  void decide(const JobPtr& job, const std::optional<JobFacts>& now, const std::string& error);
  void submit_summary(const JobPtr& job, const std::string& summary);
  void carry_out(const JobPtr& job);
  void held(const JobPtr& job, const SlurmCommandResult& hold, const SlurmCommandResult& exclude,
            const CommentWrite& comment);
  void report_pass(const JobPtr& job, std::function<void()> then);
  void release(const JobPtr& job);
  void finish(const JobPtr& job, bool requeued);
  void step(const JobPtr& job, const std::vector<std::string>& argv, const SlurmCommandResult& r);
  void mark_held(uint64_t job_id, const Held& held);
  void unmark_held(uint64_t job_id);
  void save_held();
  void finish_interrupted(uint64_t job_id, const Held& held);

  EventLoop& loop_;
  WorkerPool& workers_;
  AccountingComments& comments_;
  SlurmCommandRunner run_;
  LoadJob load_job_;
  Suspects suspects_;
  LocalAttempts local_attempts_;
  PeerAttempts peer_attempts_;
  OnResult on_result_;
  std::string state_dir_;
  AnalysisRunner reports_;
  std::map<uint64_t, Held> held_;
  size_t in_flight_ = 0;
  Stats stats_;
};

}  // namespace triage::agent
