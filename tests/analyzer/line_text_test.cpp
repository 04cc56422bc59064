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

TEST(SplitLine, PeelsEveryTaskLabelOfALineLabelledTwice) {
  // A task that prints its own "0: " through `srun --label` (the demo's hang-cancel job).
  auto lt = split_line("0: 0: [2026-11-28 03:19:00] completed step: 10, seconds: 0.100");
  EXPECT_EQ(lt.rank, 0);
  EXPECT_EQ(lt.text, "[2026-11-28 03:19:00] completed step: 10, seconds: 0.100");
  lt = split_line("  3:  7: [rank7]: x");
  EXPECT_EQ(lt.rank, 3);  // the outer label is the task srun launched
  EXPECT_EQ(lt.text, " x");
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

TEST(TimestampBefore, FindsTheStampBehindALoggingPrefix) {
  test::use_source_rules();                  // TZ=UTC
  const int64_t t = 1795255200LL * 1000000;  // 2026-11-21 10:00:00 UTC
  auto at = [](std::string_view line) {
    const auto stamp = timestamp_before(line, line.find("completed step:"), 2026);
    return stamp ? stamp->usec : -1;
  };
  EXPECT_EQ(at("INFO 2026-11-21 10:00:00,250 trainer: completed step: 4"), t + 250000);
  EXPECT_EQ(at("worker-3 | [2026-11-21T10:00:00Z] completed step: 9"), t);
  EXPECT_EQ(at("trainer.py:88 (2026-11-21 12:00:00+02:00) completed step: 2"), t);
  EXPECT_EQ(at("rank 0: I1121 10:00:00.000001 train.cc:9] completed step: 5"), t + 1);
  // A time after the step marker is part of the message, and digits inside a word are not a stamp.
  EXPECT_EQ(at("trainer: completed step: 3 (eta 2026-11-21 10:00:00)"), -1);
  EXPECT_EQ(at("run12026-11-21 10:00:00 completed step: 1"), -1);
}

}  // namespace
}  // namespace triage
