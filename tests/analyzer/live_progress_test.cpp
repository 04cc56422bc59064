// A running job's log, read as it grows: what the live state knows after each arrival.
#include "analyzer/live_progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "analyzer/line_text.h"
#include "common/time_util.h"
#include "live_log.h"
#include "test_support.h"

namespace triage {
namespace {

using test::GrowingLog;
using test::kSec;
using test::kT0;
using test::step_line;

constexpr int64_t kHour = 3600 * kSec;

const std::string kHeader =
    "SLURM_JOB_ID=4242\nPASSTHROUGH_ARGS=steps=5000 enable_checkpointing=true\n0: Starting "
    "training\n";
const std::string kWatchdog =
    "2: [rank2]:[E1121 10:11:35.574914 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, "
    "NumelOut=262144, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.\n";

LiveProgress fresh() {
  test::use_source_rules();
  return LiveProgress(test::shipped_catalog());
}

TEST(LiveProgress, StepsPrintedEverySecondAreCountedAndDatedByArrival) {
  GrowingLog log;
  LiveProgress p = fresh();
  log.arrive(p, kHeader, kT0);
  EXPECT_FALSE(p.has_steps());
  for (int64_t s = 0; s < 30; ++s)
    log.arrive(p, step_line(s, s == 0 ? 40.0 : 1.0), kT0 + (s + 1) * kSec);
  EXPECT_EQ(p.last_step(), 29);
  EXPECT_EQ(p.steps_seen(), 30u);
  EXPECT_EQ(p.last_step_line(), 33);  // after the three header lines
  EXPECT_EQ(p.last_step_mono(), kT0 + 30 * kSec);
  EXPECT_EQ(p.lines(), 33);
  ASSERT_TRUE(p.step_time().seconds);
  EXPECT_TRUE(p.step_time().steady);
  EXPECT_DOUBLE_EQ(*p.step_time().seconds, 1.0);  // the 40 s compile step is warm-up
  EXPECT_EQ(p.longest_healthy_gap_s(), 1.0);
}

TEST(LiveProgress, TheFirstStepsAreWarmUpWithoutASteadyStepTime) {
  GrowingLog log;
  LiveProgress p = fresh();
  for (int64_t s = 0; s < 4; ++s)
    log.arrive(p, step_line(s, 2.0), kT0 + s * kSec);
  EXPECT_TRUE(p.has_steps());
  EXPECT_FALSE(p.step_time().steady);
}

// The node's monotonic clock counts from its boot, nowhere near the wall clock.
constexpr int64_t kBoot = 5000 * kSec;

std::string stamped_step(const std::string& stamp, int64_t step) {
  return "0: [" + stamp + "] completed step: " + std::to_string(step) + ", loss: 9.100\n";
}

// "2026-11-28 10:00:00" (no zone) for a time, as a job in a zone `usec` is local time of prints.
std::string naive(int64_t usec) {
  std::string s = format_utc(usec);  // 2026-11-28T10:00:00Z
  s[10] = ' ';
  s.pop_back();
  return s;
}

TEST(LiveProgress, ANaiveTimestampIsNeverSetAgainstTheAgentsClock) {
  // Printed by a job with TZ=America/Los_Angeles on a UTC node: its naive stamps read 8 h behind.
  GrowingLog log;
  LiveProgress p = fresh();
  const LiveInstant first{kT0, kBoot};
  log.arrive(p, stamped_step(naive(kT0 - 8 * kHour), 0), first);
  EXPECT_EQ(p.last_step_mono(), kBoot);  // when the follower read it, not 8 h before
  const LiveInstant next{kT0 + 5 * kSec, kBoot + 5 * kSec};
  log.arrive(p, stamped_step(naive(kT0 + 8 * kHour), 1), next);  // 8 h east
  EXPECT_EQ(p.last_step_mono(), kBoot + 5 * kSec);
}

TEST(LiveProgress, AZonedTimestampDatesItsLineBackNoFurtherThanThePreviousRead) {
  GrowingLog log;
  LiveProgress p = fresh();
  log.arrive(p, stamped_step(format_utc(kT0 - 3600 * kSec), 0), LiveInstant{kT0, kBoot});
  EXPECT_EQ(p.last_step_mono(), kBoot) << "the first read: its lines may be of any age";
  // Read 5 s later: printed 2 s before that read, by its own (UTC) clock.
  const LiveInstant second{kT0 + 5 * kSec, kBoot + 5 * kSec};
  log.arrive(p, stamped_step(format_utc(second.wall_usec - 2 * kSec), 1), second);
  EXPECT_EQ(p.last_step_mono(), second.mono_usec - 2 * kSec);
  // A stamp five minutes old (a skewed clock, or the wall clock stepped): the line was not in
  // the file at the previous read, 5 s ago.
  const LiveInstant third{kT0 + 10 * kSec, kBoot + 10 * kSec};
  log.arrive(p, stamped_step(format_utc(third.wall_usec - 300 * kSec), 2), third);
  EXPECT_EQ(p.last_step_mono(), second.mono_usec);
  // One from the future is dated by its arrival.
  const LiveInstant fourth{kT0 + 15 * kSec, kBoot + 15 * kSec};
  log.arrive(p, stamped_step(format_utc(fourth.wall_usec + 3600 * kSec), 3), fourth);
  EXPECT_EQ(p.last_step_mono(), fourth.mono_usec);
}

TEST(LiveProgress, NaiveStampsGiveTheStepTimeOfBufferedBursts) {
  // 50 steps 6 s apart, flushed together every 300 s, stamped in the job's own zone.
  GrowingLog log;
  LiveProgress p = fresh();
  const int64_t job_zone = -5 * kHour;
  int64_t step = 0;
  for (int burst = 1; burst <= 3; ++burst) {
    std::string fifty;
    for (int i = 0; i < 50; ++i, ++step)
      fifty += stamped_step(naive(kT0 + job_zone + step * 6 * kSec), step);
    log.arrive(p, fifty, LiveInstant{kT0 + burst * (300 * kSec), kBoot + burst * (300 * kSec)});
  }
  ASSERT_TRUE(p.step_time().seconds);
  EXPECT_TRUE(p.step_time().steady);
  EXPECT_DOUBLE_EQ(*p.step_time().seconds, 6.0);
  EXPECT_EQ(p.last_step_mono(), kBoot + 900 * kSec);
}

TEST(LiveProgress, AFallBackHourInTheStampsIsNotAStepTime) {
  // Steps 1 s apart, read every 5 s; at 02:00 the job's zone falls back to 01:00.
  GrowingLog log;
  LiveProgress p = fresh();
  const int64_t two_am = kT0 - 8 * kHour;  // the job's local 02:00, as a naive stamp
  int64_t step = 0;
  for (int read = 1; read <= 24; ++read) {
    std::string five;
    for (int i = 0; i < 5; ++i, ++step) {
      const int64_t local = two_am - 60 * kSec + step * kSec;
      five += stamped_step(naive(local >= two_am ? local - 3600 * kSec : local), step);
    }
    log.arrive(p, five, LiveInstant{kT0 + read * (5 * kSec), kBoot + read * (5 * kSec)});
  }
  ASSERT_TRUE(p.step_time().seconds);
  // 119 s from the first step to the last: the hour the stamps went back is not counted.
  EXPECT_NEAR(*p.step_time().seconds, 1.0, 0.05);
  EXPECT_EQ(p.last_step_mono(), kBoot + 120 * kSec);
}

TEST(LiveProgress, ASilenceThatEndedWithNewStepsIsAHealthyGap) {
  GrowingLog log;
  LiveProgress p = fresh();
  for (int64_t s = 0; s < 10; ++s)
    log.arrive(p, step_line(s, 1.0), kT0 + s * kSec);
  log.arrive(p, step_line(10, 1.0), kT0 + 9 * kSec + 420 * kSec);
  EXPECT_DOUBLE_EQ(p.longest_healthy_gap_s(), 420.0);
}

struct PauseShape {
  const char* name;
  const char* line;
  bool checkpoint;  // else evaluation
};

class PauseAnnouncements : public ::testing::TestWithParam<PauseShape> {};

TEST_P(PauseAnnouncements, AreRecognisedWithTheirLine) {
  GrowingLog log;
  LiveProgress p = fresh();
  log.arrive(p, step_line(0, 1.0) + GetParam().line + std::string("\n"), kT0);
  const LiveLine& seen = GetParam().checkpoint ? p.last_checkpoint_save() : p.last_evaluation();
  const LiveLine& other = GetParam().checkpoint ? p.last_evaluation() : p.last_checkpoint_save();
  EXPECT_EQ(seen.line, 2) << GetParam().line;
  EXPECT_EQ(seen.text, GetParam().line);
  // Dated by its arrival on the wall clock (for display), whatever stamp it carries.
  EXPECT_EQ(seen.usec, kT0);
  EXPECT_EQ(other.line, 0);
}

INSTANTIATE_TEST_SUITE_P(
    RealShapes, PauseAnnouncements,
    ::testing::Values(
        // HF Trainer
        PauseShape{"HfTrainerSave",
                   "[INFO|trainer.py:3478] 2026-11-21 10:00:04,123 >> Saving model checkpoint to "
                   "out/checkpoint-500",
                   true},
        // Megatron-LM
        PauseShape{"MegatronSave",
                   " saving checkpoint at iteration     100 to /ckpt/gpt in torch_dist format",
                   true},
        // DeepSpeed
        PauseShape{"DeepSpeedSave",
                   "[2026-11-21 10:00:04,000] [INFO] [logging.py:96:log_dist] [Rank 0] [Torch] "
                   "Checkpoint global_step100 is about to be saved!",
                   true},
        // MaxText (after a synchronous save)
        PauseShape{"MaxTextSaved", "0: Saved a checkpoint at step 100.", true},
        // generic loops
        PauseShape{"GenericSave", "Saving checkpoint at iteration 2000...", true},
        // HF Trainer
        PauseShape{"HfTrainerEvaluation", "***** Running Evaluation *****", false},
        // Megatron-LM
        PauseShape{"MegatronEvaluation", "Evaluating iter 10/100", false},
        // MaxText
        PauseShape{"MaxTextEvaluation", "0: Completed eval step 3", false},
        // DeepSpeed-Chat
        PauseShape{"DeepSpeedChatEvaluation", "***** Evaluating perplexity, Epoch 0/16 *****",
                   false},
        // Lightning-style loops
        PauseShape{"StartingValidation", "** Starting validation **", false}),
    [](const ::testing::TestParamInfo<PauseShape>& info) { return std::string(info.param.name); });

TEST(LiveProgress, CheckpointLoadsAndRestoreMessagesAreNoPause) {
  GrowingLog log;
  LiveProgress p = fresh();
  log.arrive(p,
             "Loading checkpoint shards: 100%|##########| 4/4 [00:03<00:00,  1.13it/s]\n"
             "0: No existing checkpoints found, not restoring checkpoint.\n",
             kT0);
  EXPECT_EQ(p.last_checkpoint_save().line, 0);
  EXPECT_EQ(p.last_evaluation().line, 0);
}

TEST(LiveProgress, AnNcclWatchdogTimeoutInARunningLogIsAnEarlyWarningWithItsLine) {
  GrowingLog log;
  LiveProgress p = fresh();
  log.arrive(p, kHeader, kT0);
  for (int64_t s = 0; s < 20; ++s)
    log.arrive(p, step_line(s, 1.0), kT0 + s * kSec);
  EXPECT_TRUE(p.warnings().empty());
  log.arrive(p, kWatchdog, kT0 + 700 * kSec);
  ASSERT_EQ(p.warnings().size(), 1u);
  const EarlyWarning& w = p.warnings().front();
  EXPECT_EQ(w.cls, "nccl-timeout");
  EXPECT_EQ(w.line, 24);  // absolute: 3 header lines, 20 steps, then this one
  EXPECT_EQ(w.text + "\n", kWatchdog);
  EXPECT_EQ(w.arrived_usec, kT0 + 700 * kSec);
  // The other ranks' timeouts are the same warning.
  for (int i = 0; i < 5; ++i)
    log.arrive(p, kWatchdog, kT0 + (701 + i) * kSec);
  EXPECT_EQ(p.warnings().size(), 1u);
}

// A job's whole log: two ranks printing every step, a restart, a checkpoint save, an evaluation
// and a failure, so that chunk boundaries can fall anywhere that matters.
std::vector<std::string> whole_log_lines() {
  std::vector<std::string> lines = {"SLURM_JOB_ID=4242\n", "0: Starting training\n"};
  auto steps = [&](int64_t from, int64_t to) {
    for (int64_t s = from; s < to; ++s) {
      lines.push_back(step_line(s, s == from ? 30.0 : 1.0 + static_cast<double>(s % 3) * 0.25));
      std::string other = step_line(s, 1.0);
      other[0] = '1';  // rank 1 prints the same step
      lines.push_back(other);
    }
  };
  steps(0, 40);
  lines.emplace_back("0: Saved a checkpoint at step 40.\n");
  lines.emplace_back("***** Running Evaluation *****\n");
  steps(40, 55);
  lines.emplace_back("0: Restoring from this run's directory step 40\n");
  steps(41, 60);  // a restart: steps drop back
  lines.push_back(kWatchdog);
  return lines;
}

void expect_same_state(const LiveProgress& a, const LiveProgress& b) {
  EXPECT_EQ(a.last_step(), b.last_step());
  EXPECT_EQ(a.last_step_line(), b.last_step_line());
  EXPECT_EQ(a.last_step_mono(), b.last_step_mono());
  EXPECT_EQ(a.last_step_text(), b.last_step_text());
  EXPECT_EQ(a.steps_seen(), b.steps_seen());
  EXPECT_EQ(a.restarts(), b.restarts());
  EXPECT_EQ(a.segment().first_step, b.segment().first_step);
  EXPECT_EQ(a.segment().distinct_steps, b.segment().distinct_steps);
  EXPECT_EQ(a.segment().steady_count, b.segment().steady_count);
  EXPECT_DOUBLE_EQ(a.segment().steady_seconds_sum, b.segment().steady_seconds_sum);
  EXPECT_EQ(a.segment().warm_count, b.segment().warm_count);
  EXPECT_DOUBLE_EQ(a.segment().warm_seconds_sum, b.segment().warm_seconds_sum);
  EXPECT_EQ(a.step_time().seconds, b.step_time().seconds);
  EXPECT_EQ(a.step_time().steady, b.step_time().steady);
  EXPECT_EQ(a.longest_healthy_gap_s(), b.longest_healthy_gap_s());
  EXPECT_EQ(a.last_checkpoint_save().line, b.last_checkpoint_save().line);
  EXPECT_EQ(a.last_evaluation().line, b.last_evaluation().line);
  EXPECT_EQ(a.lines(), b.lines());
  ASSERT_EQ(a.warnings().size(), b.warnings().size());
  for (size_t i = 0; i < a.warnings().size(); ++i) {
    EXPECT_EQ(a.warnings()[i].cls, b.warnings()[i].cls);
    EXPECT_EQ(a.warnings()[i].line, b.warnings()[i].line);
    EXPECT_EQ(a.warnings()[i].text, b.warnings()[i].text);
  }
}

TEST(LiveProgress, ALogFedInRandomCompleteLineChunksGivesTheSameStateAsFedWhole) {
  const std::vector<std::string> lines = whole_log_lines();
  GrowingLog log;
  std::vector<uint64_t> line_ends;
  for (const auto& l : lines) {
    log.append(l);
    line_ends.push_back(log.size());
  }
  LiveProgress whole = fresh();
  log.scan_range(whole, 0, log.size(), kT0);
  EXPECT_EQ(whole.last_step(), 59);
  EXPECT_EQ(whole.restarts(), 1u);
  EXPECT_EQ(whole.steps_seen(), 55u + 19u);
  EXPECT_EQ(whole.warnings().size(), 1u);

  std::mt19937 rng(15);
  for (int round = 0; round < 5; ++round) {
    LiveProgress chunked = fresh();
    uint64_t from = 0;
    size_t next = 0;
    while (next < line_ends.size()) {
      next = std::min(line_ends.size() - 1, next + rng() % 9);
      log.scan_range(chunked, from, line_ends[next], kT0);
      from = line_ends[next++];
    }
    SCOPED_TRACE("round " + std::to_string(round));
    expect_same_state(whole, chunked);
  }
}

TEST(LiveProgress, TenThousandFailureLinesKeepOneWarning) {
  GrowingLog log;
  LiveProgress p = fresh();
  std::string burst;
  for (int i = 0; i < 2000; ++i)
    burst += kWatchdog;
  for (int i = 0; i < 5; ++i)
    log.arrive(p, burst, kT0 + i * kSec);
  EXPECT_EQ(p.warnings().size(), 1u);
  EXPECT_EQ(p.lines(), 10000);
}

}  // namespace
}  // namespace triage
