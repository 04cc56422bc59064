// The defaults of the stall rules, shared by the analyzer (the live LiveStallPolicy in
// analyzer/stall_verdict.h, which says why these values, and the post-mortem StallPolicy in
// analyzer/progress_projection.h) and the agent's HangStallFactor, HangStallMin and StallAfter keys
// (agent/base/config.cpp), which would otherwise drift apart; header-only, so neither side links
// the other.
#pragma once

#include <cstdint>

namespace triage {

inline constexpr int64_t kDefaultHangStallFactor = 10;
inline constexpr int64_t kDefaultHangStallMinSeconds = 600;
// After the end, a job's steps count as stopped before it when the last one is this much older
// than the end (or 20 step times, if longer): long enough that a slow checkpoint save that a
// cancel interrupted is not taken for a hang.
inline constexpr int64_t kDefaultStallAfterSeconds = 900;

}  // namespace triage
