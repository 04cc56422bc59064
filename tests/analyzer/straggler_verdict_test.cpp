// Slow ranks and a slowing job: each rank's own pace read from the shapes programs print (a
// straggler report quoted from its documentation, Megatron's per-rank timers in the format of
// megatron/core/timers.py, per-rank TFLOP/s on labelled step lines), and the verdicts on generated
// runs: a job that slows by 30% while one node's clocks drop, and an even job with warm-up,
// checkpoint steps and evaluation pauses that must get neither a straggler nor a slowdown.
#include "analyzer/straggler_verdict.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "analyzer/diagnosis.h"
#include "analyzer/report_render.h"
#include "analyzer/slowdown_svg.h"
#include "analyzer/tsdb_handoff.h"
#include "common/time_util.h"
#include "test_support.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = 1795255200;  // 2026-11-21 10:00:00 UTC

// The report NVIDIA-NeMo/Megatron-Bridge docs/training/resiliency.md ("Expected Output") shows for
// nvidia-resiliency-ext's straggler detection, verbatim: 512 ranks, no score below 0.94.
const char* const kBridgeReport =
    "GPU relative performance:\n"
    " Worst performing 5/512 ranks:\n"
    "  Rank=76 Node=h100-001-253-012 Score=0.94\n"
    "  Rank=13 Node=h100-001-010-003 Score=0.94\n"
    "  Rank=45 Node=h100-001-172-026 Score=0.94\n"
    "  Rank=433 Node=h100-004-141-026 Score=0.95\n"
    "  Rank=308 Node=h100-003-263-012 Score=0.95\n"
    " Best performing 5/512 ranks:\n"
    "  Rank=432 Node=h100-004-141-026 Score=0.99\n"
    "  Rank=376 Node=h100-004-005-003 Score=0.98\n"
    "  Rank=487 Node=h100-004-255-026 Score=0.98\n"
    "  Rank=369 Node=h100-004-004-033 Score=0.98\n"
    "  Rank=361 Node=h100-004-004-023 Score=0.98\n"
    "\n"
    "GPU individual performance:\n"
    " Worst performing 5/512 ranks:\n"
    "  Rank=76 Node=h100-001-253-012 Score=0.98\n"
    "  Rank=162 Node=h100-002-042-026 Score=0.98\n"
    "\n"
    " Straggler report processing time: 0.042 sec.\n";

std::string stamp(int64_t sec) {
  return "[" + format_utc(sec * kSec).substr(0, 19).replace(10, 1, " ") + "]";
}

std::string step_line(int rank, int64_t t, int64_t step, double seconds, double tflops) {
  char buf[256];
  (void)std::snprintf(
      buf, sizeof buf,
      "%d: %s completed step: %lld, seconds: %.3f, TFLOP/s/device: %.3f, loss: 2.100\n", rank,
      stamp(t).c_str(), static_cast<long long>(step), seconds, tflops);
  return buf;
}

// A run of `steps` steps on `ranks` ranks: warm-up (a slow first step, then slower early steps),
// a checkpoint save every 50 steps (a step three times as long), an evaluation pause every 100
// steps (announced, between steps), and `seconds_at(step)` as the steady pace; every rank prints
// the same step time (synchronous training) and `tflops_at(rank, step)` as its own TFLOP/s.
template <class Seconds, class Tflops>
std::string run_log(int ranks, int64_t steps, Seconds seconds_at, Tflops tflops_at) {
  std::string log;
  double t = static_cast<double>(kT0);
  for (int64_t s = 0; s < steps; ++s) {
    double sec = s == 0 ? 95.0 : s < 5 ? seconds_at(s) * 1.6 : seconds_at(s);
    if (s > 0 && s % 50 == 0) sec *= 3;  // a synchronous checkpoint save in the step
    t += sec;
    for (int r = 0; r < ranks; ++r)
      log += step_line(r, static_cast<int64_t>(t), s, sec, tflops_at(r, s) * seconds_at(s) / sec);
    if (s > 0 && s % 100 == 0) {
      log += "0: " + stamp(static_cast<int64_t>(t)) + " ***** Running Evaluation *****\n";
      t += 240;  // the evaluation, between two step lines
    }
  }
  return log;
}

