// Whether a running job has stopped making progress, judged from its live log alone (the agent
// corroborates with what the nodes know). The rule, in one sentence: a job is stalled when no new
// step arrived for max(factor x its steady step time, min_seconds), raised to the longest silence
// the job already survived, plus a pause allowance when a checkpoint save or an evaluation was
// announced after its last step; a job without step lines, or still in its warm-up steps, is never
// stalled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/live_progress.h"
#include "common/live_stall_defaults.h"

namespace triage {

// The agent config's HangStallFactor, HangStallMin and the pause allowance.
//
// Defaults, and why:
// - factor 10: a steady step varies by a few percent; data-loader hiccups, garbage collection and
//   logging every N steps stay well under 10 steps, while a wedged collective never ends.
// - min_seconds 600: for fast steps (1 s) 10x would be 10 s, inside ordinary file-system and
//   network stalls; 10 minutes is still a third of PyTorch's default NCCL watchdog (30 min), so the
//   live verdict comes well before the watchdog would kill the job.
// - pause_allowance_seconds 1800: a synchronous checkpoint of a large model (hundreds of GB of
//   weights and optimizer state to a shared file system) or a full evaluation pass takes minutes
//   to tens of minutes; 30 minutes covers the first such pause. Later pauses of the same job are
//   covered by the learned floor (the longest silence it survived), so a job whose saves take an
//   hour is not flagged twice.
struct LiveStallPolicy {
  double factor = kDefaultHangStallFactor;
  double min_seconds = kDefaultHangStallMinSeconds;
  double pause_allowance_seconds = 1800;
};

struct StallVerdict {
  bool stalled = false;
  bool judged = false;     // false: no step lines or warm-up (never stalled)
  double threshold_s = 0;  // the allowed silence (0 when not judged)
  double silence_s = 0;    // since the last step (0 without steps)
  int64_t last_step = -1;
  int64_t last_step_line = 0;
  // When the last step was printed: on the wall clock as it reads now (for what is shown and
  // asked of others), and on the monotonic clock (what the silence is measured on).
  int64_t last_step_usec = 0;
  int64_t last_step_mono = 0;
  std::string basis;                        // one line: why
  std::vector<std::string> guards_applied;  // "no-step-lines", "warm-up", "burst-floor",
                                            // "checkpoint-save", "evaluation"
};

// Judges `progress` at `now` by the rule at the top of this file; the silence is measured on the
// monotonic clock (analyzer/live_progress.h, "Time as the job lived it").
StallVerdict judge_stall(const LiveProgress& progress, const LiveInstant& now,
                         const LiveStallPolicy& policy);

}  // namespace triage
