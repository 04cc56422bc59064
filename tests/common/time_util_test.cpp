#include "common/time_util.h"

#include <gtest/gtest.h>

namespace triage {
namespace {

TEST(Timestamps, ParsesTheShapesLogsPrint) {
  const int64_t base = 1763726401LL * 1000000;  // 2025-11-21T12:00:01Z
  EXPECT_EQ(parse_timestamp_usec("2025-11-21T12:00:01Z"), base);
  EXPECT_EQ(parse_timestamp_usec("2025-11-21 12:00:01"), base);
  EXPECT_EQ(parse_timestamp_usec("2025-11-21 12:00:01,250"), base + 250000);
  EXPECT_EQ(parse_timestamp_usec("2025-11-21T13:00:01.5+01:00"), base + 500000);
  EXPECT_EQ(parse_timestamp_usec("Fri Nov 21 12:00:01 2025"), base);
  EXPECT_FALSE(parse_timestamp_usec("2025-13-21 12:00:01"));
  EXPECT_FALSE(parse_timestamp_usec("yesterday"));
}

TEST(Timestamps, FormatsUtc) {
  EXPECT_EQ(format_utc(1763726401LL * 1000000), "2025-11-21T12:00:01Z");
  EXPECT_EQ(format_utc(1763726401LL * 1000000 + 5, true), "2025-11-21T12:00:01.000005Z");
}

TEST(Clock, CanBePinned) {
  pin_now_usec(42);
  EXPECT_EQ(now_usec(), 42);
  pin_now_usec(std::nullopt);
  EXPECT_GT(now_usec(), 42);
}

}  // namespace
}  // namespace triage