TEST(RankRhythm, TheStragglerReportFromTheDocsIsReadAsScoresWithTheirNodes) {
  const auto scan = test::scan_text(kBridgeReport);
  const RankRhythm& r = scan.facts.rhythm;
  ASSERT_EQ(r.scores.windows.size(), 1u);
  const RhythmWindow& w = r.scores.windows[0];
  ASSERT_GT(w.sum.size(), 487u);
  EXPECT_EQ(w.count[76], 1u);  // the relative block only: the individual block repeats rank 76
  EXPECT_DOUBLE_EQ(w.sum[76], 0.94);
  EXPECT_DOUBLE_EQ(w.sum[432], 0.99);
  EXPECT_EQ(w.count[162], 0u);  // listed only under "individual performance"
  EXPECT_EQ(r.reported_node.at(76), "h100-001-253-012");
}

TEST(RankRhythm, ThreeReportsLikeTheDocsNameNoStraggler) {
  const std::string log = std::string(kBridgeReport) + kBridgeReport + kBridgeReport;
  const auto scan = test::scan_text(log);
  EXPECT_EQ(scan.facts.rhythm.scores.windows.size(), 3u);
  EXPECT_TRUE(find_stragglers(scan.facts.rhythm, {}).empty());
}

TEST(RankRhythm, ARankScoredBelowThreeQuartersInThreeReportsInARowIsAStragglerOnItsReportedNode) {
  std::string report = kBridgeReport;
  report.replace(report.find("Rank=76 Node=h100-001-253-012 Score=0.94"), 40,
                 "Rank=76 Node=h100-001-253-012 Score=0.62");
  const auto scan = test::scan_text("0: " + stamp(kT0) + " completed step: 1, seconds: 9.0\n" +
                                    report + report + report);
  const auto st = find_stragglers(scan.facts.rhythm, {});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].rank, 76);
  EXPECT_EQ(st[0].node, "h100-001-253-012");
  EXPECT_DOUBLE_EQ(st[0].relative_speed, 0.62);
  EXPECT_EQ(st[0].basis, "straggler-report-score");
  EXPECT_EQ(since_text(st[0].since_usec, st[0].since_line), "2026-11-21T10:00:00Z");
}

TEST(RankRhythm, TwoLowReportsAreNotYetSustained) {
  std::string low = kBridgeReport;
  low.replace(low.find("Score=0.94"), 10, "Score=0.50");
  const auto scan = test::scan_text(low + low + kBridgeReport + low);
  EXPECT_TRUE(find_stragglers(scan.facts.rhythm, {}).empty());
}

// Megatron's --timing-log-option all, printed by the last rank (megatron/core/timers.py
// _get_all_ranks_time_string): rank 3's compute takes 1.4x the others'.
std::string megatron_timers(int ranks, int slow_rank, double factor) {
  std::string out = "3: times across ranks (ms):\n";
  for (const char* timer : {"forward-backward", "forward-compute", "backward-compute"}) {
    out += std::string("3:   ") + timer + ":\n";
    for (int r = 0; r < ranks; ++r) {
      // forward-backward includes the waits: the same on every rank.
      const double base = std::string(timer) == "forward-backward" ? 900.0 : 300.0;
      const double ms =
          std::string(timer) != "forward-backward" && r == slow_rank ? base * factor : base;
      char buf[64];
      (void)std::snprintf(buf, sizeof buf, "3:      rank %2d: %.2f\n", r, ms);
      out += buf;
    }
  }
  return out +
         "3:  [2026-11-21 10:00:00] iteration 10/100 | elapsed time per iteration (ms): 900\n";
}

