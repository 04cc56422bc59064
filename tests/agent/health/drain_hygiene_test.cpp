// Drain hygiene as plain values: whose drain a node carries, the boot tag of our own drains, and
// when the agent lifts a drain it set (after a reboot, healthy again, and only while still ours).
#include "agent/health/drain_hygiene.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

constexpr const char* kOldBoot = "3f2a9c1b5e6d4c7a8b9c0d1e2f3a4b5c";
constexpr const char* kNewBoot = "77aa0c1b5e6d4c7a8b9c0d1e2f3a4b5c";

SlurmNodeState drained(const std::string& reason) {
  SlurmNodeState n;
  n.name = "gpu-a017";
  n.state = "DRAINED";
  n.drain = true;
  n.reason = reason;
  return n;
}

std::string our_reason(const std::string& boot) {
  return "triage: " + tagged_drain_why("GPU 0000:c1:00.0 fell off the bus (Xid 79)", boot);
}

// A node we drained on the old boot that came back healthy on the new one.
LiftInputs rebooted_and_healthy() {
  LiftInputs in;
  in.policy = "auto";
  in.node = drained(our_reason(kOldBoot));
  in.boot_id = kNewBoot;
  in.health_fresh = true;
  in.verdict = "healthy";
  return in;
}

TEST(DrainOwner, NoDrainIsNobodysOurPrefixIsOursAnythingElseIsTheAdmins) {
  SlurmNodeState idle;
  idle.state = "IDLE";
  EXPECT_EQ(drain_owner(idle), DrainOwner::kNone);
  EXPECT_EQ(drain_owner(drained(our_reason(kOldBoot))), DrainOwner::kOurs);
  EXPECT_EQ(drain_owner(drained("triage: before boot tags")), DrainOwner::kOurs);
  EXPECT_EQ(drain_owner(drained("bios upgrade")), DrainOwner::kAdmin);
  EXPECT_EQ(drain_owner(drained("triage:no space, typed by hand")), DrainOwner::kAdmin)
      << "the prefix is exact";
  EXPECT_EQ(drain_owner(drained("")), DrainOwner::kAdmin);
  SlurmNodeState down = idle;
  down.down = true;
  down.reason = "Not responding";
  EXPECT_EQ(drain_owner(down), DrainOwner::kNone) << "down is not a drain";
  EXPECT_STREQ(drain_owner_name(DrainOwner::kAdmin), "admin");
  EXPECT_STREQ(drain_owner_name(DrainOwner::kUnknown), "unknown");
}

TEST(DrainReasonBoot, OurReasonCarriesTheBootItWasSetOn) {
  EXPECT_EQ(our_reason(kOldBoot),
            "triage: GPU 0000:c1:00.0 fell off the bus (Xid 79) [boot 3f2a9c1b]");
  EXPECT_EQ(drain_reason_boot(our_reason(kOldBoot)), "3f2a9c1b");
  EXPECT_EQ(drain_reason_boot("triage: x [boot boot-a]"), "boot-a") << "test boot ids";
  EXPECT_EQ(drain_reason_boot("triage: before boot tags"), std::nullopt);
  EXPECT_EQ(drain_reason_boot("maint [boot 3f2a9c1b]"), std::nullopt) << "not ours";
  EXPECT_EQ(drain_reason_boot("triage: x [boot ]"), std::nullopt);
  EXPECT_EQ(drain_reason_boot("triage: x [boot 3f2a9c1b] edited"), std::nullopt);
  EXPECT_EQ(drain_reason_boot("triage: x [boot 3f2a 9c1b]"), std::nullopt);
  EXPECT_EQ(drain_reason_boot("triage: x [boot 3f2a9c1b5e]"), std::nullopt) << "too long";
}

TEST(DrainLift, OurDrainIsLiftedAfterARebootOnceTheNodeIsHealthy) {
  const LiftDecision d = decide_drain_lift(rebooted_and_healthy());
  EXPECT_TRUE(d.lift) << d.why;
  EXPECT_NE(d.why.find("3f2a9c1b"), std::string::npos) << d.why;
}

