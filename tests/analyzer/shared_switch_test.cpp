// The report of a network failure says when every implicated node hangs off one leaf switch.
#include "analyzer/shared_switch.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

NodeEvidence node(const std::string& host, const std::string& leaf) {
  NodeEvidence n;
  n.host = host;
  n.leaf_switch = leaf;
  return n;
}

NodeEvidence with_port_down(NodeEvidence n) {
  KernelEvent e;
  e.kind = "ib-port-down";
  e.severity = Severity::kError;
  e.host = n.host;
  n.events.push_back(e);
  return n;
}

TEST(SharedSwitch, ThreeNodesOfANetworkFailureUnderOneLeafAreNamedTogether) {
  Evidence ev;
  ev.nodes = {node("gpu-a017", "s1"), node("gpu-a018", "s1"), node("gpu-a019", "s1")};
  const auto s = shared_leaf_switch(ev, true);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->leaf_switch, "s1");
  EXPECT_FALSE(s->singled_out);
  EXPECT_EQ(shared_switch_sentence(*s),
            "all 3 nodes of the job (gpu-a[017-019]) hang off leaf switch s1");
}

TEST(SharedSwitch, TheNodesTheEvidenceSinglesOutAreTheOnesCounted) {
  Evidence ev;
  // Two nodes with a port down under s1; the third, healthy, under s2, is not implicated.
  ev.nodes = {with_port_down(node("n1", "s1")), node("n2", "s2"), with_port_down(node("n3", "s1"))};
  NodeVerdict healthy;
  healthy.verdict = "healthy";
  ev.nodes[1].verdict = healthy;
  const auto s = shared_leaf_switch(ev, true);
  ASSERT_TRUE(s);
  EXPECT_TRUE(s->singled_out);
  EXPECT_EQ(s->nodes, (std::vector<std::string>{"n1", "n3"}));
  EXPECT_EQ(shared_switch_sentence(*s), "all 2 implicated nodes (n[1,3]) hang off leaf switch s1");
}

TEST(SharedSwitch, NodesUnderTwoSwitchesOrOfUnknownPlaceShareNothing) {
  Evidence split;
  split.nodes = {node("n1", "s1"), node("n2", "s2")};
  EXPECT_FALSE(shared_leaf_switch(split, true));
  Evidence unknown;
  unknown.nodes = {node("n1", "s1"), node("n2", "")};
  EXPECT_FALSE(shared_leaf_switch(unknown, true));
  Evidence none;
  none.nodes = {node("n1", ""), node("n2", "")};
  EXPECT_FALSE(shared_leaf_switch(none, true));
}

TEST(SharedSwitch, OneNodeOrAFailureThatIsNotTheNetworksSaysNothing) {
  Evidence one;
  one.nodes = {node("n1", "s1")};
  EXPECT_FALSE(shared_leaf_switch(one, true));
  // A single implicated node among several: one node is not a switch's pattern.
  Evidence single;
  single.nodes = {with_port_down(node("n1", "s1")), node("n2", "s1")};
  EXPECT_FALSE(shared_leaf_switch(single, true));
  Evidence both;
  both.nodes = {node("n1", "s1"), node("n2", "s1")};
  EXPECT_FALSE(shared_leaf_switch(both, false));
}

TEST(SharedSwitch, TheShippedRulesMakeNcclCollectiveFailuresNetworkFailuresAndOomNot) {
  const SignatureCatalog& cat = test::shipped_catalog();
  const SignatureClass* nccl = cat.find("nccl-timeout");
  ASSERT_NE(nccl, nullptr);
  EXPECT_TRUE(network_class(*nccl));
  const SignatureClass* oom = cat.find("oom-host");
  ASSERT_NE(oom, nullptr);
  EXPECT_FALSE(network_class(*oom));
}

}  // namespace
}  // namespace triage
