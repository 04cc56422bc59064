// The status stage alone: when the job ended, and what its status is, from plain facts.
#include "analyzer/status_decision.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;

const SignatureCatalog& cat() {
  return test::shipped_catalog();
}

TEST(Timeline, SlurmsEndTimeWinsOverTheSummaryAndTheCancellationLine) {
  TimelineFacts f;
  f.slurm_state = "TIMEOUT";
  f.slurm_end_usec = 100 * kSec;
  f.log_read = true;
  f.summary_finished_usec = 90 * kSec;
  f.cancel_line = true;
  f.cancel_time_usec = 80 * kSec;
  const Timeline tl = build_timeline(f);
  EXPECT_TRUE(tl.ended);
  EXPECT_FALSE(tl.alive);
  EXPECT_EQ(tl.end_usec, 100 * kSec);
  EXPECT_EQ(tl.end_basis, "job end (Slurm)");
}

TEST(Timeline, WithoutSlurmACancellationLineEndsTheJobAtItsTime) {
  TimelineFacts f;
  f.log_read = true;
  f.cancel_line = true;
  f.cancel_time_usec = 80 * kSec;
  f.log_mtime_usec = 95 * kSec;
  const Timeline tl = build_timeline(f);
  EXPECT_TRUE(tl.ended);
  EXPECT_TRUE(tl.cancel_line);
  EXPECT_EQ(tl.end_usec, 80 * kSec);
  EXPECT_EQ(tl.end_basis, "cancellation time in the log");
}

TEST(Timeline, AnEndedJobWithNoTimeEndsWhenItsLogWasLastWritten) {
  TimelineFacts f;
  f.slurm_state = "FAILED";
  f.log_mtime_usec = 95 * kSec;
  const Timeline tl = build_timeline(f);
  EXPECT_EQ(tl.end_usec, 95 * kSec);
  EXPECT_EQ(tl.end_basis, "log last written");
}

TEST(Timeline, ARunningJobHasNotEnded) {
  TimelineFacts f;
  f.slurm_state = "RUNNING";
  f.log_mtime_usec = 95 * kSec;
  const Timeline tl = build_timeline(f);
  EXPECT_TRUE(tl.alive);
  EXPECT_FALSE(tl.ended);
  EXPECT_EQ(tl.end_usec, 0);
}

TEST(Timeline, TheFirstTimedCancellationClassOfTheCatalogGivesTheTime) {
  const ScanResult scan = test::scan_text(
      "slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE TO "
      "TIME LIMIT ***\n");
  const CancellationInLog c = cancellation_in_log(scan, cat());
  EXPECT_TRUE(c.found);
  EXPECT_GT(c.time_usec, 0);
  EXPECT_FALSE(cancellation_in_log(test::scan_text("all good\n"), cat()).found);
}

StatusFacts summary_says(const std::string& word, std::optional<int> code) {
  StatusFacts f;
  f.summary.found = true;
  f.summary.status_word = word;
  f.summary.exit_code = code;
  return f;
}

TEST(StatusDecision, TheSummarysCancellationCodesComeFromTheCatalog) {
  EXPECT_EQ(decide_status(summary_says("FAILED", 143), cat()).status, kStatusCancelled);
  EXPECT_EQ(decide_status(summary_says("FAILED", 130), cat()).status, kStatusCancelled);
  EXPECT_EQ(decide_status(summary_says("FAILED", 137), cat()).status, kStatusFailed);
  EXPECT_EQ(decide_status(summary_says("SUCCESS", 0), cat()).status, kStatusCompleted);
  EXPECT_EQ(decide_status(summary_says("FAILED", 1), cat()).reason,
            "JOB SUMMARY reports FAILED (exit 1)");
}

TEST(StatusDecision, ACancellationLineWithoutSummaryIsCancelled) {
  StatusFacts f;
  f.timeline.cancel_line = true;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusCancelled);
}

TEST(StatusDecision, AliveWithStalledStepsIsHangingAndWithAdvancingStepsRunning) {
  StatusFacts f;
  f.slurm_state = "RUNNING";
  f.timeline.alive = true;
  f.progress.has_steps = true;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusRunning);
  f.progress.stalled = true;
  f.progress.stall_seconds = 7200;
  const StatusVerdict v = decide_status(f, cat());
  EXPECT_EQ(v.status, kStatusHanging);
  EXPECT_EQ(v.reason, "Slurm state RUNNING, but training steps stopped 2h 00m ago");
}

TEST(StatusDecision, SlurmsEndStateMeansWhatTheCatalogsClassesSay) {
  StatusFacts f;
  f.timeline.ended = true;
  for (const char* st : {"CANCELLED", "TIMEOUT", "DEADLINE", "PREEMPTED"}) {
    f.slurm_state = st;
    EXPECT_EQ(decide_status(f, cat()).status, kStatusCancelled) << st;
  }
  for (const char* st : {"FAILED", "OUT_OF_MEMORY", "NODE_FAIL", "BOOT_FAIL"}) {
    f.slurm_state = st;
    EXPECT_EQ(decide_status(f, cat()).status, kStatusFailed) << st;
  }
  f.slurm_state = "COMPLETED";
  EXPECT_EQ(decide_status(f, cat()).status, kStatusCompleted);
  f.slurm_state = "SPECIAL_EXIT";
  EXPECT_EQ(decide_status(f, cat()).status, kStatusUnknown);
  f.cause_found = true;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusFailed);
}

TEST(StatusDecision, WithoutSlurmOnlyTheLogSpeaks) {
  StatusFacts f;
  f.progress.has_steps = true;
  f.progress.stall_seconds = 30;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusRunning);
  f.progress.stalled = true;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusUnknown);
  f.cause_found = true;
  EXPECT_EQ(decide_status(f, cat()).status, kStatusFailed);
}

}  // namespace
}  // namespace triage