TEST(RankRhythm, MegatronPerRankComputeTimersNameTheSlowRankOnItsNodeFromTheTaskLayout) {
  std::string log;
  for (int i = 0; i < 4; ++i)
    log += megatron_timers(4, 3, 1.4);
  const auto scan = test::scan_text(log);
  ASSERT_EQ(scan.facts.rhythm.compute.windows.size(), 4u);
  const auto st = find_stragglers(scan.facts.rhythm, {{0, "n1"}, {1, "n1"}, {2, "n2"}, {3, "n2"}});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].rank, 3);
  EXPECT_EQ(st[0].node, "n2");
  EXPECT_NEAR(st[0].relative_speed, 1 / 1.4, 0.01);
  EXPECT_EQ(st[0].basis, "megatron-compute-time");
}

TEST(RankRhythm, MegatronTimersOfEvenRanksNameNone) {
  std::string log;
  for (int i = 0; i < 5; ++i)
    log += megatron_timers(8, 3, 1.05);
  EXPECT_TRUE(find_stragglers(test::scan_text(log).facts.rhythm, {}).empty());
}

TEST(RankRhythm, PerRankTflopsOnLabelledStepLinesFindTheSlowRankFromItsStepOn) {
  const std::string log = run_log(
      8, 200, [](int64_t) { return 10.0; },
      [](int r, int64_t s) { return r == 5 && s >= 120 ? 120.0 : 170.0; });
  const auto scan = test::scan_text(log);
  const auto st = find_stragglers(scan.facts.rhythm, {{5, "node-b"}});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].rank, 5);
  EXPECT_EQ(st[0].node, "node-b");
  EXPECT_NEAR(st[0].relative_speed, 120.0 / 170.0, 0.02);
  EXPECT_EQ(st[0].basis, "per-rank-tflops");
}

// A long run (12,000 steps of 4 ranks) outgrows 1,024 windows of ten steps, so its windows widen
// to twenty; each then reads its first ten steps only, as many samples as a short run's window.
// Rank 2 computes at 0.70 of the others from step 6,000: still found, from that step.
TEST(RankRhythm, AWidenedWindowReadsItsFirstTenStepsAndTheLateStragglerIsStillFound) {
  std::string log;
  log.reserve(size_t{12000} * 4 * 100);
  for (int64_t s = 0; s < 12000; ++s) {
    for (int r = 0; r < 4; ++r)
      log += step_line(r, kT0 + 10 * s, s, 10.0, r == 2 && s >= 6000 ? 119.0 : 170.0);
  }
  const auto scan = test::scan_text(log);
  const RhythmSeries& t = scan.facts.rhythm.tflops;
  EXPECT_EQ(t.rounds_per_window, 2 * kStepsPerRhythmWindow);
  EXPECT_LE(t.windows.size(), kMaxRhythmWindows);
  // Windows merged before the widening hold twice ten; the ones opened after it, ten.
  EXPECT_EQ(t.windows.back().count[2], static_cast<uint32_t>(kStepsPerRhythmWindow));
  for (const RhythmWindow& w : t.windows)
    EXPECT_LE(w.count[0], static_cast<uint32_t>(2 * kStepsPerRhythmWindow));
  const auto st = find_stragglers(scan.facts.rhythm, {});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].rank, 2);
  EXPECT_NEAR(st[0].relative_speed, 0.70, 0.01);
  EXPECT_EQ(st[0].since_usec, (kT0 + int64_t{10} * 6000) * kSec);

  std::string even;
  even.reserve(log.size());
  for (int64_t s = 0; s < 12000; ++s) {
    for (int r = 0; r < 4; ++r)
      even += step_line(r, kT0 + 10 * s, s, 10.0, 170.0 + r);
  }
  EXPECT_TRUE(find_stragglers(test::scan_text(even).facts.rhythm, {}).empty());
}

