// What this node knows about Slurm jobs: the lifecycle messages the SPANK plugin sent (job start,
// task start/exit with pids and wait statuses, job end with the epilog's facts) and the summary of
// each analysis this node ran. Messages are validated here; the agent makes them durable in the
// spool before applying them (and before acknowledging them).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/node/hang_action.h"
#include "common/model.h"

namespace triage::agent {

// A validated lifecycle message.
struct LifecycleMessage {
  std::string op;  // job_start | task_start | task_exit | job_end
  std::string msg_id;
  uint64_t job_id = 0;
  nlohmann::json raw;  // as sent (kept in the spool and handed on as epilog facts)
};

bool is_lifecycle_op(const std::string& op);

// Checks types and required fields; throws InputError naming the field ("task_exit.pid: expected
// an integer").
LifecycleMessage parse_lifecycle(const nlohmann::json& request);

struct JobRecord {
  uint64_t job_id = 0;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::string mode;  // off | basic | full ("" until a message said)
  // --triage-on-hang and the plugstack's hang_action as the job registered (records from before
  // they existed: notify, not allowed).
  HangChoice on_hang = HangChoice::kNotify;
  bool hang_action_allowed = false;
  // --triage-requeue=N and the plugstack's requeue= as the job registered (0 and refused before
  // they existed).
  int requeue_max = 0;
  bool requeue_allowed = false;
  std::vector<std::string> nodes;
  // The attempt this record is about: Slurm's restart count as its prolog saw it
  // (SLURM_JOB_RESTART_COUNT in job_start), else as slurmctld showed it when the live loop set the
  // attempt up; absent when neither said. A job_start of a later attempt, or a task that starts
  // after the job ended, starts the record afresh (begin_new_attempt).
  std::optional<int> restart_count;
  // How many times this node saw the job start over (begin_new_attempt), whether or not it learnt
  // the restart count: what tells a follower of the earlier attempt that it is done.
  uint64_t attempt_seq = 0;
  // Which array task (and het job) this is, from slurmd's prolog and epilog environment or the
  // batch step's task messages; never an srun step's, which come from the user's environment.
  std::optional<uint32_t> array_job_id;
  std::optional<uint32_t> array_task_id;
  std::optional<uint32_t> het_job_id;
  int64_t start_usec = 0;  // first job_start / task_start seen here
  int64_t end_usec = 0;    // job_end
  bool ended = false;
  bool batch_here = false;                 // the batch step ran on this node
  std::map<std::string, TaskExit> tasks;   // "<step>/<task>"
  nlohmann::json job_end;                  // the job_end message (epilog facts)
  std::optional<nlohmann::json> analysis;  // the analysis summary, once there is one
  std::set<std::string> msg_ids;
  int64_t touched_usec = 0;
};

class JobTable {
 public:
  bool has_message(uint64_t job_id, const std::string& msg_id) const;
  // Applies a (durable) message. `now_usec` stands in for a missing time_usec.
  JobRecord& apply(const LifecycleMessage& msg, int64_t now_usec);
  // Rebuilds a job from its spool records (messages and analysis summaries). A message without a
  // time of its own takes the time it was received ("t"), or `fallback_usec`.
  void restore(uint64_t job_id, const std::vector<nlohmann::json>& records, int64_t fallback_usec);
  void set_analysis(uint64_t job_id, const nlohmann::json& summary);

  JobRecord* find(uint64_t job_id);
  const JobRecord* find(uint64_t job_id) const;
  const std::map<uint64_t, JobRecord>& jobs() const { return jobs_; }
  void erase(uint64_t job_id);

  // The jobs that registered a task with this pid at some time (pids are reused), by id.
  const std::set<uint64_t>& jobs_with_pid(int64_t pid) const;

  // The jobs not ended yet, by id.
  const std::set<uint64_t>& running() const { return running_; }

  // pid -> job for tasks still running (for the D-state sampler).
  std::map<int64_t, uint64_t> running_pids() const;

 private:
  void forget_pid(const JobRecord& j, int64_t pid);
  void begin_new_attempt(JobRecord& j);

  std::map<uint64_t, JobRecord> jobs_;
  // Keeps attribution of a pid-naming event from walking every task of every job the node kept.
  std::unordered_map<int64_t, std::set<uint64_t>> pid_jobs_;
  // Jobs not ended yet: running_pids() is taken after every lifecycle message, and must not walk
  // the thousands of ended jobs a node keeps.
  std::set<uint64_t> running_;
};

}  // namespace triage::agent
