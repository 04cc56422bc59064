// Live stall verdicts in the situations the issue names: a job that stops, and the usual false
// alarms (checkpoint pauses, evaluations, buffered bursts, no step lines, warm-up).
#include "analyzer/stall_verdict.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <functional>
#include <optional>
#include <string>

#include "common/time_util.h"
#include "live_log.h"
#include "test_support.h"

namespace triage {
namespace {

using test::GrowingLog;
using test::kSec;
using test::kT0;
using test::step_line;

bool has_guard(const StallVerdict& v, const std::string& g) {
  return std::find(v.guards_applied.begin(), v.guards_applied.end(), g) != v.guards_applied.end();
}

class StallVerdicts : public ::testing::Test {
 protected:
  StallVerdicts() : p(fresh()) {}
  static LiveProgress fresh() {
    test::use_source_rules();
    return LiveProgress(test::shipped_catalog());
  }
  // Steps [from, to) printed one a second, each read as it is printed; returns the last arrival.
  int64_t steps_every_second(int64_t from, int64_t to, int64_t start_usec) {
    int64_t t = start_usec;
    for (int64_t s = from; s < to; ++s) {
      t = start_usec + (s - from) * kSec;
      log.arrive(p, step_line(s, 1.0), t);
    }
    return t;
  }

