#include "agent/history/suspect_switches.h"

#include <algorithm>
#include <map>

#include "common/hostlist.h"

namespace triage::agent {

namespace {

std::string node_names(const std::vector<SuspectNode>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (const SuspectNode& n : nodes)
    names.push_back(n.node);
  return compress_hostlist(names);
}

std::vector<std::string> switch_reasons(const SuspectSwitch& s) {
  std::vector<std::string> out;
  std::string head = "leaf switch of " + compress_hostlist(s.nodes) + ": ";
  if (!s.suspect_nodes.empty()) {
    head += std::to_string(s.suspect_nodes.size()) + " of its " + std::to_string(s.nodes.size()) +
            " nodes are suspects (" + node_names(s.suspect_nodes) + ")";
  }
  if (s.pooled) {
    if (!s.suspect_nodes.empty()) head += "; ";
    head += s.pooled->reasons.front();
  }
  out.push_back(std::move(head));
  out.push_back(
      "failures that cluster under one leaf point at the switch, its cables or its uplinks: "
      "check them before draining its nodes");
  for (const SuspectNode& n : s.suspect_nodes)
    out.push_back(n.node + ": " + n.reasons.front());
  return out;
}

}  // namespace

SwitchRanking rank_switches(const std::vector<JobOutcome>& jobs, const SuspectRanking& nodes,
                            const SwitchTopology& topology, const SuspectPolicy& test,
                            const SwitchPolicy& policy) {
  SwitchRanking out;
  if (topology.empty()) {
    out.nodes = nodes.suspects;
    return out;
  }
  const SuspectRanking pooled = rank_node_groups(jobs, test, topology.leaf_of, "switch");
  out.switches_tested = pooled.nodes_tested;
  out.test = pooled.test;
  std::map<std::string, SuspectSwitch> found;
  for (const SuspectNode& n : nodes.suspects) {
    const auto leaf = topology.leaf_of.find(n.node);
    if (leaf == topology.leaf_of.end()) continue;
    found[leaf->second].suspect_nodes.push_back(n);
  }
  for (auto it = found.begin(); it != found.end();) {
    it = it->second.suspect_nodes.size() < policy.min_suspect_nodes ? found.erase(it)
                                                                    : std::next(it);
  }
  for (const SuspectNode& g : pooled.suspects) {
    if (g.failing_nodes.size() < policy.min_failing_nodes) continue;
    found[g.node].pooled = g;
  }
  for (auto& [name, s] : found) {
    s.name = name;
    s.nodes = topology.leaves.at(name);
    if (s.suspect_nodes.empty()) {
      // A pooled find may still have suspect nodes under it, fewer than min_suspect_nodes.
      for (const SuspectNode& n : nodes.suspects) {
        if (std::find(s.nodes.begin(), s.nodes.end(), n.node) != s.nodes.end())
          s.suspect_nodes.push_back(n);
      }
    }
    s.p_value = s.pooled ? s.pooled->p_value : 1;
    for (const SuspectNode& n : s.suspect_nodes)
      s.p_value = std::min(s.p_value, n.p_value);
    s.reasons = switch_reasons(s);
    out.switches.push_back(std::move(s));
  }
  std::sort(out.switches.begin(), out.switches.end(), [](const auto& a, const auto& b) {
    return a.p_value != b.p_value ? a.p_value < b.p_value : a.name < b.name;
  });
  for (const SuspectNode& n : nodes.suspects) {
    const bool folded = std::any_of(out.switches.begin(), out.switches.end(), [&](const auto& s) {
      return std::any_of(s.suspect_nodes.begin(), s.suspect_nodes.end(),
                         [&](const SuspectNode& m) { return m.node == n.node; });
    });
    if (!folded) out.nodes.push_back(n);
  }
  return out;
}

}  // namespace triage::agent
