// Node-only stragglers in full mode: the TSDB's per-node GPU core clocks (seed 001's
// hw_gpu_clock_mhz{type="sclk"}, one mean series per host in the timeline) of a job where one node
// throttles from some time on, of an even job, of a brief dip, and of a node whose slow rank the
// log already named.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzer/report_render.h"
#include "analyzer/straggler_verdict.h"
#include "analyzer/tsdb_handoff.h"
#include "common/time_util.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = 1795255200;  // 2026-11-21 10:00:00 UTC

// Hosts sampled every 15 s for two hours at ~1980 MHz with a little jitter; `slow` runs at
// `slow_mhz` from `from_s` to `until_s` seconds into the run.
std::vector<NodeClockSeries> clocks(const std::vector<std::string>& hosts, const std::string& slow,
                                    double slow_mhz, int64_t from_s, int64_t until_s = 7200) {
  std::vector<NodeClockSeries> out;
  for (const std::string& host : hosts) {
    NodeClockSeries n{host, {}};
    for (int64_t s = 0; s < 7200; s += 15) {
      const bool low = host == slow && s >= from_s && s < until_s;
      const double jitter = static_cast<double>((s / 15) % 5) * 4;
      n.samples.emplace_back((kT0 + s) * kSec, low ? slow_mhz : 1980.0 - jitter);
    }
    out.push_back(std::move(n));
  }
  return out;
}

tsdb::TsdbResult tsdb_of(const std::vector<NodeClockSeries>& series) {
  tsdb::TsdbResult r;
  r.available = true;
  r.timeline.start = static_cast<double>(kT0);
  r.timeline.end = static_cast<double>(kT0 + 7200);
  for (const auto& n : series) {
    tsdb::TimelineSeries s;
    s.name = n.host;
    for (const auto& [usec, mhz] : n.samples)
      s.points.push_back({static_cast<double>(usec) / 1e6, mhz});
    r.timeline.clock.push_back(std::move(s));
  }
  return r;
}

TEST(NodeStraggler, OneOfFourNodesThrottlingFromTheHalfHourIsANodeOnlyStraggler) {
  const auto st = find_node_stragglers(
      clocks({"gpu-01", "gpu-02", "gpu-03", "gpu-04"}, "gpu-03", 1290.0, 1800), {});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_FALSE(st[0].rank.has_value());
  EXPECT_EQ(st[0].node, "gpu-03");
  EXPECT_NEAR(st[0].relative_speed, 1290.0 / 1972.0, 0.01);
  EXPECT_EQ(since_text(st[0].since_usec, st[0].since_line), "2026-11-21T10:30:00Z");
  EXPECT_EQ(st[0].basis, "gpu-core-clock");
}

TEST(NodeStraggler, WithTwoNodesTheSlowOneIsMeasuredAgainstTheOther) {
  // 1700 MHz against ~1972 MHz: 0.86, below 0.90; against the two nodes' mean it would be 0.93.
  const auto st = find_node_stragglers(clocks({"n1", "n2"}, "n2", 1700.0, 600), {});
  ASSERT_EQ(st.size(), 1u);
  EXPECT_EQ(st[0].node, "n2");
  EXPECT_NEAR(st[0].relative_speed, 1700.0 / 1972.0, 0.01);
  EXPECT_EQ(since_text(st[0].since_usec, 0), "2026-11-21T10:10:00Z");
}

TEST(NodeStraggler, EvenNodesGiveNone) {
  EXPECT_TRUE(find_node_stragglers(clocks({"n1", "n2", "n3"}, "", 0, 0), {}).empty());
}

TEST(NodeStraggler, AFivePercentDipIsNotMeasurablySlower) {
  EXPECT_TRUE(find_node_stragglers(clocks({"n1", "n2", "n3"}, "n2", 1880.0, 600), {}).empty());
}

TEST(NodeStraggler, TwoMinutesOfLowClocksAreNotSustained) {
  // Two windows of a minute at 1290 MHz (a checkpoint's pause on one node, say): three are needed.
  EXPECT_TRUE(find_node_stragglers(clocks({"n1", "n2", "n3"}, "n2", 1290.0, 600, 720), {}).empty());
  EXPECT_EQ(find_node_stragglers(clocks({"n1", "n2", "n3"}, "n2", 1290.0, 600, 780), {}).size(),
            1u);
}

TEST(NodeStraggler, ANodeWhoseRankTheLogNamedIsNotReportedTwice) {
  Straggler rank3;
  rank3.rank = 3;
  rank3.node = "n2";
  rank3.relative_speed = 0.6;
  EXPECT_TRUE(find_node_stragglers(clocks({"n1", "n2", "n3"}, "n2", 1290.0, 600), {rank3}).empty());
}

TEST(NodeStraggler, OneNodeAloneHasNothingToBeSlowerThan) {
  EXPECT_TRUE(find_node_stragglers(clocks({"n1"}, "n1", 1290.0, 600), {}).empty());
}

TEST(NodeStraggler, AllNodesThrottlingTogetherAreNoStraggler) {
  auto series = clocks({"n1", "n2"}, "", 0, 0);
  for (auto& n : series)
    for (auto& [t, mhz] : n.samples)
      if (t >= (kT0 + 600) * kSec) mhz = 1290.0;
  EXPECT_TRUE(find_node_stragglers(series, {}).empty());
}

TEST(NodeStragglerFullMode, TheTsdbClocksAddANodeOnlyRowToTriageJsonAndTheReport) {
  Triage t;
  Straggler rank5;
  rank5.rank = 5;
  rank5.node = "gpu-01";
  rank5.relative_speed = 0.5;
  rank5.since_line = 120;
  rank5.basis = "per-rank-tflops";
  t.stragglers.push_back(rank5);
  // gpu-01 throttles too, but its rank is already named; gpu-03 throttles with no rank named.
  auto series = clocks({"gpu-01", "gpu-02", "gpu-03", "gpu-04"}, "gpu-03", 1290.0, 1800);
  for (auto& [usec, mhz] : series[0].samples)
    if (usec >= (kT0 + 1800) * kSec) mhz = 1300.0;
  attach_tsdb_result(t, tsdb_of(series));

  const nlohmann::json j = triage_to_json(t)["stragglers"];
  ASSERT_EQ(j.size(), 2u) << j.dump(2);
  EXPECT_EQ(j[0]["rank"], 5);
  EXPECT_TRUE(j[1]["rank"].is_null());
  EXPECT_EQ(j[1]["node"], "gpu-03");
  EXPECT_EQ(j[1]["relative_speed"], 0.65);
  EXPECT_EQ(j[1]["since"], "2026-11-21T10:30:00Z");
  EXPECT_EQ(j[1]["basis"], "gpu-core-clock");

  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("| - | gpu-03 | 0.65 | 2026-11-21T10:30:00Z | ` gpu-core-clock ` |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("A node without a rank: its GPUs' mean core clock"), std::string::npos);
}

TEST(NodeStragglerFullMode, EvenClocksLeaveTheListAsTheLogMadeIt) {
  Triage t;
  attach_tsdb_result(t, tsdb_of(clocks({"gpu-01", "gpu-02"}, "", 0, 0)));
  EXPECT_TRUE(triage_to_json(t)["stragglers"].empty());
}

}  // namespace
}  // namespace triage