  GrowingLog log;
  LiveProgress p;
  LiveStallPolicy low_min{10, 60, 1800};  // HangStallMin=60 as the dev-cluster test sets it
};

TEST_F(StallVerdicts, AJobThatPrintsStepsFor30SecondsThenSleepsIsFlaggedAfterTheThreshold) {
  const int64_t last = steps_every_second(0, 30, kT0);
  const StallVerdict before = judge_stall(p, test::at(last + 59 * kSec), low_min);
  EXPECT_TRUE(before.judged);
  EXPECT_FALSE(before.stalled) << before.basis;
  EXPECT_DOUBLE_EQ(before.threshold_s, 60);  // max(10 x 1 s, 60 s)
  const StallVerdict after = judge_stall(p, test::at(last + 61 * kSec), low_min);
  EXPECT_TRUE(after.stalled);
  EXPECT_DOUBLE_EQ(after.silence_s, 61);
  EXPECT_EQ(after.last_step, 29);
  EXPECT_EQ(after.last_step_line, 30);
  EXPECT_EQ(after.last_step_usec, last);
  EXPECT_TRUE(after.guards_applied.empty());
  EXPECT_EQ(after.basis.rfind("stalled: 61 s since step 29 (line 30); allowed 60 s", 0), 0u)
      << after.basis;
}

TEST_F(StallVerdicts, SlowStepsRaiseTheThresholdAboveTheMinimum) {
  for (int64_t s = 0; s < 10; ++s)
    log.arrive(p, step_line(s, 30.0), kT0 + s * 30 * kSec);
  const int64_t last = kT0 + 9 * kSec * 30;
  EXPECT_FALSE(judge_stall(p, test::at(last + 299 * kSec), low_min).stalled);
  const StallVerdict v = judge_stall(p, test::at(last + 301 * kSec), low_min);
  EXPECT_TRUE(v.stalled);
  EXPECT_DOUBLE_EQ(v.threshold_s, 300);
}

TEST_F(StallVerdicts, ACheckpointPauseAnnouncedByItsSaveLineIsNotAStall) {
  const int64_t last = steps_every_second(0, 30, kT0);
  log.arrive(p, "[INFO|trainer.py:3478] >> Saving model checkpoint to out/checkpoint-30\n",
             last + kSec);
  const StallVerdict v = judge_stall(p, test::at(last + 900 * kSec), low_min);  // 15 minutes > 60 s
  EXPECT_FALSE(v.stalled) << v.basis;
  EXPECT_TRUE(has_guard(v, "checkpoint-save"));
  EXPECT_DOUBLE_EQ(v.threshold_s, 60 + 1800);
  // The save is done and training goes on: the pause is a healthy gap, the next one is covered.
  log.arrive(p, step_line(30, 1.0), last + 900 * kSec);
  const StallVerdict resumed = judge_stall(p, test::at(last + 900 * kSec + 120 * kSec), low_min);
  EXPECT_FALSE(resumed.stalled);
  EXPECT_TRUE(has_guard(resumed, "burst-floor"));
  EXPECT_FALSE(has_guard(resumed, "checkpoint-save"));  // announced before the last step
}

TEST_F(StallVerdicts, TheSameSilenceWithoutASaveLineIsAStall) {
  const int64_t last = steps_every_second(0, 30, kT0);
  EXPECT_TRUE(judge_stall(p, test::at(last + 900 * kSec), low_min).stalled);
}

TEST_F(StallVerdicts, AHangInsideTheSaveIsFlaggedOnceTheAllowanceIsSpent) {
  const int64_t last = steps_every_second(0, 30, kT0);
  log.arrive(p, " saving checkpoint at iteration      30 to /ckpt in torch_dist format\n",
             last + kSec);
  EXPECT_TRUE(judge_stall(p, test::at(last + (60 + 1800 + 1) * kSec), low_min).stalled);
}

TEST_F(StallVerdicts, AnEvaluationAnnouncedAfterTheLastStepExtendsTheSilence) {
  const int64_t last = steps_every_second(0, 30, kT0);
  log.arrive(p, "***** Running Evaluation *****\n", last + kSec);
  const StallVerdict v = judge_stall(p, test::at(last + 600 * kSec), low_min);
  EXPECT_FALSE(v.stalled);
  EXPECT_TRUE(has_guard(v, "evaluation"));
}

TEST_F(StallVerdicts, OutputInBurstsOf50StepsEvery5MinutesIsNeverFlaggedWithTheDefaults) {
  const LiveStallPolicy defaults;
  int64_t step = 0;
  for (int burst = 0; burst < 12; ++burst) {
    const int64_t arrives = kT0 + burst * kSec * 300;
    for (int64_t t = arrives - 300 * kSec; burst > 0 && t < arrives; t += 10 * kSec)
      ASSERT_FALSE(judge_stall(p, test::at(t), defaults).stalled) << "burst " << burst;
    std::string fifty;
    for (int i = 0; i < 50; ++i, ++step)
      fifty += step_line(step, 6.0);
    log.arrive(p, fifty, arrives);
  }
}

TEST_F(StallVerdicts, OnceABurstGapWasSurvivedItIsAFloorBelowTheMinimum) {
  const LiveStallPolicy two_minutes{10, 120, 1800};
  int64_t step = 0;
  auto burst = [&](int64_t arrives) {
    std::string fifty;
    for (int i = 0; i < 50; ++i, ++step)
      fifty += step_line(step, 6.0);
    log.arrive(p, fifty, arrives);
  };
  burst(kT0);
  burst(kT0 + 300 * kSec);  // the first gap: longer than the 120 s allowed, and survived
  const StallVerdict v = judge_stall(p, test::at(kT0 + 590 * kSec), two_minutes);
  EXPECT_FALSE(v.stalled) << v.basis;
  EXPECT_TRUE(has_guard(v, "burst-floor"));
  EXPECT_DOUBLE_EQ(v.threshold_s, 300);
  // Silence beyond the longest gap the job ever survived is a stall again.
  EXPECT_TRUE(judge_stall(p, test::at(kT0 + 601 * kSec), two_minutes).stalled);
}

TEST_F(StallVerdicts, AJobThatPrintsNoStepLinesIsNeverFlagged) {
  log.arrive(p, "epoch 1 loss 0.53\nepoch 2 loss 0.41\n", kT0);
  const StallVerdict v = judge_stall(p, test::at(kT0 + 86400 * kSec), low_min);
  EXPECT_FALSE(v.stalled);
  EXPECT_FALSE(v.judged);
  EXPECT_TRUE(has_guard(v, "no-step-lines"));
  EXPECT_EQ(v.last_step, -1);
}

TEST_F(StallVerdicts, AJobInWarmUpIsNeverFlagged) {
  log.arrive(p, step_line(0, 120.0) + step_line(1, 1.0) + step_line(2, 1.0), kT0);
  const StallVerdict v = judge_stall(p, test::at(kT0 + 86400 * kSec), low_min);
  EXPECT_FALSE(v.stalled);
  EXPECT_TRUE(has_guard(v, "warm-up"));
  EXPECT_DOUBLE_EQ(v.silence_s, 86400);
}

TEST_F(StallVerdicts, ARestartInTheLogStartsAnotherWarmUp) {
  const int64_t last = steps_every_second(0, 30, kT0);
  log.arrive(p, step_line(10, 50.0) + step_line(11, 1.0), last + 5 * kSec);
  const StallVerdict v = judge_stall(p, test::at(last + 3600 * kSec), low_min);
  EXPECT_FALSE(v.stalled);
  EXPECT_TRUE(has_guard(v, "warm-up"));
  EXPECT_EQ(p.restarts(), 1u);
}

// Time as the job lived it (issue 30): a job printing a step a second, read every 5 s, with its
// step lines stamped in its own zone, over a fall-back night or across a step of the node's wall
// clock. While steps come it is never stalled; once they stop, it is after the threshold.
class TimeAsTheJobLivedIt : public ::testing::Test {
 protected:
  TimeAsTheJobLivedIt() : p(fresh_progress()) {}
  static LiveProgress fresh_progress() {
    test::use_source_rules();
    return LiveProgress(test::shipped_catalog());
  }

  // The node's clocks `s` seconds into the job: the monotonic clock counts from the node's boot,
  // the wall clock from kT0, stepped by `wall_step` from second `step_at` on.
  LiveInstant node(int64_t s) const {
    return LiveInstant{kT0 + s * kSec + (s >= step_at ? wall_step : 0), kBoot + s * kSec};
  }

