#include "analyzer/shared_switch.h"

#include <algorithm>

#include "common/hostlist.h"

namespace triage {

namespace {

bool singled_out(const NodeEvidence& n) {
  if (n.verdict && (n.verdict->verdict == "degraded" || n.verdict->verdict == "drain-recommended"))
    return true;
  return std::any_of(n.events.begin(), n.events.end(), [](const KernelEvent& e) {
    return e.severity == Severity::kWarning || e.severity == Severity::kError ||
           e.severity == Severity::kCritical;
  });
}

}  // namespace

bool network_class(const SignatureClass& c) {
  return std::any_of(c.playbooks.begin(), c.playbooks.end(),
                     [](const auto& p) { return p.value == "network-health"; });
}

std::optional<SharedSwitch> shared_leaf_switch(const Evidence& evidence, bool network_failure) {
  if (!network_failure) return std::nullopt;
  std::vector<const NodeEvidence*> implicated;
  for (const NodeEvidence& n : evidence.nodes) {
    if (singled_out(n)) implicated.push_back(&n);
  }
  SharedSwitch s;
  s.singled_out = !implicated.empty();
  if (implicated.empty()) {
    for (const NodeEvidence& n : evidence.nodes)
      implicated.push_back(&n);
  }
  if (implicated.size() < 2) return std::nullopt;
  s.leaf_switch = implicated.front()->leaf_switch;
  for (const NodeEvidence* n : implicated) {
    // One node of unknown place, or under another switch, and the switch is not the common factor.
    if (n->leaf_switch.empty() || n->leaf_switch != s.leaf_switch) return std::nullopt;
    s.nodes.push_back(n->host);
  }
  return s;
}

std::string shared_switch_sentence(const SharedSwitch& s) {
  return "all " + std::to_string(s.nodes.size()) +
         (s.singled_out ? " implicated nodes (" : " nodes of the job (") +
         compress_hostlist(s.nodes) + ") hang off leaf switch " + s.leaf_switch;
}

}  // namespace triage
