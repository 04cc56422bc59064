// Suspect switches: failures that cluster under one leaf name the leaf, failures on one node name
// the node, and without a topology nothing changes.
#include "agent/history/suspect_switches.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

// 16 nodes n01..n16 under four leaves of four (leaf1 = n01-n04, ...).
SwitchTopology four_leaves() {
  return parse_topology(
      "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=n[01-04]\n"
      "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[05-08]\n"
      "SwitchName=leaf3 Level=0 LinkSpeed=1 Nodes=n[09-12]\n"
      "SwitchName=leaf4 Level=0 LinkSpeed=1 Nodes=n[13-16]\n"
      "SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-4]\n",
      "test");
}

std::string node(uint64_t i) {
  const uint64_t n = i % 16 + 1;
  return (n < 10 ? "n0" : "n") + std::to_string(n);
}

// A busy, healthy cluster: 640 completed two-node jobs over every pair of nodes.
std::vector<JobOutcome> healthy_history() {
  std::vector<JobOutcome> jobs;
  for (uint64_t i = 1; i <= 640; ++i) {
    JobOutcome j;
    j.job_id = i;
    j.end_time = static_cast<int64_t>(i);
    j.status = "completed";
    j.nodes = {node(i), node(i + 1 + i / 16 % 15)};
    jobs.push_back(std::move(j));
  }
  return jobs;
}

// A failed two-node job with platform blame that `culprit`'s own agent pinned on it.
void add_failure(std::vector<JobOutcome>& jobs, const std::string& culprit,
                 const std::string& other) {
  JobOutcome j;
  j.job_id = 10000 + jobs.size();
  j.end_time = static_cast<int64_t>(j.job_id);
  j.status = "failed";
  j.cls = "nccl-timeout";
  j.blame = "platform";
  j.nodes = {culprit, other};
  j.implicated.push_back({culprit, "mlx5_core link down in its kernel log", true});
  jobs.push_back(std::move(j));
}

SwitchRanking rank(const std::vector<JobOutcome>& jobs, const SwitchTopology& topology) {
  return rank_switches(jobs, rank_suspects(jobs, {}), topology, {}, {});
}

TEST(RankSwitches, TwoSuspectNodesUnderOneLeafNameTheLeafNotTheNodes) {
  auto jobs = healthy_history();
  for (int i = 0; i < 7; ++i) {
    add_failure(jobs, "n01", "n09");
    add_failure(jobs, "n02", "n13");
  }
  ASSERT_EQ(rank_suspects(jobs, {}).suspects.size(), 2u)
      << "both are lemons on their own (7 failures each)";
  const SwitchRanking r = rank(jobs, four_leaves());
  ASSERT_EQ(r.switches.size(), 1u);
  const SuspectSwitch& s = r.switches[0];
  EXPECT_EQ(s.name, "leaf1");
  EXPECT_EQ(s.nodes, (std::vector<std::string>{"n01", "n02", "n03", "n04"}));
  ASSERT_EQ(s.suspect_nodes.size(), 2u);
  EXPECT_TRUE(r.nodes.empty()) << "the switch is named, not each of its nodes";
  EXPECT_NE(s.reasons[0].find("leaf switch of n[01-04]: 2 of its 4 nodes are suspects (n[01-02])"),
            std::string::npos)
      << s.reasons[0];
  EXPECT_NE(s.reasons[1].find("check them before draining its nodes"), std::string::npos);
  EXPECT_EQ(r.switches_tested, 4u);
}

TEST(RankSwitches, FailuresSpreadThinOverALeafNameItThoughNoNodeIsASuspect) {
  auto jobs = healthy_history();
  for (const char* culprit : {"n05", "n06", "n07", "n08"}) {
    add_failure(jobs, culprit, "n01");
    add_failure(jobs, culprit, "n13");
  }
  EXPECT_TRUE(rank_suspects(jobs, {}).suspects.empty()) << "two failures each, fewer than 3";
  const SwitchRanking r = rank(jobs, four_leaves());
  ASSERT_EQ(r.switches.size(), 1u);
  EXPECT_EQ(r.switches[0].name, "leaf2");
  ASSERT_TRUE(r.switches[0].pooled.has_value());
  EXPECT_EQ(r.switches[0].pooled->failures, 8u);
  EXPECT_EQ(r.switches[0].pooled->failing_nodes.size(), 4u);
  EXPECT_NE(r.switches[0].reasons[0].find("trusted on a node under it (n[05-08])"),
            std::string::npos)
      << r.switches[0].reasons[0];
  EXPECT_NE(r.test.find("Bonferroni over the switches tested"), std::string::npos) << r.test;
}

TEST(RankSwitches, FailuresAllOnOneNodeNameTheNodeNotItsLeaf) {
  auto jobs = healthy_history();
  for (int i = 0; i < 8; ++i)
    add_failure(jobs, "n03", i % 2 == 0 ? "n09" : "n14");
  const SwitchRanking r = rank(jobs, four_leaves());
  EXPECT_TRUE(r.switches.empty()) << r.switches.front().reasons[0];
  ASSERT_EQ(r.nodes.size(), 1u);
  EXPECT_EQ(r.nodes[0].node, "n03");
}

TEST(RankSwitches, TwoSuspectsUnderDifferentLeavesStayNodes) {
  auto jobs = healthy_history();
  for (int i = 0; i < 7; ++i) {
    add_failure(jobs, "n01", "n09");
    add_failure(jobs, "n05", "n13");
  }
  const SwitchRanking r = rank(jobs, four_leaves());
  EXPECT_TRUE(r.switches.empty());
  EXPECT_EQ(r.nodes.size(), 2u);
}

TEST(RankSwitches, WithoutATopologyTheNodeRankingIsUnchanged) {
  auto jobs = healthy_history();
  for (int i = 0; i < 7; ++i) {
    add_failure(jobs, "n01", "n09");
    add_failure(jobs, "n02", "n13");
  }
  const SwitchRanking r = rank(jobs, SwitchTopology{});
  EXPECT_TRUE(r.switches.empty());
  EXPECT_EQ(r.nodes.size(), 2u);
  EXPECT_EQ(r.switches_tested, 0u);
  EXPECT_TRUE(r.test.empty());
}

TEST(RankSwitches, NodesOutsideTheTopologyAreLeftAlone) {
  auto jobs = healthy_history();
  for (int i = 0; i < 7; ++i) {
    add_failure(jobs, "n01", "n09");
    add_failure(jobs, "n02", "n13");
  }
  // Only leaf2 is known: n01 and n02 hang off nothing Slurm knows of.
  const SwitchRanking r =
      rank(jobs, parse_topology("SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=n[05-08]\n", "test"));
  EXPECT_TRUE(r.switches.empty());
  EXPECT_EQ(r.nodes.size(), 2u);
}

}  // namespace
}  // namespace triage::agent
