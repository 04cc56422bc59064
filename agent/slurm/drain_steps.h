// Draining a node without ever replacing a drain somebody else made, from the steps slurmctld
// offers. Slurm has no compare-and-set: in 22.05 (src/slurmctld/node_mgr.c update_node) an update
// that carries a reason replaces the node's reason unconditionally, drained or not, while an
// update to DRAIN without a reason leaves whatever reason is there. So the drain is made in two
// writes: DRAIN alone first (an admin's drain made since our check keeps its reason, and we see
// it), then our reason once the node is drained with nobody else's. The second write can still
// replace a reason written in the milliseconds between our re-read and it, on a node that already
// shows as drained; that window is as small as Slurm allows (docs/security.md).
// "Written since" is the reason, its author and its time, not the text alone: from 23.11 on, a
// cluster without accounting storage keeps an undrained node's old reason (slurm_compat.h), and
// an admin's new drain may repeat that text word for word.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "agent/slurm/slurm_client.h"

namespace triage::agent {

struct DrainSteps {
  // The node as slurmctld sees it now.
  std::function<std::optional<SlurmNodeState>(std::string& error)> read;
  // UPDATE State=DRAIN with no reason: whatever reason the node carries stays.
  std::function<bool(std::string& error)> drain_keeping_reason;
  // UPDATE Reason=<reason> (the state as it is).
  std::function<bool(const std::string& reason, std::string& error)> set_reason;
};

// Whether `reason` is one the agent writes ("triage: ...").
bool is_own_reason(const std::string& reason);

// Contract: drains the node with `reason` (a "triage: ..." text) and returns true only when,
// read back afterwards, the node is drained with exactly `reason`; never writes a reason over a
// drain or down state somebody else made (refused with `error`); a node already drained by us is
// left as it is (true); a drain somebody made between our check and our drain keeps its reason and
// is reported as theirs (false).
bool drain_in_steps(const DrainSteps& steps, const std::string& reason, std::string& error);

// The reason slurmctld gives a node whose prolog failed (22.05 src/slurmctld/node_mgr.c,
// validate_node_specs: "Prolog error", set only when the node is not drained already).
inline constexpr const char* kSlurmPrologErrorReason = "Prolog error";

// Contract: leaves the node drained with `reason` (a "triage preflight: ..." text) when it is not
// drained or down, or drained for our preflight refusal (Slurm's own "Prolog error", or an earlier
// "triage preflight: ..."), and returns true once read back so; never writes over any other drain
// or down state (false with `error`). The preflight refused a job here and its prolog fails, so
// Slurm drains the node either way: this only makes the reason say why, whichever of the two
// writes reaches slurmctld first.
bool label_preflight_drain(const DrainSteps& steps, const std::string& reason, std::string& error);

// The steps on the real slurmctld (slurm_update_node), reading `node` through `client`
// (agent/slurm/slurm_client.cpp; the e2e test puts an admin's drain between them).
DrainSteps libslurm_drain_steps(SlurmClient& client, const std::string& node);

}  // namespace triage::agent
