// Whose drain a node carries, and when the agent lifts a drain it set itself.
//
// An auto-drain's reason is "triage: <why> [boot <id>]": the prefix says the agent set it (the
// Slurm client adds it), the tag names the boot the node was on. The agent lifts such a drain only
// after the node has rebooted (its boot id differs from the tag) and a health pass on the new
// boot found it healthy, and only while the reason is still exactly what the agent wrote: an admin
// who drains the node again, or edits the reason, takes the drain over, and the agent never
// touches it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "agent/slurm/slurm_client.h"

namespace triage::agent {

// What every reason the agent writes starts with (agent/slurm/slurm_client.cpp adds it).
inline constexpr std::string_view kOwnDrainPrefix = "triage: ";

enum class DrainOwner { kNone, kOurs, kAdmin, kUnknown };

// "none", "ours", "admin", "unknown" (the names `slurm-triage nodes` and the metrics show).
const char* drain_owner_name(DrainOwner owner);

// Whose drain the node carries: none when the DRAIN flag is not set, ours when the reason starts
// with kOwnDrainPrefix, admin otherwise (whoever set it, the agent did not).
DrainOwner drain_owner(const SlurmNodeState& node);

// The boot tag of `boot_id` (its first 8 characters: enough to tell two boots of one node apart).
std::string boot_tag(std::string_view boot_id);

// The `why` an auto-drain on boot `boot_id` gives the Slurm client: "<why> [boot <tag>]".
std::string tagged_drain_why(std::string_view why, std::string_view boot_id);

// The boot tag at the end of a reason of ours ("triage: ... [boot 3f2a9c1b]"), or nullopt when the
// reason is not ours or carries no tag (a drain from an agent before tags: never lifted).
std::optional<std::string> drain_reason_boot(std::string_view reason);

// Whether a health pass judges this boot's evidence: the kernel reader, when there is one, has read
// the log to its end at least once (`kernel_caught_up_usec` > 0), and the collectors, when they
// run, have each delivered a sample.
bool health_pass_fresh(bool kernel_reader_on, int64_t kernel_caught_up_usec, bool collectors_on,
                       bool have_dstate_sample, bool have_sysfs_snapshot);

struct LiftInputs {
  std::string policy;                        // DrainPolicy
  std::optional<SlurmNodeState> node;        // Slurm's view of the node, when the agent has one
  std::string boot_id;                       // this boot
  bool health_fresh = false;                 // a health pass ran on evidence read on this boot
  std::string verdict;                       // that pass's verdict
  bool drain_recommended_this_boot = false;  // the verdict was drain-recommended on this boot
};

struct LiftDecision {
  bool lift = false;
  std::string why;  // one line: why the drain is lifted, or kept
};

// Lifts (UNDRAIN) only a drain of ours that names an earlier boot, on a node that is drained but
// not down, under DrainPolicy=auto, once a fresh health pass on this boot found the node healthy
// and it was never drain-recommended on this boot; every other case keeps the drain, saying why.
LiftDecision decide_drain_lift(const LiftInputs& in);

}  // namespace triage::agent
