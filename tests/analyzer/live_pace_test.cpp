// The pace warning while a job runs (issue 28, part 4): a generated run's log is appended a few
// steps at a time and read chunk by chunk, as the live follower reads it, and the pace is judged
// after every read. A run that slows by 30% is warned about from the slowdown on and stays warned;
// an even run with warm-up, checkpoint steps and evaluation pauses is never warned about; a rank
// that falls behind is warned about while it lags and no longer once it caught up; and what the
// chunks add up to is what one scan of the whole log reads.
#include "analyzer/live_pace.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "analyzer/live_progress.h"
#include "common/time_util.h"
#include "live_log.h"
#include "test_support.h"

namespace triage {
namespace {

using test::GrowingLog;
using test::kSec;
using test::kT0;

std::string stamp(int64_t sec) {
  return "[" + format_utc(sec * kSec).substr(0, 19).replace(10, 1, " ") + "]";
}

// One rank's step line, with its own timestamp, step time and TFLOP/s.
std::string rank_step_line(int rank, int64_t t, int64_t step, double seconds, double tflops) {
  char buf[256];
  (void)std::snprintf(
      buf, sizeof buf,
      "%d: %s completed step: %lld, seconds: %.3f, TFLOP/s/device: %.3f, loss: 2.100\n", rank,
      stamp(t).c_str(), static_cast<long long>(step), seconds, tflops);
  return buf;
}

// A run of 8 ranks, step by step: warm-up (a slow first step, slower early steps), a checkpoint
// save every 50 steps (a step three times as long), an evaluation pause every 100 steps, and
// `seconds_at(step)` as the steady pace; `tflops_at(rank, step)` is each rank's own TFLOP/s.
// Each element is one step's lines (and the evaluation that follows it).
std::vector<std::string> run_steps(int64_t steps, const std::function<double(int64_t)>& seconds_at,
                                   const std::function<double(int, int64_t)>& tflops_at) {
  std::vector<std::string> out;
  double t = static_cast<double>(kT0) / static_cast<double>(kSec);
  for (int64_t s = 0; s < steps; ++s) {
    double sec = s == 0 ? 95.0 : s < 5 ? seconds_at(s) * 1.6 : seconds_at(s);
    if (s > 0 && s % 50 == 0) sec *= 3;
    t += sec;
    std::string lines;
    for (int r = 0; r < 8; ++r)
      lines += rank_step_line(r, static_cast<int64_t>(t), s, sec, tflops_at(r, s));
    if (s > 0 && s % 100 == 0) {
      lines += "0: " + stamp(static_cast<int64_t>(t)) + " ***** Running Evaluation *****\n";
      t += 240;
    }
    out.push_back(std::move(lines));
  }
  return out;
}

double even_pace(int64_t s) {
  return 10.0 + 0.3 * static_cast<double>(s % 7) / 7;
}
double even_tflops(int r, int64_t) {
  return 170.0 + r * 0.5;
}

// Reads the run `per_read` steps at a time, judging the pace after each read; returns each read's
// warning line (its last step first: "<step> <line>").
std::vector<std::pair<int64_t, std::string>> follow(const std::vector<std::string>& steps,
                                                    int64_t per_read, LiveProgress& progress) {
  GrowingLog log;
  std::vector<std::pair<int64_t, std::string>> seen;
  int64_t now = kT0;
  for (size_t s = 0; s < steps.size(); s += static_cast<size_t>(per_read)) {
    std::string text;
    for (size_t i = s; i < std::min(steps.size(), s + static_cast<size_t>(per_read)); ++i)
      text += steps[i];
    now += 60 * kSec;
    log.arrive(progress, text, now);
    const LivePace& pace = progress.pace();
    seen.emplace_back(progress.last_step(), judge_pace(pace.steps(), pace.rhythm()).line);
  }
  return seen;
}

TEST(LivePace, AThirtyPercentSlowdownIsWarnedAboutFromItsStepOnAndStaysWarned) {
  const auto steps = run_steps(
      400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; }, even_tflops);
  LiveProgress progress(test::shipped_catalog());
  const auto seen = follow(steps, 7, progress);
  int64_t first_warned = -1;
  for (const auto& [step, line] : seen) {
    if (first_warned < 0 && !line.empty()) first_warned = step;
    if (first_warned >= 0) EXPECT_NE(line, "") << "the warning cleared at step " << step;
    if (step < 220) EXPECT_EQ(line, "") << "warned before the slowdown, at step " << step;
  }
  ASSERT_GT(first_warned, 220);
  // Early: three windows of ten regular steps after the shift, and a few steps of a read.
  EXPECT_LT(first_warned, 220 + 50);
  const std::string last = seen.back().second;
  EXPECT_NE(last.find("Pace (live): slowdown: step time 10 s -> 13 s since step 220"),
            std::string::npos)
      << last;
  EXPECT_NE(last.find(format_utc(kT0).substr(0, 10)), std::string::npos) << last;  // since when
  EXPECT_NE(last.find("warm-up and pauses left out"), std::string::npos) << last;
  EXPECT_EQ(last.find("straggler"), std::string::npos) << last;  // every rank kept its pace
}

TEST(LivePace, AnEvenRunWithWarmUpCheckpointsAndEvaluationsIsNeverWarnedAbout) {
  const auto steps = run_steps(400, even_pace, even_tflops);
  LiveProgress progress(test::shipped_catalog());
  for (const auto& [step, line] : follow(steps, 3, progress))
    EXPECT_EQ(line, "") << "at step " << step;
}

TEST(LivePace, ARankThatFallsBehindIsWarnedAboutWhileItLagsAndNotOnceItCaughtUp) {
  // Rank 3 runs at 60% of the others' TFLOP/s from step 200 to step 319.
  const auto steps = run_steps(400, even_pace, [](int r, int64_t s) {
    return r == 3 && s >= 200 && s < 320 ? 102.0 : 170.0;
  });
  LiveProgress progress(test::shipped_catalog());
  const auto seen = follow(steps, 5, progress);
  bool warned = false;
  for (const auto& [step, line] : seen) {
    if (step < 200) EXPECT_EQ(line, "") << "at step " << step;
    if (step >= 260 && step < 320) {
      EXPECT_NE(line.find("straggler: rank 3 at 0.60 of the job's pace since"), std::string::npos)
          << "at step " << step << ": " << line;
      EXPECT_NE(line.find("(per-rank-tflops)"), std::string::npos) << line;
      warned = true;
    }
    if (step >= 360) EXPECT_EQ(line, "") << "still warned at step " << step;
  }
  EXPECT_TRUE(warned);
}

TEST(LivePace, TheChunksAddUpToWhatOneScanOfTheWholeLogReads) {
  const auto steps = run_steps(
      300, [](int64_t s) { return s >= 150 ? 12.0 : 10.0; },
      [](int r, int64_t s) { return r == 5 && s >= 100 ? 110.0 : 170.0; });
  LiveProgress progress(test::shipped_catalog());
  (void)follow(steps, 4, progress);
  std::string whole;
  for (const auto& s : steps)
    whole += s;
  const ScanResult scan = test::scan_text(whole);
  const LivePace& pace = progress.pace();
  ASSERT_EQ(pace.steps().size(), scan.facts.step_times.size());
  for (size_t i = 0; i < pace.steps().size(); ++i) {
    EXPECT_EQ(pace.steps()[i].step, scan.facts.step_times[i].step);
    EXPECT_NEAR(pace.steps()[i].seconds, scan.facts.step_times[i].seconds, 1e-9) << i;
    EXPECT_EQ(pace.steps()[i].line, scan.facts.step_times[i].line);
  }
  const Slowdown live = find_slowdown(pace.steps(), {}, {});
  const Slowdown post = find_slowdown(scan.facts.step_times, {}, {});
  ASSERT_TRUE(post.found);
  EXPECT_EQ(live.since_step, post.since_step);
  EXPECT_EQ(live.since_line, post.since_line);
  const auto live_st = find_stragglers(pace.rhythm(), {});
  const auto post_st = find_stragglers(scan.facts.rhythm, {});
  ASSERT_EQ(post_st.size(), 1u);
  ASSERT_EQ(live_st.size(), 1u);
  EXPECT_EQ(live_st[0].rank, post_st[0].rank);
  EXPECT_NEAR(live_st[0].relative_speed, post_st[0].relative_speed, 0.02);
}

TEST(LivePace, ARestartInTheLogStartsTheRunsPaceAfresh) {
  LiveProgress progress(test::shipped_catalog());
  GrowingLog log;
  const auto first = run_steps(
      300, [](int64_t s) { return s >= 150 ? 13.0 : 10.0; }, even_tflops);
  std::string text;
  for (const auto& s : first)
    text += s;
  log.arrive(progress, text, kT0 + 60 * kSec);
  ASSERT_NE(judge_pace(progress.pace().steps(), progress.pace().rhythm()).line, "");
  // The job started over from step 0 (an in-job restart): the new run is in its warm-up.
  const auto again = run_steps(40, even_pace, even_tflops);
  text.clear();
  for (const auto& s : again)
    text += s;
  log.arrive(progress, text, kT0 + 120 * kSec);
  EXPECT_EQ(progress.pace().steps().size(), 40u);
  EXPECT_EQ(judge_pace(progress.pace().steps(), progress.pace().rhythm()).line, "");
}

}  // namespace
}  // namespace triage