// A timer block's lines are read in one go up to the next line that holds a trigger: an
// out-of-memory error printed right after the block is still found, on its own line, and the
// block's compute times are all kept.
TEST(RankRhythm, AnErrorRightAfterATimerBlockIsStillFoundAndTheBlockIsKept) {
  std::string block = megatron_timers(4, 3, 1.4);
  block.erase(block.rfind("3:  [2026"));  // the block without Megatron's iteration line after it
  const std::string log = block +
                          "3: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 "
                          "GiB. GPU 0 has a total capacity of 79.11 GiB\n";
  const auto scan = test::scan_text(log);
  const RhythmSeries& c = scan.facts.rhythm.compute;
  ASSERT_EQ(c.windows.size(), 1u);
  ASSERT_EQ(c.windows[0].count.size(), 4u);
  EXPECT_DOUBLE_EQ(c.windows[0].sum[3], 2 * 300.0 * 1.4);
  EXPECT_DOUBLE_EQ(c.windows[0].sum[0], 600.0);
  const int oom = test::shipped_catalog().index_of("oom-gpu");
  ASSERT_GE(oom, 0);
  const auto& m = scan.classes[static_cast<size_t>(oom)];
  ASSERT_EQ(m.count, 1u);
  EXPECT_EQ(m.first[0].line, 17);  // the block's 16 lines, then the error

  // Another rank's error printed into the middle of a timer line (unbuffered stderr): the line
  // reads as a rank's time, and is still looked at for what it says.
  std::string mixed = block;
  const std::string at = "3:      rank  3: 420.00";
  ASSERT_NE(mixed.find(at), std::string::npos);
  mixed.insert(mixed.find(at) + at.size(),
               "[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.");
  const auto interleaved = test::scan_text(mixed);
  const auto& mi = interleaved.classes[static_cast<size_t>(oom)];
  ASSERT_EQ(mi.count, 1u);
  EXPECT_EQ(mi.first[0].line, 11);
}

// Two ranks, one per node (the dev cluster's e2e, tests/e2e/rank_e2e_test.cpp): rank 1 computes at
// 70% of rank 0's pace from step 41. The median of two ranks is their mean, which holds the slow
// rank itself: against it rank 1 was at 0.82 and went unflagged. Against the other ranks' median
// (here rank 0) it is at 0.70, and rank 0 is at 1.43, no straggler.
TEST(RankRhythm, OfTwoRanksTheSlowerIsJudgedAgainstTheOtherNotAgainstTheirMean) {
  const std::string log = run_log(
      2, 80, [](int64_t) { return 10.0; },
      [](int r, int64_t s) { return r == 1 && s >= 41 ? 119.9 : 171.3; });
  const auto scan = test::scan_text(log);
  const auto st = find_stragglers(scan.facts.rhythm, {{0, "host1"}, {1, "host2"}});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].rank, 1);
  EXPECT_EQ(st[0].node, "host2");
  EXPECT_NEAR(st[0].relative_speed, 0.70, 0.01);
}

// The other ranks' median is the median of the ones left when the rank is taken out, for an odd
// and an even number of others, with ties: the slowest of five at 0.70 of four even ones, and of
// four ranks, the one at 0.70 against three others of 100, 100 and 120 (median 100).
TEST(RankRhythm, EachRankIsJudgedAgainstTheMedianOfTheOthers) {
  const auto flagged = [](const std::vector<double>& tflops) {
    std::string log;
    for (int64_t s = 0; s < 40; ++s) {
      for (size_t r = 0; r < tflops.size(); ++r)
        log += step_line(static_cast<int>(r), kT0 + s, s, 10.0, tflops[r]);
    }
    return find_stragglers(test::scan_text(log).facts.rhythm, {});
  };
  const auto five = flagged({170, 170, 119, 170, 170});
  ASSERT_EQ(five.size(), 1u);
  EXPECT_EQ(five[0].rank, 2);
  EXPECT_NEAR(five[0].relative_speed, 0.70, 0.01);
  const auto four = flagged({100, 70, 120, 100});
  ASSERT_EQ(four.size(), 1u);
  EXPECT_EQ(four[0].rank, 1);
  EXPECT_NEAR(four[0].relative_speed, 0.70, 0.01);
  EXPECT_TRUE(flagged({100, 80}).empty()) << "0.80 of the other is above the 0.75 cut";
}

