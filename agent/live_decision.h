// The live loop's decisions, as plain functions over plain values (agent/live_monitor.h carries
// them out): which jobs this node follows, what backs a stall verdict, when a job's live state is
// saved, how its record takes a poll's news, and what a stall has burnt.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/hang_action.h"
#include "agent/job_table.h"
#include "agent/log_follower.h"
#include "analyzer/live_progress.h"
#include "analyzer/stall_verdict.h"
#include "common/model.h"

namespace triage::agent {

// Contract: a job is followed by this node while it has not ended, its triage mode is on (basic
// or full), its owner is known and its batch step runs here (the batch host writes the log).
bool should_follow(const JobRecord& job);

// The node facts that back a stall verdict.
struct Corroboration {
  uint64_t dstate_tasks = 0;       // the job's tasks in D state (this node's sampler)
  uint64_t kernel_events = 0;      // kernel events of warning severity or worse during the job
  std::vector<std::string> lines;  // one per fact, for the record and the report
};

// Contract: the job's D-state tasks on this node, plus every kernel event of warning severity or
// worse attributed to the job on any of `nodes` at or after `since_usec` (informational events
// back nothing); each fact gets one line naming its node.
Corroboration corroborate(uint64_t dstate_tasks, const std::string& self,
                          const std::vector<NodeEvidence>& nodes, int64_t since_usec);

// At most this many early warnings are kept per job (one per class, the first ones).
inline constexpr size_t kMaxLiveWarnings = 16;

// Contract: adds each warning whose class the record does not hold yet, up to kMaxLiveWarnings,
// with its text cut to `max_text` bytes; returns how many were added.
size_t add_warnings(LiveRecord& record, const std::vector<EarlyWarning>& seen, int64_t now_usec,
                    size_t max_text = 1024);

// Contract: the record of a stall flagged at `now_usec` from `v` (the step, silence, threshold
// and basis), with its corroboration lines; warnings and the follow start are kept.
void flag_stall(LiveRecord& record, const StallVerdict& v, const Corroboration& c,
                int64_t now_usec);

// Contract: a flagged job resumed when steps arrive after its flag (recorded once).
bool mark_resumed(LiveRecord& record, bool new_steps, int64_t now_usec);

// The facts decide_hang_action needs, from the job's registration, its record and the verdict.
HangFacts hang_facts(const JobRecord& job, const LiveRecord& record, const StallVerdict& v,
                     const Corroboration& c, bool batch, bool requeueable);

// Contract: the follow state is saved when the record changed, or when the follower moved and
// `interval_usec` has passed since the last save (a crash then re-reads at most that much).
bool save_due(bool record_changed, bool moved, int64_t last_saved_usec, int64_t now_usec,
              int64_t interval_usec);

// Contract: the GPU-hours a stalled job burnt between `counted_until_usec` (or its last step, if
// later) and `now_usec`; 0 unless it is flagged and has not resumed.
double stalled_gpu_hours(const LiveRecord& record, std::optional<int64_t> gpus,
                         int64_t counted_until_usec, int64_t now_usec);

// The job's live state as a spool record: {"r":"live","follow":...,"record":...,"lines":N}.
nlohmann::json live_spool_record(const FollowState& follow, const LiveRecord& record,
                                 int64_t lines);

struct LiveSpoolEntry {
  FollowState follow;
  LiveRecord record;
  int64_t lines = 0;
};

// Contract: the newest well-formed live record among a job's spool records (others skipped).
std::optional<LiveSpoolEntry> latest_live_entry(const std::vector<nlohmann::json>& records);

}  // namespace triage::agent
