// Draining in two writes against a slurmctld that does what 22.05's update_node does (a reason in
// an update replaces the node's reason, its author and its time, drained or not; DRAIN without a
// reason keeps them), with an admin's `scontrol update State=DRAIN Reason=...` arriving at each
// point in between; and on an idle node that kept an old reason, as 23.11 and later leave one
// without accounting storage.
#include "agent/slurm/drain_steps.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace triage::agent {
namespace {

const std::string kOurs = "triage: GPU 0000:c1:00.0 fell off the bus (Xid 79) [boot 3f2a9c1b]";
const std::string kAdmin = "bad DIMM, ticket 4411";
constexpr uint32_t kAdminUid = 1000;
constexpr int64_t kWeek = int64_t{7} * 24 * 3600;

// One node as slurmctld keeps it, and an admin who acts when the agent has taken `admin_after`
// steps (reads and writes alike; -1: never).
struct Ctld {
  SlurmNodeState node{"gpu-a017", "IDLE", false, false, "", 0, "gpu-a017"};
  int steps = 0;
  int admin_after = -1;
  int64_t clock = 1700000000;  // slurmctld's seconds: every write with a reason is a second later

  void step() {
    if (steps++ == admin_after) admin_drains();
  }
  void admin_drains() {
    node.drain = true;
    node.state = "IDLE+DRAIN";
    node.reason = kAdmin;
    node.reason_uid = kAdminUid;
    node.reason_time = ++clock;
  }
  DrainSteps drain_steps() {
    DrainSteps s;
    s.read = [this](std::string&) {
      step();
      return std::optional<SlurmNodeState>(node);
    };
    s.drain_keeping_reason = [this](std::string&) {
      step();
      node.drain = true;
      node.state = "IDLE+DRAIN";
      return true;
    };
    s.set_reason = [this](const std::string& reason, std::string&) {
      step();
      node.reason = reason;
      node.reason_uid = 0;
      node.reason_time = ++clock;
      return true;
    };
    return s;
  }
};

TEST(DrainSteps, AnIdleNodeIsDrainedWithOurReasonAndReadBackAsOurs) {
  Ctld c;
  std::string error;
  EXPECT_TRUE(drain_in_steps(c.drain_steps(), kOurs, error)) << error;
  EXPECT_TRUE(c.node.drain);
  EXPECT_EQ(c.node.reason, kOurs);
  EXPECT_TRUE(drain_in_steps(c.drain_steps(), kOurs, error)) << "already ours: nothing to add";
}

TEST(DrainSteps, AnAdminsDrainBetweenOurCheckAndOurDrainKeepsItsReasonAndIsNotOurs) {
  Ctld c;
  c.admin_after = 1;  // after our first read, before our DRAIN
  std::string error;
  EXPECT_FALSE(drain_in_steps(c.drain_steps(), kOurs, error));
  EXPECT_EQ(c.node.reason, kAdmin) << "never replaced";
  EXPECT_NE(error.find("drained by someone else meanwhile"), std::string::npos) << error;
}

// Slurm 23.11 and later, without accounting storage, leave the reason of a drain that was lifted on
// the idle node; the admin drains it again for the same reason, in the same words, between our
// check and our drain. Only its new time tells the two apart.
TEST(DrainSteps, AnAdminsDrainRepeatingTheReasonLeftOnTheIdleNodeIsStillTheirs) {
  Ctld c;
  c.node.reason = kAdmin;  // from last week's drain, lifted since
  c.node.reason_uid = kAdminUid;
  c.node.reason_time = c.clock - kWeek;
  c.admin_after = 1;
  std::string error;
  EXPECT_FALSE(drain_in_steps(c.drain_steps(), kOurs, error));
  EXPECT_EQ(c.node.reason, kAdmin) << "never replaced";
  EXPECT_NE(error.find("drained by someone else meanwhile"), std::string::npos) << error;
}

TEST(DrainSteps, AnIdleNodeCarryingAnOldReasonIsDrainedWithOurs) {
  Ctld c;
  c.node.reason = kAdmin;
  c.node.reason_uid = kAdminUid;
  c.node.reason_time = c.clock - kWeek;
  std::string error;
  EXPECT_TRUE(drain_in_steps(c.drain_steps(), kOurs, error)) << error;
  EXPECT_EQ(c.node.reason, kOurs);
}

TEST(DrainSteps, AnAdminsDrainRightAfterOursIsTheirsAndSaidSo) {
  Ctld c;
  c.admin_after = 4;  // after our reason, before we read it back
  std::string error;
  EXPECT_FALSE(drain_in_steps(c.drain_steps(), kOurs, error));
  EXPECT_EQ(c.node.reason, kAdmin);
  EXPECT_NE(error.find("not ours"), std::string::npos) << error;
}

TEST(DrainSteps, ADrainOrDownSomebodyElseMadeIsNeverTouched) {
  Ctld c;
  c.admin_drains();
  std::string error;
  EXPECT_FALSE(drain_in_steps(c.drain_steps(), kOurs, error));
  EXPECT_EQ(c.node.reason, kAdmin);
  EXPECT_EQ(c.steps, 1) << "one read, no write";
  Ctld down;
  down.node.down = true;
  down.node.state = "DOWN";
  EXPECT_FALSE(drain_in_steps(down.drain_steps(), kOurs, error));
  EXPECT_FALSE(down.node.drain);
}

TEST(DrainSteps, ANodeResumedRightAfterOurDrainGetsNoReasonFromUs) {
  Ctld c;
  DrainSteps s = c.drain_steps();
  auto drain = s.drain_keeping_reason;
  s.drain_keeping_reason = [&, drain](std::string& e) {
    const bool ok = drain(e);
    c.node.drain = false;  // an admin's RESUME lands at once
    c.node.state = "IDLE";
    return ok;
  };
  std::string error;
  EXPECT_FALSE(drain_in_steps(s, kOurs, error));
  EXPECT_EQ(c.node.reason, "");
}

}  // namespace
}  // namespace triage::agent