// --- The job's step time
// --------------------------------------------------------------------------

// However a rank prints its TFLOP/s, the value read is the one std::from_chars reads (the common
// short forms take a faster path that must agree with it to the last bit), and what is not one
// number is not read.
TEST(RankRhythm, EachRanksTflopsIsReadExactlyAsFromCharsReadsItOrNotAtAll) {
  const std::vector<std::string> values = {"171.009",
                                           "171",
                                           ".5",
                                           "5.",
                                           "0.1",
                                           "1e3",
                                           "1.2.3",
                                           "1234567890123.45",
                                           "99999999999999999.5",
                                           "0.30000000000000004"};
  std::string log;
  for (size_t r = 0; r < values.size(); ++r)
    log += std::to_string(r) + ": " + stamp(kT0) +
           " completed step: 7, seconds: 9.0, TFLOP/s: " + values[r] + ", loss: 2.1\n";
  const auto scan = test::scan_text(log);
  const RhythmSeries& s = scan.facts.rhythm.tflops;
  ASSERT_EQ(s.windows.size(), 1U);
  const RhythmWindow& w = s.windows.front();
  const auto read = [&](size_t rank) -> std::optional<double> {
    if (rank >= w.count.size() || w.count[rank] == 0) return std::nullopt;
    return w.sum[rank];
  };
  EXPECT_EQ(read(0), 171.009);
  EXPECT_EQ(read(1), 171.0);
  EXPECT_EQ(read(2), 0.5);
  EXPECT_EQ(read(3), 5.0);
  EXPECT_EQ(read(4), 0.1);
  EXPECT_EQ(read(5), 1.0);  // "1e3": the number is "1", the "e3" after it is not part of it
  EXPECT_EQ(read(6), std::nullopt);  // "1.2.3" is no number
  EXPECT_EQ(read(7), std::nullopt);  // over 1e12 TFLOP/s is not a measurement
  EXPECT_EQ(read(8), std::nullopt);
  EXPECT_EQ(read(9), 0.30000000000000004);
}

TEST(Slowdown, EvenRanksWithWarmUpCheckpointsAndEvaluationsGetNoStragglerAndNoSlowdown) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return 10.0 + 0.3 * static_cast<double>(s % 7) / 7; },
      [](int r, int64_t) { return 170.0 + r * 0.5; });
  const auto scan = test::scan_text(log);
  EXPECT_EQ(scan.facts.step_times.size(), 400u);
  const auto st = find_stragglers(scan.facts.rhythm, {});
  EXPECT_TRUE(st.empty());
  EXPECT_FALSE(find_slowdown(scan.facts.step_times, st, {}).found);
}

std::vector<NodeClockSeries> clocks_with_drop(const std::string& slow, int64_t from_sec) {
  std::vector<NodeClockSeries> out;
  for (const std::string host : {"node-a", "node-b", "node-c"}) {
    NodeClockSeries n{host, {}};
    for (int64_t t = kT0; t < kT0 + int64_t{6} * 3600; t += 30) {
      const bool low = host == slow && t >= from_sec;
      n.samples.emplace_back(t * kSec, low ? 1290.0 : 1980.0 - static_cast<double>(t % 60) / 6);
    }
    out.push_back(std::move(n));
  }
  return out;
}

