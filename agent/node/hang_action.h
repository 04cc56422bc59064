// What the agent does about a running job it judged hung: the user's --triage-on-hang choice,
// honoured only as far as the admin's plugstack hang_action allows and the evidence warrants.
// Pure: the follower loop gathers the facts, this decides, the loop carries it out.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace triage::agent {

// The user's --triage-on-hang (the SPANK plugin's HangAction, as the agent records it).
enum class HangChoice { kNotify, kCancel, kRequeue };

std::string_view to_string(HangChoice c);
std::optional<HangChoice> parse_hang_choice(std::string_view s);

// kNotify: record the verdict with its evidence, write the interim triage.md and mark the job's
// comment. kCancel and kRequeue do all of that and then end or requeue the job.
enum class HangOutcome { kNone, kNotify, kCancel, kRequeue };

std::string_view to_string(HangOutcome o);

struct HangFacts {
  HangChoice asked = HangChoice::kNotify;
  bool admin_allows = false;  // the job registered with the plugstack's hang_action=allow

  // judge_stall's verdict for the job now.
  bool stalled = false;
  double silence_s = 0;
  double threshold_s = 0;

  // What the nodes know, for the job's nodes during the job.
  int dstate_tasks = 0;    // the job's tasks stuck in D state
  int kernel_events = 0;   // kernel events attributed to the job (hung task, GPU reset, ...)
  bool busy_wait = false;  // GPU utilisation high, power near idle (seed playbook 1)

  bool notified = false;     // this hang was already recorded (interim report and comment written)
  bool acted = false;        // a cancel or requeue was already issued for this job
  bool batch = false;        // a batch job (Slurm requeues nothing else)
  bool requeueable = false;  // Slurm's Requeue=1 for the job
  // The bound on requeues, shared with --triage-requeue=N: Slurm's Restarts for the job as
  // slurmctld shows it at the decision (every requeue of the job, on any node, by anyone), and the
  // N the job registered (0: no --triage-requeue; --triage-on-hang=requeue alone allows one).
  int restarts = 0;
  int requeue_max = 0;
};

struct HangDecision {
  HangOutcome outcome = HangOutcome::kNone;
  bool corroborated = false;  // at least one node fact backs the verdict
  std::string reason;         // one sentence, for the record and the final report
};

// The requeues a hung job may have: --triage-requeue=N's N, or one when only
// --triage-on-hang=requeue was given (as a bare --triage-requeue means one).
int hang_requeues_allowed(const HangFacts& f);

// Contract: nothing unless the job is stalled and nothing was acted on yet; notify (once) for
// every stalled job; cancel or requeue only when the user asked, the admin allowed it, Slurm can
// do it, and the stall is corroborated by a node fact or has lasted twice its threshold, else the
// request is downgraded to notify with the reason why; a requeue the job has no requeues left for
// (Slurm's Restarts at hang_requeues_allowed) becomes a cancel, since the user accepted that the
// hung attempt ends and only its rerun is used up.
HangDecision decide_hang_action(const HangFacts& f);

}  // namespace triage::agent
