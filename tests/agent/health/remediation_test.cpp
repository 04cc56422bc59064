// Reboot and return as plain values: which fault a reboot clears, the reasons the agent writes and
// reads back after slurmctld appended to them, when it reboots, and what the first health pass on
// the new boot does with the node.
#include "agent/health/remediation.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

constexpr const char* kOldBoot = "3f2a9c1b5e6d4c7a8b9c0d1e2f3a4b5c";
constexpr const char* kNewBoot = "77aa0c1b5e6d4c7a8b9c0d1e2f3a4b5c";

KernelEvent xid79(const std::string& boot, int64_t t = 100) {
  KernelEvent e;
  e.id = boot.substr(0, 4) + ":1";
  e.kind = "nvidia-xid";
  e.boot_id = boot;
  e.time_usec = t;
  e.device = "0000:3b:00";
  e.code = 79;
  e.summary = "Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus";
  e.fields["remedy"] = "reboot";
  return e;
}

SlurmNodeState node_in(const std::string& state, const std::string& reason) {
  SlurmNodeState n;
  n.name = "gpu-a017";
  n.state = state;
  n.reason = reason;
  n.drain = state.find("DRAIN") != std::string::npos;
  n.down = state.rfind("DOWN", 0) == 0;
  return n;
}

std::string our_reboot_reason(const std::string& boot) {
  return reboot_reason("Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus", boot);
}

TEST(RebootFault, OnlyAnEventOfThisBootWhoseCatalogSaysRebootCounts) {
  KernelEvent ecc = xid79(kNewBoot);
  ecc.fields.erase("remedy");
  EXPECT_FALSE(reboot_fault({ecc}, kNewBoot)) << "no remedy in the catalog";
  EXPECT_FALSE(reboot_fault({xid79(kOldBoot)}, kNewBoot)) << "the boot before the reboot";
  const auto f = reboot_fault({ecc, xid79(kNewBoot)}, kNewBoot);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->key, "nvidia-xid@0000:3b:00");
  EXPECT_EQ(f->summary, "Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus");
}

TEST(RemediationReason, OurRebootReasonIsReadBackWithSlurmctldsSuffix) {
  const std::string r = our_reboot_reason(kOldBoot);
  EXPECT_EQ(r,
            "triage: reboot: Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus [boot 3f2a9c1b]");
  const auto plain = parse_remediation_reason(r);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->kind, OwnReasonKind::kReboot);
  EXPECT_EQ(plain->boot_tag, "3f2a9c1b");
  // What 22.05 shows after the reboot (seen on the dev cluster).
  const auto back = parse_remediation_reason(r + " : reboot issued : reboot complete");
  ASSERT_TRUE(back);
  EXPECT_EQ(back->boot_tag, "3f2a9c1b");
  EXPECT_EQ(back->slurm_suffix, " : reboot issued : reboot complete");
  const auto hands = parse_remediation_reason(needs_hands_reason("Xid 79 again", kNewBoot));
  ASSERT_TRUE(hands);
  EXPECT_EQ(hands->kind, OwnReasonKind::kNeedsHands);
}

TEST(RemediationReason, AnAdminsEditOrAnyOtherTextIsNotOurs) {
  EXPECT_FALSE(parse_remediation_reason(our_reboot_reason(kOldBoot) + " - checking PSU"));
  EXPECT_FALSE(parse_remediation_reason("triage: GPU fell off the bus [boot 3f2a9c1b]"))
      << "a plain drain of ours is drain hygiene's, not a reboot";
  EXPECT_FALSE(parse_remediation_reason("reboot complete"));
  EXPECT_FALSE(parse_remediation_reason(our_reboot_reason(kOldBoot) + " : PSU : reboot complete"));
}

TEST(RemediationCommands, RebootAsapComesBackDownAndResumeIsAnUpdate) {
  EXPECT_EQ(reboot_argv("gpu-a017", "triage: reboot: x [boot 1]"),
            (std::vector<std::string>{"scontrol", "reboot", "ASAP", "nextstate=DOWN",
                                      "reason=triage: reboot: x [boot 1]", "gpu-a017"}));
  EXPECT_EQ(resume_argv("gpu-a017"),
            (std::vector<std::string>{"scontrol", "update", "NodeName=gpu-a017", "State=RESUME"}));
  EXPECT_EQ(down_reason_argv("gpu-a017", "r"),
            (std::vector<std::string>{"scontrol", "update", "NodeName=gpu-a017", "State=DOWN",
                                      "Reason=r"}));
}

