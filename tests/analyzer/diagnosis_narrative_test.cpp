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

// A job that completed with rank 1 on node vm2 at 0.70 of the other's pace from step 41, and its
// step time up 30% from then: the report has something to do after all.
TEST(NextSteps, ACompletedJobWithAStragglerAndASlowdownSaysWhereToLook) {
  Triage t = verdict(kStatusCompleted, "");
  EXPECT_TRUE(next_steps(t, cat()).empty()) << "an even run: nothing to do";
  Straggler s;
  s.rank = 1;
  s.node = "vm2";
  s.relative_speed = 0.7;
  s.basis = "per-rank-tflops";
  t.stragglers.push_back(s);
  t.slowdown.found = true;
  t.slowdown.from_s = 0.10;
  t.slowdown.to_s = 0.13;
  t.slowdown.since_step = 41;
  t.slowdown.node = "vm2";
  t.slowdown.basis = "its ranks fell behind";
  const auto steps = next_steps(t, cat());
  ASSERT_EQ(steps.size(), 2U);
  EXPECT_TRUE(starts_with(steps[0],
                          "Rank 1 on node vm2 ran at 0.70 of the others' pace "
                          "(per-rank-tflops): check that node's GPUs"))
      << steps[0];
  EXPECT_NE(steps[0].find("sbatch --exclude=vm2"), std::string::npos) << steps[0];
  EXPECT_EQ(steps[1],
            "The step time rose from 0.10 s to 0.13 s at step 41 and stayed there, with node vm2 "
            "(its ranks fell behind): look at that node first.");
  // Only a rank is known: no node to exclude.
  t.stragglers[0].node.clear();
  t.slowdown.node.clear();
  const auto rank_only = next_steps(t, cat());
  EXPECT_EQ(rank_only[0].find("--exclude"), std::string::npos) << rank_only[0];
  EXPECT_NE(rank_only[1].find("compare what changed at that step"), std::string::npos);
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
