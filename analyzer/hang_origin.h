// Where a hang began. The rule, in one sentence: the rank whose last enqueued collective is behind
// the others' never reached the collective they wait in, so it (and its node) is where the hang
// began; when every reporting rank is at -1 no collective was in flight, so the processes froze
// outside communication and there is no communication hang to place; otherwise the first signal
// in the policy's order that singles out one rank or node (the first task to exit well before the
// others, the only node with the job's tasks in D state, the only node whose kernel spoke at the
// stall) decides, and when none does there is no origin, with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/collective_progress.h"

namespace triage {

// The signals besides the watchdog's numbers, in the order they are tried (first that singles one
// out wins). Ids as in HangOrigin::signal.
inline constexpr const char* kSignalFirstExit = "first-exit";
inline constexpr const char* kSignalDState = "d-state";
inline constexpr const char* kSignalKernelEvent = "kernel-event";
inline constexpr const char* kSignalBehind = "collective-behind";
inline constexpr const char* kSignalSilent = "silent-rank";

// Thresholds and order, and why:
// - first_exit_lead_seconds 60: the watchdog fires on every waiting rank within a second or two of
//   the others (they all started waiting in the same collective), and torchrun/srun tear the rest
//   down within seconds; a rank that ended a minute before every other one ended on its own, and
//   the others then waited for it.
// - kernel_event_slack_seconds 120: kernel messages about a stuck task (hung_task_timeout_secs is
//   120 s by default) come up to two minutes after the stall began.
// - order: a task's own end is about a rank; D state and kernel events are about a node, so they
//   come after it.
struct HangOriginPolicy {
  double first_exit_lead_seconds = 60;
  double kernel_event_slack_seconds = 120;
  std::vector<std::string> order = {kSignalFirstExit, kSignalDState, kSignalKernelEvent};
};

// A task's end as its node's agent saw it (trusted).
struct RankEnd {
  int64_t rank = -1;
  std::string host;
  int64_t end_usec = 0;
  std::string how;  // "exit 1", "SIGKILL", ...
};

// What a node's agent saw during the job that can place a stall on it (trusted).
struct NodeStallSignals {
  std::string host;
  uint64_t job_dstate = 0;  // the job's own tasks in D state at the last sample
  // Kernel events of warning severity or worse, with their time (0 = unknown) and one line each.
  std::vector<std::pair<int64_t, std::string>> events;
};

struct HangOriginInput {
  std::vector<CollectiveProgress> collectives;  // from the log (log_facts.h)
  std::map<int64_t, std::string> rank_node;     // rank -> host, from the task layout
  // The ranks the job ran, when the agents' evidence lists them all ({} = unknown): a rank in it
  // that printed no watchdog line while all the others did had no collective in flight.
  std::vector<int64_t> known_ranks;
  std::vector<RankEnd> task_ends;
  std::vector<NodeStallSignals> nodes;
  int64_t stall_usec = 0;  // when progress stopped (the last step's time; 0 = unknown)
};

struct HangOrigin {
  bool found = false;
  std::optional<int64_t> rank;  // none when only a node is singled out
  std::string node;             // "" = unknown
  std::string signal;           // which signal decided (kSignal*)
  std::string basis;            // one sentence: the evidence
  std::string reason;           // when !found: why nothing singles one out
  // Every reporting rank was at -1: the processes froze outside communication.
  bool outside_communication = false;
};

HangOrigin decide_hang_origin(const HangOriginInput& in, const HangOriginPolicy& policy = {});

}  // namespace triage