TEST(DrainLift, AnAdminsDrainIsNeverLifted) {
  LiftInputs in = rebooted_and_healthy();
  in.node = drained("replace fan 3 [boot 3f2a9c1b]");
  const LiftDecision d = decide_drain_lift(in);
  EXPECT_FALSE(d.lift);
  EXPECT_NE(d.why.find("not ours"), std::string::npos) << d.why;
}

TEST(DrainLift, AReasonAnAdminEditedAfterOursIsTheirs) {
  LiftInputs in = rebooted_and_healthy();
  in.node = drained(our_reason(kOldBoot) + " -- keep drained, ticket 4411");
  EXPECT_FALSE(decide_drain_lift(in).lift);
}

TEST(DrainLift, NoRebootNoLift) {
  LiftInputs in = rebooted_and_healthy();
  in.boot_id = kOldBoot;
  const LiftDecision d = decide_drain_lift(in);
  EXPECT_FALSE(d.lift);
  EXPECT_NE(d.why.find("not rebooted"), std::string::npos) << d.why;
}

TEST(DrainLift, ADrainWithoutABootTagIsLeftForAPerson) {
  LiftInputs in = rebooted_and_healthy();
  in.node = drained("triage: GPU 0000:c1:00.0 fell off the bus (Xid 79)");
  EXPECT_FALSE(decide_drain_lift(in).lift);
}

TEST(DrainLift, TheNewBootMustHaveBeenLookedAtAndFoundHealthy) {
  LiftInputs in = rebooted_and_healthy();
  in.health_fresh = false;
  EXPECT_FALSE(decide_drain_lift(in).lift) << "no health pass on this boot's evidence yet";
  in = rebooted_and_healthy();
  in.verdict = "degraded";
  EXPECT_FALSE(decide_drain_lift(in).lift);
  in.verdict = "drain-recommended";
  EXPECT_FALSE(decide_drain_lift(in).lift);
  in = rebooted_and_healthy();
  in.drain_recommended_this_boot = true;
  const LiftDecision d = decide_drain_lift(in);
  EXPECT_FALSE(d.lift) << "a fault seen on this boot that has since left the health window";
  EXPECT_NE(d.why.find("again"), std::string::npos) << d.why;
}

TEST(DrainLift, OnlyUnderDrainPolicyAuto) {
  LiftInputs in = rebooted_and_healthy();
  in.policy = "recommend";
  EXPECT_FALSE(decide_drain_lift(in).lift);
}

TEST(DrainLift, ADownNodeIsLeftDown) {
  LiftInputs in = rebooted_and_healthy();
  in.node->down = true;
  in.node->state = "DOWN+DRAIN";
  const LiftDecision d = decide_drain_lift(in);
  EXPECT_FALSE(d.lift);
  EXPECT_NE(d.why.find("DOWN+DRAIN"), std::string::npos) << d.why;
}

TEST(DrainLift, NothingToLiftWithoutSlurmsViewOrADrain) {
  LiftInputs in = rebooted_and_healthy();
  in.node.reset();
  EXPECT_FALSE(decide_drain_lift(in).lift);
  in = rebooted_and_healthy();
  in.node->drain = false;
  in.node->state = "IDLE";
  EXPECT_FALSE(decide_drain_lift(in).lift);
}

TEST(HealthPassFresh, TheKernelLogReadToItsEndAndEveryCollectorHeardFrom) {
  EXPECT_TRUE(health_pass_fresh(true, 5, true, true, true));
  EXPECT_FALSE(health_pass_fresh(true, 0, true, true, true)) << "the log not read to its end yet";
  EXPECT_FALSE(health_pass_fresh(true, 5, true, false, true)) << "no D-state sample yet";
  EXPECT_FALSE(health_pass_fresh(true, 5, true, true, false)) << "no sysfs snapshot yet";
  EXPECT_TRUE(health_pass_fresh(false, 0, true, true, true)) << "KernelSource=none";
  EXPECT_TRUE(health_pass_fresh(true, 5, false, false, false)) << "collectors off";
}

}  // namespace
}  // namespace triage::agent
