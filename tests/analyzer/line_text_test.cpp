#include "analyzer/line_text.h"

#include <gtest/gtest.h>

#include "common/time_util.h"
#include "test_support.h"

namespace triage {
namespace {

TEST(SplitLine, TakesTheSrunTaskLabelOff) {
  auto lt = split_line("3: completed step: 1");
  EXPECT_EQ(lt.rank, 3);
  EXPECT_EQ(lt.text, "completed step: 1");
  lt = split_line("  12: padded label");
  EXPECT_EQ(lt.rank, 12);
  EXPECT_EQ(lt.text, "padded label");
}

TEST(SplitLine, TakesThePyTorchRankPrefixOff) {
  auto lt = split_line("[rank5]:[E1121 10:42:01.881 ProcessGroupNCCL.cpp:632] boom");
  EXPECT_EQ(lt.rank, 5);
  EXPECT_EQ(lt.text, "[E1121 10:42:01.881 ProcessGroupNCCL.cpp:632] boom");
  // With both, the srun label names the task.
  lt = split_line("1: [rank9]: Traceback (most recent call last):");
  EXPECT_EQ(lt.rank, 1);
  EXPECT_EQ(lt.text, " Traceback (most recent call last):");
}

TEST(SplitLine, LeavesLookAlikesAlone) {
  EXPECT_EQ(split_line("12:00:01 no label").rank, -1);
  EXPECT_EQ(split_line("3:x").rank, -1);
  EXPECT_EQ(split_line("[rank]: x").rank, -1);
  const auto lt = split_line("text\r");
  EXPECT_EQ(lt.raw, "text");
}

TEST(LeadingTimestamp, ReadsTheShapesJobsPrint) {
  test::use_source_rules();                  // TZ=UTC
  const int64_t t = 1795255200LL * 1000000;  // 2026-11-21 10:00:00 UTC
  EXPECT_EQ(leading_timestamp_usec("2026-11-21 10:00:00,250 - INFO - x"), t + 250000);
  EXPECT_EQ(leading_timestamp_usec("[2026-11-21 10:00:00] completed step: 3"), t);
  EXPECT_EQ(leading_timestamp_usec("2026-11-21T12:00:00+02:00 x"), t);
  EXPECT_EQ(leading_timestamp_usec("2026-11-21T10:00:00.5Z"), t + 500000);
  EXPECT_EQ(leading_timestamp_usec("I1121 10:00:00.000001 2231 file.cc:1] x", 2026), t + 1);
  EXPECT_FALSE(leading_timestamp_usec("completed step: 3"));
  EXPECT_FALSE(leading_timestamp_usec("2026-13-40 99:99:99"));
  EXPECT_FALSE(leading_timestamp_usec("I9999 10:00:00.0 x", 2026));
}

}  // namespace
}  // namespace triage
