// Whose fault a failure was: the vocabulary of `blame` in the rules, triage.json and the report.
// A class declares its default (rules key `blame`); blame_decision.h refines it with node evidence.
#pragma once

#include <optional>
#include <string_view>

namespace triage {

// user-code: the program itself (an exception, a bug); user-config: what the job asked for (batch
// size, memory request, time limit, a wrong path in its config); input-data: what it read;
// platform: the node's hardware, driver, network or filesystem; scheduler: Slurm ended it
// (preemption, maintenance); unknown: nothing tells.
enum class Blame { kUserCode, kUserConfig, kInputData, kPlatform, kScheduler, kUnknown };
std::string_view to_string(Blame b);
std::optional<Blame> parse_blame(std::string_view s);

}  // namespace triage
