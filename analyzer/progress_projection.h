// Training progress and what a failure cost, from the `completed step:` lines and the run config.
// Steps are 0-indexed: `steps=T` runs steps 0..T-1; `completed step: N` means step N is done. The
// step time is the steady-state mean (the first five steps of the run are warm-up and compile).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analyzer/log_facts.h"
#include "analyzer/triage_report.h"
#include "common/live_stall_defaults.h"

namespace triage {

inline constexpr int64_t kDefaultCheckpointPeriod = 200;

struct StallPolicy {
  // Steps count as stopped when the last one is older than max(min_seconds, step_factor x step
  // time): long enough that a slow checkpoint save is not mistaken for a hang.
  double min_seconds = kDefaultStallAfterSeconds;
  double step_factor = 20;
};

struct ProgressInput {
  const LogFacts* facts = nullptr;
  const RestoreFacts* worker_restore = nullptr;  // from ray_logs/*/worker*.out, when found
  int64_t reference_time_usec = 0;               // "now" for expected-step (0 = unknown)
  std::string reference_basis;
  // The log's modification time: an upper bound for the last step's time when step lines carry no
  // timestamps (never a proof that training is alive).
  int64_t log_mtime_usec = 0;
  StallPolicy stall;
};

ProgressProjection project_progress(const ProgressInput& in);

// A segment's step time, by the best basis it offers: the steady-state mean of the durations its
// step lines state, else their warm-up mean, else the span between its first and last step's
// times, else the first step alone. `steady` when the basis excludes warm-up: the steady-state
// mean, or the time span of a segment already past its warm-up steps.
struct StepTime {
  std::optional<double> seconds;
  std::string basis;
  bool steady = false;
};
StepTime step_time_of(const StepSegment& s);

}  // namespace triage