TEST(RebootRecords, RoundTripAndATornLineIsSkipped) {
  const std::string text =
      format_reboot_record({1700000000, "3f2a9c1b", "nvidia-xid@0000:3b:00"}) + "17000001";
  const auto records = parse_reboot_records(text);
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].time_sec, 1700000000);
  EXPECT_EQ(records[0].boot_tag, "3f2a9c1b");
  EXPECT_EQ(records[0].fault_key, "nvidia-xid@0000:3b:00");
}

FaultInputs xid79_on_idle_node() {
  FaultInputs in;
  in.remediate_reboot = true;
  in.node = node_in("IDLE", "");
  in.boot_id = kNewBoot;
  in.fault = reboot_fault({xid79(kNewBoot)}, kNewBoot);
  in.now_sec = 1700000000;
  return in;
}

TEST(FaultStep, AnXid79UnderRemediateRebootIsRebooted) {
  const FaultDecision d = decide_fault_step(xid79_on_idle_node());
  EXPECT_EQ(d.step, FaultStep::kReboot);
  EXPECT_EQ(d.why, "Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus");
}

TEST(FaultStep, WithoutRemediateOrWithoutARebootRemedyItIsTheDrainAsBefore) {
  FaultInputs off = xid79_on_idle_node();
  off.remediate_reboot = false;
  EXPECT_EQ(decide_fault_step(off).step, FaultStep::kDrain);
  FaultInputs ecc = xid79_on_idle_node();
  ecc.fault.reset();
  EXPECT_EQ(decide_fault_step(ecc).step, FaultStep::kDrain);
}

TEST(FaultStep, OurRebootAlreadyAskedOnThisBootIsNotAskedAgain) {
  FaultInputs in = xid79_on_idle_node();
  in.node = node_in("DRAINING", our_reboot_reason(kNewBoot));
  EXPECT_EQ(decide_fault_step(in).step, FaultStep::kNothing);
}

TEST(FaultStep, AnAdminsDrainIsLeftAlone) {
  FaultInputs in = xid79_on_idle_node();
  in.node = node_in("DRAINED", "replace fan 3");
  EXPECT_EQ(decide_fault_step(in).step, FaultStep::kNothing);
}

TEST(FaultStep, TheSameFaultBackOnANewBootAfterOurRebootNeedsHands) {
  FaultInputs in = xid79_on_idle_node();
  in.reboots = {{in.now_sec - 3600, "3f2a9c1b", "nvidia-xid@0000:3b:00"}};
  const FaultDecision d = decide_fault_step(in);
  EXPECT_EQ(d.step, FaultStep::kNeedsHands);
  EXPECT_NE(d.why.find("a second reboot is not tried"), std::string::npos) << d.why;
}

TEST(FaultStep, AnOldRebootOrOneForAnotherGpuDoesNotCount) {
  FaultInputs in = xid79_on_idle_node();
  in.reboots = {{in.now_sec - kSameFaultWindowSec - 1, "3f2a9c1b", "nvidia-xid@0000:3b:00"},
                {in.now_sec - 60, "3f2a9c1b", "nvidia-xid@0000:86:00"}};
  EXPECT_EQ(decide_fault_step(in).step, FaultStep::kReboot);
}

TEST(FaultStep, ANodeBackDownFromOurRebootIsLeftToTheReturnDecision) {
  FaultInputs in = xid79_on_idle_node();
  in.node = node_in("DOWN", our_reboot_reason(kOldBoot) + " : reboot complete");
  EXPECT_EQ(decide_fault_step(in).step, FaultStep::kNothing);
}