TEST(Slowdown, StepTimeUpThirtyPercentWhileOneNodesClocksDropNamesThatNode) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; }, [](int, int64_t) { return 170.0; });
  const auto scan = test::scan_text(log);
  const auto& steps = scan.facts.step_times;
  int64_t t220 = 0;
  for (const auto& s : steps)
    if (s.step == 220) t220 = s.time_usec / kSec;
  ASSERT_GT(t220, 0);
  const Slowdown sd = find_slowdown(steps, {}, clocks_with_drop("node-b", t220 - 13));
  ASSERT_TRUE(sd.found);
  EXPECT_NEAR(sd.from_s, 10.0, 0.01);
  EXPECT_NEAR(sd.to_s, 13.0, 0.01);
  EXPECT_EQ(sd.since_step, 220);
  EXPECT_EQ(sd.node, "node-b");
  EXPECT_NE(sd.basis.find("MHz to 1290 MHz"), std::string::npos) << sd.basis;
}

TEST(Slowdown, WithoutClocksOrStragglersTheSlowdownNamesNoNode) {
  const std::string log = run_log(
      4, 300, [](int64_t s) { return s >= 160 ? 11.5 : 10.0; }, [](int, int64_t) { return 170.0; });
  const auto scan = test::scan_text(log);
  const Slowdown sd = find_slowdown(scan.facts.step_times, {}, {});
  ASSERT_TRUE(sd.found);
  EXPECT_EQ(sd.since_step, 160);
  EXPECT_EQ(sd.node, "");
}

// A week-long run: 20,000 steps of about 10 s (each window's steps jitter by +-4%), 20% slower
// from step 15,000 on. Thousands of windows: the decision must still find the step, and the
// earlier windows' median must be the same as a fresh median of all of them would be.
TEST(Slowdown, ALateSlowdownInAWeekLongRunIsFoundAtItsStep) {
  std::vector<StepPace> steps;
  int64_t t = kT0 * kSec;
  for (int64_t s = 1; s <= 20000; ++s) {
    const double jitter = (s % 3 == 0 ? 0.96 : s % 3 == 1 ? 1.04 : 1.0);
    const double secs = (s >= 15000 ? 12.0 : 10.0) * jitter;
    t += static_cast<int64_t>(secs * 1e6);
    steps.push_back(StepPace{s, secs, t, s + 100});
  }
  const Slowdown sd = find_slowdown(steps, {}, {});
  ASSERT_TRUE(sd.found);
  EXPECT_EQ(sd.since_step, 15000);
  EXPECT_NEAR(sd.from_s, 10.0, 0.01);
  EXPECT_NEAR(sd.to_s, 12.0, 0.01);
}

// The earlier windows' median over an even number of windows is the mean of the middle two: here
// 11 s and 9 s windows alternate for ten windows, so only with all ten behind it is the median
// 10 s and the bar 11 s, which the later windows at 11.5 s clear (with nine behind, the median is
// 11 s and the ninth window, at 9 s, is still ahead).
TEST(Slowdown, AnEvenNumberOfEarlierWindowsTakesTheMeanOfTheMiddleTwo) {
  std::vector<StepPace> steps;
  int64_t t = kT0 * kSec;
  for (int64_t s = 1; s <= 205; ++s) {
    const int64_t w = (s - 6) / 10;  // the window, after five warm-up steps
    const double secs = s <= 5 ? 10.0 : w < 10 ? (w % 2 == 0 ? 11.0 : 9.0) : 11.5;
    t += static_cast<int64_t>(secs * 1e6);
    steps.push_back(StepPace{s, secs, t, s});
  }
  const Slowdown sd = find_slowdown(steps, {}, {});
  ASSERT_TRUE(sd.found);
  EXPECT_NEAR(sd.from_s, 10.0, 1e-9);
  EXPECT_NEAR(sd.to_s, 11.5, 1e-9);
  EXPECT_EQ(sd.since_step, 106);
}

TEST(Slowdown, ASlowStretchThatRecoversIsNotALastingSlowdown) {
  const std::string log = run_log(
      4, 300, [](int64_t s) { return s >= 100 && s < 180 ? 13.0 : 10.0; },
      [](int, int64_t) { return 170.0; });
  const auto scan = test::scan_text(log);
  EXPECT_FALSE(find_slowdown(scan.facts.step_times, {}, {}).found);
}

