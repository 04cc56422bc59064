// The job's triage summary in Slurm's accounting (issue 14, item 4): read the field the admin chose
// (AccountingComment: AdminComment, Comment or none) with sacct, merge ours in
// (agent/slurm/job_comment.h), write it back with sacctmgr. At job end the job is no longer
// RUNNING, so slurmctld refuses `scontrol update`; only slurmdbd can change the record.
//
// A write that fails (slurmdbd down or slow, the record not there yet) is kept in a small state
// file in the spool directory and tried again later with a growing delay, for a day at most; it
// never holds up the job-end path. Loop thread only; the commands run on a worker.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "agent/base/event_loop.h"
#include "agent/base/worker_pool.h"
#include "agent/slurm/job_ref.h"
#include "agent/slurm/slurm_command_runner.h"
#include "agent/slurm/slurm_commands.h"

namespace triage::agent {

enum class CommentWriteState {
  kWritten,    // the field now holds our summary
  kUnchanged,  // it already did
  kLeftAlone,  // another tool's text leaves no room or would be changed: not written, not retried
  kFailed,     // sacct or sacctmgr failed: worth trying again
};

struct CommentWrite {
  CommentWriteState state = CommentWriteState::kFailed;
  std::string detail;  // what happened, for the log
};

// One try: sacct, merge, sacctmgr, on the one record `job` names. Blocking (a worker's).
CommentWrite write_accounting_comment(const SlurmCommandRunner& run, CommentField field,
                                      const JobRef& job, const std::string& summary);

class AccountingComments {
 public:
  struct Options {
    CommentField field = CommentField::kAdminComment;
    std::string state_dir;  // the spool directory; the state file is accounting-comments.json
    int64_t first_retry_ms = 30000;
    int64_t max_retry_ms = 600000;
    int64_t give_up_after_sec = 86400;
    size_t max_pending = 10000;
  };

  struct Stats {
    uint64_t written = 0;
    uint64_t unchanged = 0;
    uint64_t left_alone = 0;
    uint64_t failed_tries = 0;
    uint64_t given_up = 0;
    size_t pending = 0;
  };

  AccountingComments(Options options, EventLoop& loop, WorkerPool& workers, SlurmCommandRunner run);
  AccountingComments(const AccountingComments&) = delete;
  AccountingComments& operator=(const AccountingComments&) = delete;

  // Loads the writes a previous run left pending and schedules them (a state file that cannot be
  // read is reported and set aside, never fatal).
  void open();

  // Writes `summary` for the job now, on a worker, and keeps it until it is written or given up.
  // A later summary of the same job replaces an earlier one still pending. A job that cannot be
  // named as one attempt (job_ref() refused) is not written; the log says why.
  void submit(const JobFacts& job, const std::string& summary);
  void submit(const JobRef& job, const std::string& summary);

  // Records the outcome of a try made elsewhere (the requeue's own, before its hold): a failed one
  // is kept and retried like any other.
  void record_try(const JobRef& job, const std::string& summary, const CommentWrite& result);

  bool enabled() const { return options_.field != CommentField::kNone; }
  CommentField field() const { return options_.field; }
  const SlurmCommandRunner& runner() const { return run_; }
  const Stats& stats() const { return stats_; }

 private:
  struct Pending {
    JobRef job;
    std::string summary;
    int64_t first_usec = 0;  // wall clock of the first try
    int tries = 0;
    uint64_t generation = 0;  // a newer submit makes an older try's answer stale
  };

  // Makes `summary` the job's pending write, its first try now (a newer generation than any
  // answer still on its way); returns that generation.
  uint64_t begin(const JobRef& job, const std::string& summary);
  void attempt(uint64_t job_id);
  void finish(uint64_t job_id, uint64_t generation, const CommentWrite& result);
  void retry_later(uint64_t job_id);
  void save();

  Options options_;
  EventLoop& loop_;
  WorkerPool& workers_;
  SlurmCommandRunner run_;
  std::map<uint64_t, Pending> pending_;
  uint64_t generation_ = 0;
  Stats stats_;
};

}  // namespace triage::agent
