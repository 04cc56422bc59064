// The run-context stage alone: Ray's facts and the log lines shown for an unexplained end.
#include "analyzer/run_context.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

TEST(RayInfo, RayWithoutAPrometheusPortUsesTheDefaultAndIsLiveWhileHanging) {
  LogFacts facts;
  facts.ray_enabled = true;
  const RayInfo ray = ray_info(facts, kStatusHanging, false);
  EXPECT_TRUE(ray.enabled);
  EXPECT_EQ(ray.prometheus_port, 9190);
  EXPECT_EQ(ray.prometheus_port_source, "default");
  EXPECT_TRUE(ray.live);
  EXPECT_FALSE(ray_info(facts, kStatusFailed, true).live);
  EXPECT_FALSE(ray_info(LogFacts{}, kStatusRunning, false).enabled);
}

std::vector<LineCopy> tail_of(int n) {
  std::vector<LineCopy> tail(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i)
    tail[static_cast<size_t>(i)].text = "line " + std::to_string(i + 1);
  return tail;
}

TEST(LastLinesShown, AnUnexplainedEndShowsTheLastEightLines) {
  const auto& cat = test::shipped_catalog();
  const auto shown = last_lines_shown(tail_of(12), kStatusUnknown, "", cat);
  ASSERT_EQ(shown.size(), 8u);
  EXPECT_EQ(shown.front().text, "line 5");
  EXPECT_EQ(shown.back().text, "line 12");
  EXPECT_EQ(last_lines_shown(tail_of(3), kStatusCancelled, "unknown-death", cat).size(), 3u);
  EXPECT_TRUE(last_lines_shown(tail_of(12), kStatusFailed, "oom-host", cat).empty());
}

}  // namespace
}  // namespace triage