TEST(Slowdown, ANinePercentShiftIsBelowGreyhoundsTenPercent) {
  const std::string log = run_log(
      4, 300, [](int64_t s) { return s >= 150 ? 10.9 : 10.0; }, [](int, int64_t) { return 170.0; });
  EXPECT_FALSE(find_slowdown(test::scan_text(log).facts.step_times, {}, {}).found);
}

TEST(Slowdown, WhenOnlyTheClocksOfTwoNodesDropTheStragglerNodeDecides) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; },
      [](int r, int64_t s) { return r == 6 && s >= 215 ? 120.0 : 170.0; });
  const auto scan = test::scan_text(log);
  const auto st = find_stragglers(scan.facts.rhythm, {{6, "node-c"}});
  ASSERT_EQ(st.size(), 1u);
  auto clocks = clocks_with_drop("node-b", kT0);  // node-b was low all along: no drop at the time
  const Slowdown sd = find_slowdown(scan.facts.step_times, st, clocks);
  ASSERT_TRUE(sd.found);
  EXPECT_EQ(sd.node, "node-c");
  EXPECT_NE(sd.basis.find("rank 6"), std::string::npos) << sd.basis;
}

// --- In the report ----------------------------------------------------------------------------

TEST(StragglerReport, TriageJsonCarriesStragglersAndSlowdownAsTheIssueNamesThem) {
  Triage t;
  t.stragglers.push_back(Straggler{3, "node-b", 0.7142, (kT0 + 60) * kSec, 10, "per-rank-tflops"});
  t.slowdown.found = true;
  t.slowdown.from_s = 10.0;
  t.slowdown.to_s = 13.004;
  t.slowdown.since_step = 220;
  t.slowdown.since_usec = (kT0 + 2400) * kSec;
  t.slowdown.node = "node-b";
  t.slowdown.basis = "its GPU clocks fell from 1980 MHz to 1290 MHz at that time";
  const nlohmann::json j = triage_to_json(t);
  EXPECT_EQ(j["stragglers"], nlohmann::json::parse(R"([{"rank": 3, "node": "node-b",
      "relative_speed": 0.71, "since": "2026-11-21T10:01:00Z", "basis": "per-rank-tflops"}])"));
  EXPECT_EQ(j["slowdown"], nlohmann::json::parse(R"({"from_s": 10.0, "to_s": 13.0,
      "since": "2026-11-21T10:40:00Z", "node": "node-b"})"));
  const std::string md = render_markdown(t);
  EXPECT_NE(
      md.find("**Slowdown:** steady step time rose from 10.00 s to 13.00 s (+30%) at step 220"),
      std::string::npos)
      << md;
  EXPECT_NE(md.find("| 3 | node-b | 0.71 | 2026-11-21T10:01:00Z | ` per-rank-tflops ` |"),
            std::string::npos)
      << md;
}

TEST(StragglerReport, AnEvenJobHasAnEmptyListAndANullSlowdown) {
  const nlohmann::json j = triage_to_json(Triage{});
  EXPECT_EQ(j["stragglers"], nlohmann::json::array());
  EXPECT_TRUE(j["slowdown"].is_null());
  EXPECT_EQ(render_markdown(Triage{}).find("Slow ranks"), std::string::npos);
}

// --- Full mode: the TSDB's clocks and the pictures
// ------------------------------------------------

tsdb::TsdbResult tsdb_with_clocks(const std::vector<NodeClockSeries>& clocks) {
  tsdb::TsdbResult r;
  r.available = true;
  r.timeline.start = static_cast<double>(kT0);
  r.timeline.end = static_cast<double>(kT0 + int64_t{6} * 3600);
  for (const auto& n : clocks) {
    tsdb::TimelineSeries s;
    s.name = n.host;
    for (const auto& [usec, mhz] : n.samples)
      s.points.push_back({static_cast<double>(usec) / 1e6, mhz});
    r.timeline.clock.push_back(std::move(s));
  }
  return r;
}