// From Slurm 23.11 on, a cluster without accounting storage keeps the reason after a resume: a node
// our reboot cleared and resumed is IDLE under our old reason for good. The same fault back within
// the week needs hands (the reboot records say so); another fault days later gets its own reboot.
TEST(FaultStep, OurOldRebootReasonOnAResumedNodeIsAFinishedReboot) {
  FaultInputs same = xid79_on_idle_node();
  same.node = node_in("IDLE", our_reboot_reason(kOldBoot) + " : reboot complete");
  same.reboots = {{same.now_sec - 3600, "3f2a9c1b", "nvidia-xid@0000:3b:00"}};
  EXPECT_EQ(decide_fault_step(same).step, FaultStep::kNeedsHands);

  FaultInputs other = same;
  other.reboots = {{other.now_sec - int64_t{3} * 24 * 3600, "3f2a9c1b", "nvidia-xid@0000:86:00"}};
  const FaultDecision d = decide_fault_step(other);
  EXPECT_EQ(d.step, FaultStep::kReboot) << d.why;
}

TEST(FaultStep, DrainingUnderOurOldRebootReasonIsLeftForHands) {
  FaultInputs in = xid79_on_idle_node();
  in.node = node_in("DRAINING", our_reboot_reason(kOldBoot) + " : reboot complete");
  EXPECT_EQ(decide_fault_step(in).step, FaultStep::kNeedsHands);
}

ReturnInputs back_down_and_clean() {
  ReturnInputs in;
  in.node = node_in("DOWN", our_reboot_reason(kOldBoot) + " : reboot issued : reboot complete");
  in.boot_id = kNewBoot;
  in.health_fresh = true;
  in.verdict = "healthy";
  return in;
}

TEST(Return, ACleanFirstPassAfterOurRebootResumesTheNode) {
  const ReturnDecision d = decide_return(back_down_and_clean());
  EXPECT_EQ(d.step, ReturnStep::kResume);
  EXPECT_NE(d.why.find("3f2a9c1b"), std::string::npos) << d.why;
}

TEST(Return, NothingIsDecidedBeforeTheHealthPassOnThisBoot) {
  ReturnInputs in = back_down_and_clean();
  in.health_fresh = false;
  EXPECT_EQ(decide_return(in).step, ReturnStep::kWait);
}

TEST(Return, TheFaultBackOnTheNewBootKeepsItDownAndNeedsHands) {
  ReturnInputs in = back_down_and_clean();
  in.verdict = "drain-recommended";
  in.drain_recommended_this_boot = true;
  in.fault = reboot_fault({xid79(kNewBoot)}, kNewBoot);
  const ReturnDecision d = decide_return(in);
  EXPECT_EQ(d.step, ReturnStep::kNeedsHands);
  EXPECT_EQ(d.reason,
            "triage: needs hands: Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus after our "
            "reboot [boot 77aa0c1b]");
}

TEST(Return, AnyOtherUncleanVerdictKeepsItDownWithThatEvidence) {
  ReturnInputs in = back_down_and_clean();
  in.verdict = "degraded";
  in.evidence = "3 GPU resets in 1 h";
  const ReturnDecision d = decide_return(in);
  EXPECT_EQ(d.step, ReturnStep::kNeedsHands);
  EXPECT_NE(d.reason.find("3 GPU resets in 1 h"), std::string::npos) << d.reason;
}

TEST(Return, OnlyANodeWhoseReasonIsStillOursIsTouched) {
  ReturnInputs admin = back_down_and_clean();
  admin.node = node_in("DOWN", "PSU swap, do not resume");
  EXPECT_EQ(decide_return(admin).step, ReturnStep::kNone);
  ReturnInputs hands = back_down_and_clean();
  hands.node = node_in("DOWN", needs_hands_reason("Xid 79 again", kNewBoot));
  EXPECT_EQ(decide_return(hands).step, ReturnStep::kNone);
  ReturnInputs resumed = back_down_and_clean();
  resumed.node = node_in("IDLE", our_reboot_reason(kOldBoot) + " : reboot complete");
  EXPECT_EQ(decide_return(resumed).step, ReturnStep::kNone) << "an admin resumed it already";
}

TEST(Return, TheBootTheRebootWasAskedOnIsNotTheReturn) {
  ReturnInputs in = back_down_and_clean();
  in.node = node_in("DOWN", our_reboot_reason(kNewBoot) + " : reboot timed out");
  EXPECT_EQ(decide_return(in).step, ReturnStep::kNone);
}

}  // namespace
}  // namespace triage::agent
