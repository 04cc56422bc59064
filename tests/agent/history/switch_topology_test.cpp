// `scontrol show topology` as Slurm 22.05 and 24.11 print it (topology/tree), what other plugins
// print, and what must be refused with the line and field named.
#include "agent/history/switch_topology.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace triage::agent {
namespace {

// A two-level tree, as Slurm 22.05.8's scontrol printed it for the dev cluster's topology.conf
// (scripts/slurm-cluster --topology): slurmctld computes the levels, keeps a leaf's Nodes= as
// written, and gives the spine every node below it, compressed.
constexpr const char* kTwoLeaves =
    "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=gpu01,gpu02\n"
    "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=gpu03,gpu04\n"
    "SwitchName=spine Level=1 LinkSpeed=1 Nodes=gpu[01-04] Switches=leaf1,leaf2\n";

TEST(SwitchTopology, EachNodeHangsOffItsLeaf) {
  const SwitchTopology t = parse_topology(kTwoLeaves, "scontrol show topology");
  EXPECT_EQ(t.leaf_of.at("gpu01"), "leaf1");
  EXPECT_EQ(t.leaf_of.at("gpu02"), "leaf1");
  EXPECT_EQ(t.leaf_of.at("gpu03"), "leaf2");
  EXPECT_EQ(t.leaf_of.at("gpu04"), "leaf2");
  EXPECT_EQ(t.leaf_of.size(), 4u) << "the spine's nodes hang off the leaves below it";
  EXPECT_EQ(t.leaves.at("leaf1"), (std::vector<std::string>{"gpu01", "gpu02"}));
  EXPECT_EQ(t.leaves.count("spine"), 0u);
}

TEST(SwitchTopology, ASwitchWithNodesAndSwitchesAndTheLowestLevelWins) {
  // topology.conf lets a switch list both; a node named by two switches hangs off the lower one.
  const SwitchTopology t = parse_topology(
      "SwitchName=top Level=1 LinkSpeed=100 Nodes=head Switches=edge\n"
      "SwitchName=edge Level=0 LinkSpeed=100 Nodes=head,c[1-3]\n",
      "scontrol show topology");
  EXPECT_EQ(t.leaf_of.at("head"), "edge");
  EXPECT_EQ(t.leaves.at("edge"), (std::vector<std::string>{"head", "c1", "c2", "c3"}));
  EXPECT_EQ(t.leaves.count("top"), 0u);
}

TEST(SwitchTopology, NoTopologyOrAnotherPluginsShapeIsEmpty) {
  EXPECT_TRUE(parse_topology("", "scontrol show topology").empty())
      << "topology/none or flat print nothing on stdout";
  // topology/block (24.11) prints blocks, which are not switches.
  EXPECT_TRUE(
      parse_topology("BlockName=b1 BlockIndex=0 Nodes=n[1-4] BlockSize=4\n", "scontrol").empty());
  EXPECT_TRUE(parse_topology("\n\n", "scontrol").empty());
}

TEST(SwitchTopology, GarbageIsRefusedWithTheLineAndField) {
  const auto refused = [](const char* text) {
    try {
      (void)parse_topology(text, "scontrol show topology");
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(refused("SwitchName=s1 Level=x LinkSpeed=1 Nodes=n1\n").find(":1: Level: 'x'"),
            std::string::npos)
      << refused("SwitchName=s1 Level=x LinkSpeed=1 Nodes=n1\n");
  EXPECT_NE(refused("SwitchName=s1 LinkSpeed=1 Nodes=n1\n").find("Level: missing"),
            std::string::npos);
  EXPECT_NE(refused("SwitchName=s1 Level=0 Nodes=n1\nSwitchName=s1 Level=0 Nodes=n2\n")
                .find(":2: SwitchName: s1 named twice"),
            std::string::npos);
  EXPECT_NE(refused("SwitchName=s1 Level=0 Nodes=n[3-\n").find(":1: Nodes: "), std::string::npos)
      << refused("SwitchName=s1 Level=0 Nodes=n[3-\n");
  EXPECT_NE(refused("SwitchName= Level=0\n").find("SwitchName: empty"), std::string::npos);
}

TEST(SwitchTopology, TheCommandIsScontrolShowTopology) {
  EXPECT_EQ(topology_argv(), (std::vector<std::string>{"scontrol", "show", "topology"}));
}

}  // namespace
}  // namespace triage::agent
