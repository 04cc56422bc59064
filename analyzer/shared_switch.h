// Whether the nodes a network failure implicates all hang off one leaf switch (issue 27, part 5):
// then the switch, not each node, is the first suspect, and the report says so in one sentence.
// Each node's leaf switch comes with the agent's evidence (NodeEvidence::leaf_switch, from Slurm's
// topology); without a topology nothing is said.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "common/model.h"

namespace triage {

struct SharedSwitch {
  std::string leaf_switch;
  std::vector<std::string> nodes;  // the implicated nodes, in the evidence's order
  // True when the evidence singled the nodes out (a verdict or a kernel event against them);
  // false when nothing did and every node of the job counts.
  bool singled_out = false;
};

// Contract: true when `c` is a network failure class: the rules give it the network-health
// playbook (the NCCL/RCCL collective failures).
bool network_class(const SignatureClass& c);

// Contract: for a network failure (`network_failure`), the leaf switch that every implicated node
// hangs off, when there are two or more of them and each one's switch is known; nothing otherwise.
// Implicated: the nodes whose verdict is degraded or drain-recommended or that saw a kernel event
// of warning severity or worse during the job; when no node is, every node of the evidence.
std::optional<SharedSwitch> shared_leaf_switch(const Evidence& evidence, bool network_failure);

// Contract: the one sentence the report says: "all 3 implicated nodes (n[1-3]) hang off leaf
// switch s1" (or "all 2 nodes of the job (...)" when nothing singled them out).
std::string shared_switch_sentence(const SharedSwitch& s);

}  // namespace triage
