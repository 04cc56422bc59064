// How many nodes of a partition the agents may take out at once (issue 27, "Limits"): drains and
// reboots by the agents stop at MaxTriageDrainFraction of a partition and at MaxTriageDrainNodes,
// counted from Slurm's own node states and reasons, so that the agents need no coordinator.
//
// What counts as taken: a node drained, draining, down, failed or rebooting whose reason is one an
// agent or the plugin wrote ("triage: ...", "triage preflight: ..."). A node an admin took out does
// not count: the limit bounds what the agents do, not the partition's health.
//
// Slurm has no compare-and-set, so two agents deciding in the same second can both see room for
// one more node; the limit can then be exceeded by the nodes that decided together (docs/agent.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::agent {

// One line of `sinfo -h -N` (a node appears once per partition it is in).
struct PartitionNode {
  std::string partition;
  std::string node;
  std::string state;   // sinfo's %T, lower case: "idle", "drained", "down*", "reboot_issued", ...
  std::string reason;  // sinfo's %E ("none" when there is none)
};

// `sinfo -h -N -o %R|%N|%T|%E`: partition, node, long state and reason, one node per line; the
// reason is last because it is the one field a person types (it may hold the separator).
std::vector<std::string> partition_nodes_argv();

// The lines of partition_nodes_argv()'s output; nullopt with `error` naming the line when one does
// not have the four fields.
std::optional<std::vector<PartitionNode>> parse_partition_nodes(std::string_view out,
                                                                std::string& error);

// Whether an agent (or the plugin's preflight) took this node out: a state that keeps jobs off it
// and a reason starting with "triage".
bool taken_by_triage(const PartitionNode& n);

struct DrainLimits {
  double fraction = 0.10;  // MaxTriageDrainFraction
  int64_t max_nodes = 0;   // MaxTriageDrainNodes (0: no absolute cap)
};

struct LimitDecision {
  bool allowed = false;
  std::string why;  // one line: the partition, how many are taken, the limit
};

// The number of nodes the agents may hold out of a partition of `size` nodes: the fraction of it
// rounded down, at least one (a small partition must still be able to lose its one bad node), and
// never more than max_nodes when that is set.
int64_t partition_limit(int64_t size, const DrainLimits& limits);

// Allows taking `node` out only when, in every partition it is in, the nodes other than it already
// taken by triage plus this one stay within partition_limit(); a node Slurm does not list in any
// partition is refused (the count would be a guess).
LimitDecision decide_drain_limit(const std::vector<PartitionNode>& nodes, const std::string& node,
                                 const DrainLimits& limits);

}  // namespace triage::agent
