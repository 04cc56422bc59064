#include "common/slurm_pattern.h"

#include <gtest/gtest.h>

namespace triage {
namespace {

SlurmPatternContext job128() {
  SlurmPatternContext c;
  c.job_id = 128;
  c.user = "alice";
  c.job_name = "llama-70b";
  c.node = "node001";
  c.work_dir = "/home/alice/run";
  return c;
}

TEST(SlurmPattern, TheSeedsOutputLayoutExpandsUnderTheWorkDir) {
  EXPECT_EQ(expand_slurm_pattern("outputs/%j-%x.log", job128()),
            "/home/alice/run/outputs/128-llama-70b.log");
}

TEST(SlurmPattern, EveryBatchTokenHasItsValue) {
  SlurmPatternContext c = job128();
  EXPECT_EQ(expand_slurm_pattern("/o/%u-%N-%n-%t-%s-%J-%%.out", c),
            "/o/alice-node001-0-0-batch-128-%.out");
  c.step = "0";
  EXPECT_EQ(expand_slurm_pattern("/o/%J-%s", c), "/o/128.0-0");
}

TEST(SlurmPattern, ZeroPaddingAppliesToNumbersOnlyAndStopsAtTen) {
  SlurmPatternContext c = job128();
  EXPECT_EQ(expand_slurm_pattern("/o/job%4j.out", c), "/o/job0128.out");
  EXPECT_EQ(expand_slurm_pattern("/o/job%2j-%2t.out", c), "/o/job128-00.out");
  EXPECT_EQ(expand_slurm_pattern("/o/%5x", c), "/o/llama-70b");
  EXPECT_EQ(expand_slurm_pattern("/o/%12j", c), "/o/0000000128");
}

TEST(SlurmPattern, ArrayJobsUseTheMasterIdAndTaskIndex) {
  SlurmPatternContext c = job128();
  c.job_id = 131;
  c.array_job_id = 128;
  c.array_task_id = 3;
  EXPECT_EQ(expand_slurm_pattern("/o/%A_%a.out", c), "/o/128_3.out");
  EXPECT_EQ(expand_slurm_pattern("/o/%A_%3a.out", c), "/o/128_003.out");
  // Not an array: %A is the job id, %a is Slurm's NO_VAL.
  EXPECT_EQ(expand_slurm_pattern("/o/%A_%a.out", job128()), "/o/128_4294967294.out");
}

TEST(SlurmPattern, ABackslashTurnsExpansionOff) {
  EXPECT_EQ(expand_slurm_pattern("/o/\\%j-%x.out", job128()), "/o/%j-%x.out");
  EXPECT_EQ(expand_slurm_pattern("/o/a\\\\b%j", job128()), "/o/a\\b%j");
}

TEST(SlurmPattern, UnknownTokensAndATrailingPercentStayAsWritten) {
  EXPECT_EQ(expand_slurm_pattern("/o/%q%3z%", job128()), "/o/%q%3z%");
  EXPECT_EQ(expand_slurm_pattern("/o/100%", job128()), "/o/100%");
}

TEST(SlurmPattern, AbsolutePatternsIgnoreTheWorkDirAndDefaultsMatchSbatch) {
  EXPECT_EQ(expand_slurm_pattern("/scratch/%j.log", job128()), "/scratch/128.log");
  EXPECT_EQ(expand_slurm_pattern(default_stdout_pattern(false), job128()),
            "/home/alice/run/slurm-128.out");
  EXPECT_EQ(default_stdout_pattern(true), "slurm-%A_%a.out");
  SlurmPatternContext no_dir = job128();
  no_dir.work_dir.clear();
  EXPECT_EQ(expand_slurm_pattern("out/%j", no_dir), "out/128");
}

}  // namespace
}  // namespace triage
