// The drain controller's decisions as plain values: when an auto-drain is attempted, and when two
// verdicts are the same story (so a flood's repeats are not logged again).
#include "agent/health/drain_controller.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

constexpr int64_t kMinute = 60LL * 1000000;

NodeVerdict drain_recommended(const std::string& reason, const std::string& event_id = "e1") {
  NodeVerdict v;
  v.verdict = "drain-recommended";
  v.reasons.push_back({reason, "drain", {event_id}});
  return v;
}

TEST(DrainAttempt, AutoPolicyDrainsADrainRecommendedNode) {
  EXPECT_TRUE(drain_attempt_due("auto", drain_recommended("uncorrectable ECC"), {}, 10 * kMinute));
}

TEST(DrainAttempt, RecommendPolicyNeverDrains) {
  EXPECT_FALSE(
      drain_attempt_due("recommend", drain_recommended("uncorrectable ECC"), {}, 10 * kMinute));
}

TEST(DrainAttempt, ADegradedNodeIsNotDrained) {
  NodeVerdict v = drain_recommended("two GPU resets");
  v.verdict = "degraded";
  EXPECT_FALSE(drain_attempt_due("auto", v, {}, 10 * kMinute));
}

TEST(DrainAttempt, OneAttemptAtATime) {
  DrainAttempts a;
  a.in_flight = true;
  EXPECT_FALSE(drain_attempt_due("auto", drain_recommended("uncorrectable ECC"), a, 10 * kMinute));
}

TEST(DrainAttempt, AFailedAttemptIsRetriedAfterAMinute) {
  DrainAttempts a;
  a.last_attempt_usec = 10 * kMinute;
  const NodeVerdict v = drain_recommended("uncorrectable ECC");
  EXPECT_FALSE(drain_attempt_due("auto", v, a, 10 * kMinute + kMinute - 1));
  EXPECT_TRUE(drain_attempt_due("auto", v, a, 11 * kMinute));
}

TEST(DrainAttempt, ADrainInPlaceForTheSameReasonIsNotRepeatedButANewReasonIs) {
  DrainAttempts a;
  a.settled_for = "uncorrectable ECC";
  EXPECT_FALSE(drain_attempt_due("auto", drain_recommended("uncorrectable ECC"), a, 10 * kMinute));
  EXPECT_TRUE(
      drain_attempt_due("auto", drain_recommended("GPU fell off the bus"), a, 10 * kMinute));
}

TEST(DrainAttempt, AVerdictWithoutReasonsDrainsWithTheGenericOne) {
  NodeVerdict v;
  v.verdict = "drain-recommended";
  EXPECT_EQ(drain_reason_for(v), "drain recommended");
  EXPECT_EQ(drain_reason_for(drain_recommended("uncorrectable ECC")), "uncorrectable ECC");
}

TEST(SameStory, LiveCountsInTheReasonTextDoNotMakeANewStory) {
  EXPECT_TRUE(same_story(drain_recommended("285999 GPU ring timeouts"),
                         drain_recommended("286000 GPU ring timeouts")));
}

TEST(SameStory, AnotherVerdictActionOrLeadingEventIsANewStory) {
  const NodeVerdict base = drain_recommended("ring timeouts");
  NodeVerdict degraded = base;
  degraded.verdict = "degraded";
  NodeVerdict watch = base;
  watch.reasons.front().action = "watch";
  EXPECT_FALSE(same_story(base, degraded));
  EXPECT_FALSE(same_story(base, watch));
  EXPECT_FALSE(same_story(base, drain_recommended("ring timeouts", "e2")));
  EXPECT_FALSE(same_story(base, NodeVerdict{}));
}

}  // namespace
}  // namespace triage::agent