TEST(SlowdownFullMode, TheTsdbClocksOfOneThrottlingNodeNameTheSlowdownTheLogAloneLeftUnplaced) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; }, [](int, int64_t) { return 170.0; });
  const auto scan = test::scan_text(log);
  Triage t;
  t.step_times = scan.facts.step_times;
  t.slowdown = find_slowdown(t.step_times, {}, {});
  ASSERT_TRUE(t.slowdown.found);
  ASSERT_EQ(t.slowdown.node, "");
  attach_tsdb_result(t, tsdb_with_clocks(clocks_with_drop("node-c", t.slowdown.since_usec / kSec)));
  EXPECT_EQ(t.slowdown.node, "node-c");
  EXPECT_EQ(triage_to_json(t)["slowdown"]["node"], "node-c");
}

TEST(SlowdownFullMode, ClocksThatHeldStillLeaveTheSlowdownUnplaced) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; }, [](int, int64_t) { return 170.0; });
  Triage t;
  t.step_times = test::scan_text(log).facts.step_times;
  t.slowdown = find_slowdown(t.step_times, {}, {});
  attach_tsdb_result(t, tsdb_with_clocks(clocks_with_drop("nobody", kT0)));
  EXPECT_TRUE(t.slowdown.found);
  EXPECT_EQ(t.slowdown.node, "");
}

TEST(SlowdownPictures, TheStepTimePictureMarksTheSlowdownAndTheStripMarksItsNode) {
  const std::string log = run_log(
      8, 400, [](int64_t s) { return s >= 220 ? 13.0 : 10.0; }, [](int, int64_t) { return 170.0; });
  const auto steps = test::scan_text(log).facts.step_times;
  Slowdown sd = find_slowdown(steps, {}, {});
  sd.node = "node-b";
  const std::string svg = render_step_time_svg(steps, sd);
  EXPECT_NE(svg.find("slowdown from 10.0 s to 13.0 s at step 220 (node node-b)"), std::string::npos)
      << svg.substr(0, 600);
  EXPECT_NE(svg.find("<polyline"), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray=\"4 3\""), std::string::npos);  // the slowdown's line

  auto clocks = tsdb_with_clocks(clocks_with_drop("node-b", sd.since_usec / kSec)).timeline;
  clocks.clock.push_back({"<script>", false, {{static_cast<double>(kT0 + 60), 1980.0}}});
  // A control character in a host name would make the file invalid XML 1.0: it is shown as "\xNN".
  clocks.clock.push_back({"bad\x01host\x1b", false, {{static_cast<double>(kT0 + 60), 1980.0}}});
  const std::string strip = render_clock_strip_svg(clocks.clock, clocks.start, clocks.end, sd);
  EXPECT_NE(strip.find("font-weight=\"bold\" fill=\"#d62728\">node-b</text>"), std::string::npos);
  EXPECT_NE(strip.find(">slowdown</text>"), std::string::npos);
  EXPECT_NE(strip.find("&lt;script&gt;"), std::string::npos);
  EXPECT_EQ(strip.find("<script>"), std::string::npos);
  EXPECT_NE(strip.find(">bad\\x01host\\x1b</text>"), std::string::npos);
  EXPECT_EQ(strip.find('\x01'), std::string::npos);
  EXPECT_EQ(strip.find('\x1b'), std::string::npos);
  // A throttled column is dark, a normal one pale.
  EXPECT_NE(strip.find("fill=\"#"), std::string::npos);
}

TEST(SlowdownPictures, NothingToDrawGivesNoPicture) {
  EXPECT_EQ(render_step_time_svg({}, Slowdown{}), "");
  EXPECT_EQ(render_clock_strip_svg({}, 0, 1, Slowdown{}), "");
  EXPECT_EQ(step_time_svg_name("slurm-42.triage.md"), "slurm-42.triage-step-time.svg");
}

}  // namespace
}  // namespace triage