// The preflight refused a job here: its prolog fails and slurmctld drains the node "Prolog error"
// (unless it is drained already); the agent's reason ends up on the drain whichever comes first,
// and never on somebody else's.
namespace triage::agent {
namespace {

const std::string kPreflight = "triage preflight: drain recommended: GPU 0 fell off the bus";

TEST(LabelPreflightDrain, AnUndrainedNodeIsDrainedWithTheReason) {
  Ctld ctld;
  std::string error;
  ASSERT_TRUE(label_preflight_drain(ctld.drain_steps(), kPreflight, error)) << error;
  EXPECT_TRUE(ctld.node.drain);
  EXPECT_EQ(ctld.node.reason, kPreflight);
}

TEST(LabelPreflightDrain, SlurmsPrologErrorDrainGetsTheReason) {
  Ctld ctld;
  ctld.node.drain = true;
  ctld.node.state = "IDLE+DRAIN";
  ctld.node.reason = kSlurmPrologErrorReason;
  std::string error;
  ASSERT_TRUE(label_preflight_drain(ctld.drain_steps(), kPreflight, error)) << error;
  EXPECT_EQ(ctld.node.reason, kPreflight);
}

TEST(LabelPreflightDrain, SlurmsDrainLandingBetweenOurWritesStillGetsTheReason) {
  Ctld ctld;
  std::string error;
  DrainSteps steps = ctld.drain_steps();
  // slurmctld handles the failed prolog right after our DRAIN: "Prolog error", by SlurmUser.
  auto drain = steps.drain_keeping_reason;
  steps.drain_keeping_reason = [&ctld, drain](std::string& e) {
    const bool ok = drain(e);
    ctld.node.reason = kSlurmPrologErrorReason;
    ctld.node.reason_uid = 64030;
    ctld.node.reason_time = ++ctld.clock;
    return ok;
  };
  ASSERT_TRUE(label_preflight_drain(steps, kPreflight, error)) << error;
  EXPECT_EQ(ctld.node.reason, kPreflight);
}

TEST(LabelPreflightDrain, AnAdminsDrainIsNeverRelabelled) {
  Ctld ctld;
  ctld.admin_drains();
  std::string error;
  EXPECT_FALSE(label_preflight_drain(ctld.drain_steps(), kPreflight, error));
  EXPECT_EQ(ctld.node.reason, kAdmin);
  EXPECT_NE(error.find("not overriding"), std::string::npos) << error;
}

TEST(LabelPreflightDrain, AnAdminsDrainMadeMeanwhileIsTheirs) {
  Ctld ctld;
  ctld.admin_after = 1;  // after our first read, before our DRAIN
  std::string error;
  EXPECT_FALSE(label_preflight_drain(ctld.drain_steps(), kPreflight, error));
  EXPECT_EQ(ctld.node.reason, kAdmin);
}

}  // namespace
}  // namespace triage::agent
