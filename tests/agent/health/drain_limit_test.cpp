// The partition limit as plain values: what sinfo prints, which nodes count as taken by triage,
// and when one more node may be drained or rebooted.
#include "agent/health/drain_limit.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

std::vector<PartitionNode> four_nodes(int taken_by_triage) {
  std::vector<PartitionNode> v;
  for (int i = 1; i <= 4; ++i) {
    PartitionNode n{"gpu", "node" + std::to_string(i), "idle", "none"};
    if (i <= taken_by_triage) {
      n.state = "drained";
      n.reason = "triage: Xid 79 on GPU 0000:3b:00 [boot 3f2a9c1b]";
    }
    v.push_back(n);
  }
  return v;
}

TEST(PartitionNodes, SinfoLinesParseAndAReasonMayHoldTheSeparator) {
  std::string error;
  const auto nodes = parse_partition_nodes(
      "gpu|node1|idle|none\ngpu|node2|DRAINED|triage: a|b [boot 1]\n\n", error);
  ASSERT_TRUE(nodes) << error;
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[1].state, "drained");
  EXPECT_EQ((*nodes)[1].reason, "triage: a|b [boot 1]");
}

TEST(PartitionNodes, ALineWithoutTheFourFieldsIsAnErrorNamingIt) {
  std::string error;
  EXPECT_FALSE(parse_partition_nodes("gpu|node1|idle|none\nsinfo: error: timeout\n", error));
  EXPECT_EQ(error, "sinfo line 2: expected partition|node|state|reason");
}

TEST(TakenByTriage, OutOfServiceWithOurReasonOnly) {
  EXPECT_TRUE(taken_by_triage({"p", "n", "draining", "triage: x"}));
  EXPECT_TRUE(taken_by_triage({"p", "n", "down", "triage: needs hands: x"}));
  EXPECT_TRUE(taken_by_triage({"p", "n", "reboot_issued", "triage: reboot: x"}));
  EXPECT_TRUE(taken_by_triage({"p", "n", "drained", "triage preflight: port down"}));
  EXPECT_FALSE(taken_by_triage({"p", "n", "drained", "replace fan 3"})) << "an admin's";
  EXPECT_FALSE(taken_by_triage({"p", "n", "idle", "triage: reboot: x : reboot complete"}))
      << "a reason kept after a resume (Slurm 23.11+)";
}

TEST(PartitionLimit, AShareRoundedDownAtLeastOneAndCapped) {
  EXPECT_EQ(partition_limit(4, {0.10, 0}), 1);
  EXPECT_EQ(partition_limit(4, {0.50, 0}), 2);
  EXPECT_EQ(partition_limit(100, {0.10, 0}), 10);
  EXPECT_EQ(partition_limit(100, {0.10, 4}), 4);
  EXPECT_EQ(partition_limit(10, {0.30, 0}), 3) << "0.3 x 10 is 3, not 2.9999";
}

TEST(DrainLimit, HalfOfAFourNodePartitionStopsTheThirdDrain) {
  const DrainLimits half{0.50, 0};
  EXPECT_TRUE(decide_drain_limit(four_nodes(0), "node3", half).allowed);
  EXPECT_TRUE(decide_drain_limit(four_nodes(1), "node3", half).allowed);
  const LimitDecision third = decide_drain_limit(four_nodes(2), "node3", half);
  EXPECT_FALSE(third.allowed);
  EXPECT_EQ(third.why, "partition gpu has 2 of 4 nodes out by triage, limit 2");
}

TEST(DrainLimit, TheNodeItselfIsNotCountedTwice) {
  EXPECT_TRUE(decide_drain_limit(four_nodes(2), "node2", {0.50, 0}).allowed);
}

TEST(DrainLimit, EveryPartitionOfTheNodeMustHaveRoom) {
  std::vector<PartitionNode> v = four_nodes(0);
  v.push_back({"small", "node3", "idle", "none"});
  v.push_back({"small", "node4", "drained", "triage: x [boot 1]"});
  const LimitDecision d = decide_drain_limit(v, "node3", {0.50, 0});
  EXPECT_FALSE(d.allowed);
  EXPECT_EQ(d.why, "partition small has 1 of 2 nodes out by triage, limit 1");
}

TEST(DrainLimit, ANodeInNoPartitionIsRefused) {
  EXPECT_FALSE(decide_drain_limit(four_nodes(0), "node9", {0.50, 0}).allowed);
}

}  // namespace
}  // namespace triage::agent
