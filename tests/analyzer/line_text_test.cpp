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
  EXPECT_EQ(lt.text, "Traceback (most recent call last):");
}

// torch writes "[rankN]: " before each line Python printed: the one space is the prefix's, so a
// traceback's exception line opens the text and its frames keep Python's own two-space indent.
TEST(SplitLine, APythonLineUnderTheRankPrefixKeepsItsOwnIndentation) {
  EXPECT_EQ(split_line("[rank0]: RuntimeError: [enforce fail at inline_container.cc:778] . "
                       "PytorchStreamWriter failed writing file data.pkl: file write failed")
                .text,
            "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
            "writing file data.pkl: file write failed");
  EXPECT_EQ(split_line("[rank0]:   File \"/opt/conda/lib/python3.10/site-packages/torch/"
                       "serialization.py\", line 652, in save")
                .text,
            "  File \"/opt/conda/lib/python3.10/site-packages/torch/serialization.py\", line 652, "
            "in save");
}

// Ray's driver relays a worker's lines behind "(Name pid=N) " or "(Name pid=N, ip=A) "
// (python/ray/_private/worker.py, print_worker_logs).
TEST(SplitLine, TakesRaysWorkerPrefixOff) {
  auto lt = split_line(
      "(ActorModelRayActorBOX pid=499400) RuntimeError: [enforce fail at inline_container.cc:778] "
      ". PytorchStreamWriter failed writing file data/0: file write failed");
  EXPECT_EQ(lt.rank, -1);
  EXPECT_EQ(lt.text,
            "RuntimeError: [enforce fail at inline_container.cc:778] . PytorchStreamWriter failed "
            "writing file data/0: file write failed");
  EXPECT_EQ(split_line("(pid=4711) Traceback (most recent call last):").text,
            "Traceback (most recent call last):");
  EXPECT_EQ(split_line("(RayTrainWorker pid=48213, ip=10.1.0.18) [rank3]:   File \"t.py\"").text,
            "  File \"t.py\"");
  EXPECT_EQ(split_line("(RayTrainWorker pid=48213, ip=10.1.0.18) [rank3]: x").rank, 3);
}

TEST(SplitLine, ParenthesesThatAreNotRaysPrefixStay) {
  for (const char* line :
       {"(raylet) Starting agent process", "(1/3) loading shards", "(pid=abc) not a pid",
        "(Trainer pid=12,ip=1.2.3.4) wrong separator", "(see pid=12 for details)no space after"}) {
    EXPECT_EQ(split_line(line).text, line) << line;
  }
}

TEST(SplitLine, PeelsEveryTaskLabelOfALineLabelledTwice) {
  // A task that prints its own "0: " through `srun --label` (the demo's hang-cancel job).
  auto lt = split_line("0: 0: [2026-11-28 03:19:00] completed step: 10, seconds: 0.100");
  EXPECT_EQ(lt.rank, 0);
  EXPECT_EQ(lt.text, "[2026-11-28 03:19:00] completed step: 10, seconds: 0.100");
  lt = split_line("  3:  7: [rank7]: x");
  EXPECT_EQ(lt.rank, 3);  // the outer label is the task srun launched
  EXPECT_EQ(lt.text, "x");
}

// mpirun --tag-output and --timestamp-output, in the forms Open MPI's and PRRTE's
// iof_base_output.c write them; the first line is ucx#2718's, as published.
TEST(SplitLine, TakesMpirunsOutputTagOffAndReadsItsRank) {
  auto lt = split_line(
      "Mon Jul  2 19:35:38 2018[1,520]<stderr>:[clx-hercules-007:20490:0:20490] Caught signal 11 "
      "(Segmentation fault: address not mapped to object at address 0xf8)");
  EXPECT_EQ(lt.rank, 520);
  EXPECT_EQ(lt.text,
            "[clx-hercules-007:20490:0:20490] Caught signal 11 (Segmentation fault: address not "
            "mapped to object at address 0xf8)");
  lt = split_line("[1,3]<stdout>:test-ib-mpijob:1259:1489 [1] NCCL INFO init.cc:668 -> 2");
  EXPECT_EQ(lt.rank, 3);
  EXPECT_EQ(lt.text, "test-ib-mpijob:1259:1489 [1] NCCL INFO init.cc:668 -> 2");
  lt = split_line("Tue Nov 28 03:19:00 2026<stddiag>:a diagnostic");  // timestamp alone: no rank
  EXPECT_EQ(lt.rank, -1);
  EXPECT_EQ(lt.text, "a diagnostic");
  lt = split_line("0: [1,7]<stderr>:x");  // srun's label is the outer one
  EXPECT_EQ(lt.rank, 0);
  EXPECT_EQ(lt.text, "x");
}

TEST(SplitLine, LeavesLookAlikesAlone) {
  EXPECT_EQ(split_line("[1,2]<stdin>: not a tag").text, "[1,2]<stdin>: not a tag");
  EXPECT_EQ(split_line("[2026-11-28 03:19:00] step").text, "[2026-11-28 03:19:00] step");
  EXPECT_EQ(split_line("Mon Jul  2 19:35:38 2018 no tag").text, "Mon Jul  2 19:35:38 2018 no tag");
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
