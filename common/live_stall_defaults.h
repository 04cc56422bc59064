// The defaults of the live stall rule, shared by the analyzer's LiveStallPolicy
// (analyzer/stall_verdict.h, which says why these values) and the agent's HangStallFactor and
// HangStallMin keys (agent/base/config.cpp), which would otherwise drift apart; header-only, so
// neither side links the other.
#pragma once

#include <cstdint>

namespace triage {

inline constexpr int64_t kDefaultHangStallFactor = 10;
inline constexpr int64_t kDefaultHangStallMinSeconds = 600;

}  // namespace triage
