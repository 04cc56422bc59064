// The live loop's decisions, as plain functions over plain values (agent/live/live_monitor.h
// carries them out): which jobs this node follows, what backs a stall verdict, when a job's live
// state is saved, how its record takes a poll's news, and what a stall has burnt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/live/log_follower.h"
#include "agent/node/hang_action.h"
#include "agent/node/job_table.h"
#include "analyzer/live_progress.h"
#include "analyzer/stall_verdict.h"
#include "common/model.h"

namespace triage::agent {

// Contract: a job is followed by this node while it has not ended, its triage mode is on (basic
// or full), its owner is known and its batch step runs here (the batch host writes the log).
bool should_follow(const JobRecord& job);

// The facts that back a stall verdict.
struct Corroboration {
  uint64_t dstate_tasks = 0;       // the job's tasks in D state, on all of its nodes
  uint64_t kernel_events = 0;      // kernel events of warning severity or worse during the job
  bool busy_wait = false;          // the cluster Prometheus shows its GPUs spinning at idle power
  std::vector<std::string> lines;  // one per fact, for the record and the report
};

// What the job's other nodes and the cluster Prometheus said when last asked (off the loop, at
// most every kRemoteEvidenceIntervalUsec while the job is stalled).
struct RemoteEvidence {
  int64_t asked_usec = 0;           // 0: never asked
  std::vector<NodeEvidence> peers;  // the job's other nodes; an unreachable one carries its error
  bool busy_wait = false;           // playbook 1's busy-wait signature on the job's nodes
  std::string busy_wait_line;       // the probe's sentence when it found the signature
};

// Peers and the Prometheus are asked again after this long (a 256-node job must not be asked
// every 5 s poll while it stays stalled).
inline constexpr int64_t kRemoteEvidenceIntervalUsec = int64_t{60} * 1000000;

// Contract: the other nodes and the Prometheus are asked when they never were for this job, or
// `interval_usec` has passed since they were.
bool remote_evidence_due(int64_t asked_usec, int64_t now_usec, int64_t interval_usec);

// Contract: the job's D-state tasks on each reachable node of `nodes` (NodeEvidence::job_dstate),
// every kernel event of warning severity or worse attributed to the job on them at or after
// `since_usec` (informational events back nothing), and the busy-wait signature when the remote
// evidence found it; each fact gets one line naming its node (or the Prometheus).
Corroboration corroborate(const std::vector<NodeEvidence>& nodes, int64_t since_usec,
                          const RemoteEvidence& remote = {});

// At most this many early warnings are kept per job (one per class, the first ones).
inline constexpr size_t kMaxLiveWarnings = 16;

// Contract: adds each warning whose class the record does not hold yet, up to kMaxLiveWarnings,
// with its text cut to `max_text` bytes; returns how many were added.
size_t add_warnings(LiveRecord& record, const std::vector<EarlyWarning>& seen, int64_t now_usec,
                    size_t max_text = 1024);

// At most this many earlier stalls (flagged, then resumed) are kept per job, the latest ones.
inline constexpr size_t kMaxEarlierStalls = 8;

// Contract: the record of a stall flagged at `now_usec` from `v` (the step, silence, threshold
// and basis), with its corroboration lines; a stall flagged before and resumed moves to
// `earlier_stalls` (the latest kMaxEarlierStalls kept), and warnings, the follow start and the
// action taken are kept.
void flag_stall(LiveRecord& record, const StallVerdict& v, const Corroboration& c,
                int64_t now_usec);

// Contract: a stall is to be flagged when none is flagged now: never before, or the last one
// resumed.
bool stall_unflagged(const LiveRecord& record);

// Contract: a flagged job resumed when steps arrive after its flag (recorded once).
bool mark_resumed(LiveRecord& record, bool new_steps, int64_t now_usec);

// Contract: the interim report is written again when NCCL watchdog lines arrived while the job's
// flagged stall lasts (flagged, not resumed), so that its "Hang origin:" line, worked out by the
// analyzer from every watchdog line in the log (analyzer/hang_origin.h), follows them: the
// watchdog's timeout (10 minutes by default) usually fires after the stall was flagged.
bool interim_report_due(const LiveRecord& record, bool new_watchdog_lines);

// Contract: a running job's interim report is written again when its pace warning is about
// something else than the one its last report showed (`key` against `reported`, PaceWarning::key:
// raised, cleared, another straggler or a slowdown added), so that the job directory says so while
// the job runs; its measured numbers moving is not worth a report.
bool pace_report_due(const std::string& reported, const std::string& key);

// What a pace judgement did to the record's pace warning (analyzer/live_pace.h).
enum class PaceChange : uint8_t { kNone, kRaised, kCleared };

// Contract: the record takes the pace warning `line` judged at `now_usec` ("" = none): a warning
// raised where none stood gets `now_usec` as its since, one that stands keeps its since and takes
// the new line (its numbers move), an empty line clears it; the stall's fields and the action are
// never touched (a slowdown or a straggler is a warning, never a hang).
PaceChange take_pace_warning(LiveRecord& record, const std::string& line, int64_t now_usec);

// The facts decide_hang_action needs, from the job's registration, its record, the verdict and
// what slurmctld shows of the job now (Requeue=1 and Restarts).
HangFacts hang_facts(const JobRecord& job, const LiveRecord& record, const StallVerdict& v,
                     const Corroboration& c, bool batch, const JobFacts& shown);

// One attempt of a job: Slurm runs a requeued job again under the same id, with its Restarts one
// higher and a new start time. A live record belongs to one attempt (issue 30): a new attempt is
// followed, flagged and reported afresh; an agent restarted within the same attempt resumes it.
// (An array task has a job id of its own, so the id and these two name one attempt of it.)
struct LiveAttempt {
  int restart_count = 0;
  int64_t start_time = 0;  // slurmctld's, seconds since the epoch
  bool operator==(const LiveAttempt&) const = default;
};

LiveAttempt attempt_of(const JobFacts& shown);
std::string to_string(const LiveAttempt& a);

// Contract: why a hang action must not run on what slurmctld shows now ("" when it may): the job
// must be the attempt that was flagged (same Restarts and start time) and RUNNING; a requeued,
// restarted, suspended or ended job is left as it is.
std::string attempt_mismatch(const LiveAttempt& flagged, const JobFacts& shown);

// A cancel or requeue is tried at most this often; a failed try is tried again after
// kActionRetryUsec, doubled each time (10 s, then 20 s).
inline constexpr int64_t kMaxActionTries = 3;
inline constexpr int64_t kActionRetryUsec = int64_t{10} * 1000000;

// Contract: a cancel or requeue is to be run (again) when the record holds one whose last try
// failed with tries left, or one recorded but never answered (an agent that stopped while it ran:
// the attempt check before every try keeps a second run from touching anything else).
bool action_pending(const LiveRecord& record);

// Contract: the wait before try `tries + 1` after `tries` failed ones: kActionRetryUsec doubled
// per earlier failure.
int64_t action_retry_delay_usec(int64_t tries);

// Contract: the record takes a try's answer: done (error cleared), retry (tries left) or failed
// (none left), with the error and the try count in action_error.
void record_action_try(LiveRecord& record, bool ok, const std::string& error);

// Contract: the follow state is saved when the record changed, or when the follower moved and
// `interval_usec` has passed since the last save (a crash then re-reads at most that much).
bool save_due(bool record_changed, bool moved, int64_t last_saved_usec, int64_t now_usec,
              int64_t interval_usec);

// Contract: the GPU-hours a stalled job burnt between `counted_until` (or its last step, if later)
// and `now`, all three on one clock (the live loop's monotonic one, so that a step of the wall
// clock adds none); 0 unless it is flagged and has not resumed.
double stalled_gpu_hours(const LiveRecord& record, std::optional<int64_t> gpus, int64_t last_step,
                         int64_t counted_until, int64_t now);

// The job's live state as a spool record: {"r":"live","attempt":{"restarts":R,"start":S},
// "follow":...,"record":...,"lines":N}.
nlohmann::json live_spool_record(const FollowState& follow, const LiveRecord& record, int64_t lines,
                                 const LiveAttempt& attempt);

struct LiveSpoolEntry {
  std::optional<LiveAttempt> attempt;  // absent: written before attempts were recorded
  FollowState follow;
  LiveRecord record;
  int64_t lines = 0;
};

// Contract: the newest well-formed live record among a job's spool records (others skipped).
std::optional<LiveSpoolEntry> latest_live_entry(const std::vector<nlohmann::json>& records);

// Contract: the newest well-formed live record of the attempt with `restart_count` (one written
// before attempts were recorded belongs to none).
std::optional<LiveSpoolEntry> live_entry_of(const std::vector<nlohmann::json>& records,
                                            int restart_count);

// Contract: a follower starting on `attempt` resumes `saved` only when it is that attempt's record
// of the same StdOut file (an agent restarted within the attempt); anything else starts afresh.
bool resumes(const LiveSpoolEntry& saved, const LiveAttempt& attempt, const std::string& path);

}  // namespace triage::agent