  // The job prints a step every second until second `until`, each line stamped by `stamp` (from
  // the node's wall clock when it printed; "" for none); the follower reads every 5 s. Returns
  // the first verdict that said stalled while the steps came (none: nullopt).
  std::optional<StallVerdict> steps_until(int64_t until,
                                          const std::function<std::string(int64_t)>& stamp) {
    for (int64_t read = last_read + 5; read <= until; read += 5) {
      std::string lines;
      for (; printed < read; ++printed) {
        const std::string s = stamp(node(printed).wall_usec);
        lines += "0: " + (s.empty() ? "" : "[" + s + "] ") +
                 "completed step: " + std::to_string(printed) + ", loss: 9.100\n";
      }
      log.arrive(p, lines, node(read));
      last_read = read;
      const StallVerdict v = judge_stall(p, node(read), low_min);
      if (v.stalled) return v;
    }
    return std::nullopt;
  }

  // After the steps stop: stalled `after` seconds past the last read (polled every 5 s)?
  bool stalled_after(int64_t after) {
    for (int64_t t = last_read + 5; t < last_read + after; t += 5)
      log.read_nothing(node(t));
    return judge_stall(p, node(last_read + after), low_min).stalled;
  }

  static constexpr int64_t kBoot = 5000 * kSec;
  static constexpr int64_t kHour = 3600 * kSec;
  GrowingLog log;
  LiveProgress p;
  LiveStallPolicy low_min{10, 60, 1800};
  int64_t printed = 0;
  int64_t last_read = 0;
  int64_t wall_step = 0;
  int64_t step_at = INT64_MAX;
};

// "2026-11-28 10:00:00,000" for a time: a stamp without a zone, as Python's logging prints it.
std::string naive(int64_t usec) {
  std::string s = format_utc(usec, true);  // 2026-11-28T10:00:00.000000Z
  s[10] = ' ';
  s.resize(23);
  s[19] = ',';
  return s;
}

TEST_F(TimeAsTheJobLivedIt, AJobWithTzEightHoursWestOfTheNodeIsNeverFlaggedWhileItSteps) {
  const auto v = steps_until(180, [](int64_t wall) { return naive(wall - 8 * kHour); });
  EXPECT_FALSE(v) << v->basis;
  EXPECT_FALSE(stalled_after(55));
  EXPECT_TRUE(stalled_after(65)) << "a real silence is still flagged";
}

TEST_F(TimeAsTheJobLivedIt, AJobWithTzEightHoursEastOfTheNodeIsNeverFlaggedWhileItSteps) {
  const auto v = steps_until(180, [](int64_t wall) { return naive(wall + 8 * kHour); });
  EXPECT_FALSE(v) << v->basis;
  EXPECT_FALSE(stalled_after(55));
  EXPECT_TRUE(stalled_after(65));
}

TEST_F(TimeAsTheJobLivedIt, AFallBackNightIsNeverASilence) {
  // The job's zone is 7 h behind the node until 90 s in, then falls back to 8 h: its stamps
  // repeat the hour.
  static constexpr int64_t kFallBack = kT0 + 90 * kSec;
  const auto v = steps_until(
      300, [](int64_t wall) { return naive(wall - (wall < kFallBack ? 7 : 8) * kHour); });
  EXPECT_FALSE(v) << v->basis;
  EXPECT_TRUE(stalled_after(65));
}

TEST_F(TimeAsTheJobLivedIt, TheNodesWallClockSteppingForwardByHoursIsNeverASilence) {
  wall_step = 5 * kHour;
  step_at = 92;  // between two reads
  // Lines without stamps (dated by their reads), then with the node's own naive time.
  auto v = steps_until(150, [](int64_t) { return std::string(); });
  EXPECT_FALSE(v) << v->basis;
  v = steps_until(300, [](int64_t wall) { return naive(wall); });
  EXPECT_FALSE(v) << v->basis;
  EXPECT_FALSE(stalled_after(55));
  const StallVerdict silent = judge_stall(p, node(last_read + 65), low_min);
  EXPECT_TRUE(silent.stalled);
  EXPECT_DOUBLE_EQ(silent.silence_s, 65);
  // The last step as the wall clock reads now (stepped): for display only.
  EXPECT_EQ(silent.last_step_usec, node(last_read).wall_usec);
}

TEST_F(TimeAsTheJobLivedIt, AStepOfTheWallClockDuringASilenceNeitherHidesNorStretchesIt) {
  wall_step = -2 * kHour;  // stepped back while the job is silent
  step_at = 100;
  const auto v = steps_until(60, [](int64_t wall) { return naive(wall); });
  EXPECT_FALSE(v) << v->basis;
  EXPECT_FALSE(stalled_after(55));
  EXPECT_TRUE(stalled_after(65));
}

}  // namespace
}  // namespace triage
