// Suspect leaf switches: when the failures of multi-node jobs cluster under one leaf switch, the
// switch is named, not each of its nodes (a leaf, its cables and its uplinks are shared by its
// nodes: draining them one by one would hide the cause and cost a rack).
//
// A leaf switch of the topology (agent/history/switch_topology.h) is a suspect when either
//   - at least min_suspect_nodes of its nodes are suspects on their own (rank_suspects), or
//   - the node test applied to the switch as a whole (rank_node_groups: a job counts for each
//     leaf one of its nodes hangs off, against it when it counts against one of those nodes;
//     Bonferroni over the leaves tested) finds it, with the failures pinned on at least
//     min_failing_nodes of its nodes (failures all on one node are that node's, and the node
//     test speaks for it).
// A suspect switch takes its suspect nodes out of the node list and lists them under it. Without a
// topology (an empty one) the node ranking comes back unchanged.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "agent/history/suspect_nodes.h"
#include "agent/history/switch_topology.h"

namespace triage::agent {

struct SwitchPolicy {
  // Two lemons that hang off the same leaf are far likelier one shared cause than two unrelated
  // faults (each node is already improbable at the Bonferroni level; two under one leaf of a
  // handful of nodes is that squared). The issue asks for exactly this case (issue 27, part 5).
  size_t min_suspect_nodes = 2;
  // The pooled test names a switch only when its failures fall on two of its nodes or more.
  size_t min_failing_nodes = 2;
};

struct SuspectSwitch {
  std::string name;
  std::vector<std::string> nodes;          // every node under it, as the topology lists them
  std::vector<SuspectNode> suspect_nodes;  // its nodes that are suspects on their own
  std::optional<SuspectNode> pooled;       // the switch's own test, when it found it
  double p_value = 1;                      // the smallest of its own and its suspect nodes'
  std::vector<std::string> reasons;
};

struct SwitchRanking {
  std::vector<SuspectSwitch> switches;  // most improbable first
  std::vector<SuspectNode> nodes;       // the node suspects not under a suspect switch
  uint64_t switches_tested = 0;
  std::string test;  // the pooled test's line; empty without a topology
};

// The suspect switches of `topology` over `jobs` (distinct jobs), given the node ranking of the
// same jobs, by the rules above; the node suspects under them are folded in.
SwitchRanking rank_switches(const std::vector<JobOutcome>& jobs, const SuspectRanking& nodes,
                            const SwitchTopology& topology, const SuspectPolicy& test,
                            const SwitchPolicy& policy);

}  // namespace triage::agent
