// The narrative stage alone: what happened, the next steps and the notes, from a finished verdict.
#include "analyzer/diagnosis_narrative.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

const SignatureCatalog& cat() {
  return test::shipped_catalog();
}

Triage verdict(const std::string& status, const std::string& primary) {
  Triage t;
  t.status = status;
  t.primary_failure = primary;
  return t;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(WhatHappened, ACancelledJobWhosePrimaryIsNotTheCancellationSaysSo) {
  EXPECT_TRUE(starts_with(what_happened(verdict(kStatusCancelled, "oom-host"), cat()),
                          "The job was cancelled, but cancellation was not the cause. "));
  const std::string limit = what_happened(verdict(kStatusCancelled, "time-limit"), cat());
  EXPECT_EQ(limit, cat().find("time-limit")->explain);
}

TEST(WhatHappened, AStallSaysWhenTheLastStepWasLoggedAndWhereItShouldBe) {
  Triage t = verdict(kStatusHanging, "hang");
  t.progress.last_step = 316;
  t.progress.stall_seconds = 5400;
  t.progress.reference_basis = "now";
  t.progress.expected_step = 990;
  const std::string what = what_happened(t, cat());
  EXPECT_TRUE(starts_with(what, "Slurm still runs the job, but training has stopped. ")) << what;
  EXPECT_NE(what.find(" The last step (316) was logged 1h 30m before now; at this job's step time "
                      "it should have reached step 990."),
            std::string::npos)
      << what;
}

TEST(WhatHappened, AFailureWithNoClassPointsAtTheEndOfTheLog) {
  Triage t = verdict(kStatusFailed, "");
  t.summary.exit_code = 3;
  EXPECT_EQ(what_happened(t, cat()),
            "The job did not succeed, but no known failure signature was found in the log (exit "
            "3). Read the end of the log.");
}

TEST(NextSteps, LiveOnlyStepsAreLeftOutOnceTheJobEnded) {
  Triage t = verdict(kStatusHanging, "hang");
  t.job_id = 4242;
  const auto live = next_steps(t, cat());
  t.status = kStatusCancelled;
  const auto ended = next_steps(t, cat());
  EXPECT_GT(live.size(), ended.size());
  EXPECT_NE(std::find(live.begin(), live.end(), "Kill the job: scancel 4242."), live.end());
}

TEST(NextSteps, TheHeartbeatVerdictIsAddedUnlessTheHeartbeatClassIsPrimary) {
  Triage t = verdict(kStatusFailed, "nccl-timeout");
  t.heartbeat.present = true;
  t.heartbeat.verdict = "false-positive";
  t.heartbeat.explanation = "Alive.";
  const auto with = next_steps(t, cat());
  EXPECT_EQ(with.back(), "Heartbeat timeout: false-positive. Alive.");
  t.primary_failure = "heartbeat-timeout";
  const auto own = next_steps(t, cat());
  EXPECT_EQ(std::count(own.begin(), own.end(), "Heartbeat timeout: false-positive. Alive."), 0);
}

TEST(NextSteps, ANodeRecommendedForDrainIsNamedForAdministrators) {
  Triage t = verdict(kStatusFailed, "");
  NodeRow row;
  row.host = "gpu-a017";
  row.verdict = "drain-recommended";
  row.verdict_reasons = {"Xid 79"};
  t.nodes.push_back(row);
  EXPECT_EQ(next_steps(t, cat()),
            std::vector<std::string>{
                "Administrators: node gpu-a017 is recommended for draining (Xid 79)."});
}

TEST(InputNotes, ALogCutMidLineIsNotedOnlyOnceTheJobEnded) {
  Triage t = verdict(kStatusRunning, "");
  t.scan.ends_without_newline = true;
  EXPECT_TRUE(input_notes(t).empty());
  t.status = kStatusFailed;
  ASSERT_EQ(input_notes(t).size(), 1u);
  EXPECT_TRUE(starts_with(input_notes(t)[0], "The log ends in the middle of a line"));
}

}  // namespace
}  // namespace triage
