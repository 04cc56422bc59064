// The seed's progress math: 0-indexed steps, steady-state step time, checkpoint arithmetic.
#include "analyzer/progress_projection.h"

#include <gtest/gtest.h>

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;

LogFacts run(int64_t first, int64_t last, double step_seconds, int64_t last_time_s = 100000) {
  LogFacts f;
  f.steps.first_step = first;
  f.steps.last_step = last;
  f.steps.first_seconds = 90;
  f.steps.distinct_steps = static_cast<uint64_t>(last - first + 1);
  f.steps.warm_count = 4;
  f.steps.warm_seconds_sum = 4 * 30.0;  // warm-up steps are slow and must not count
  f.steps.steady_count = static_cast<uint64_t>(std::max<int64_t>(0, last - first - 4));
  f.steps.steady_seconds_sum = step_seconds * static_cast<double>(f.steps.steady_count);
  f.steps.last_time_usec = last_time_s * kSec;
  f.steps.first_time_usec = (last_time_s - 1000) * kSec;
  return f;
}

ProgressProjection project(const LogFacts& f, int64_t now_s = 0) {
  ProgressInput in;
  in.facts = &f;
  in.reference_time_usec = now_s * kSec;
  in.reference_basis = "now";
  return project_progress(in);
}

TEST(Progress, FreshRunWithAPeriodicCheckpoint) {
  LogFacts f = run(0, 316, 10.0);
  f.config.total_steps = 2000;
  f.config.enable_checkpointing = true;
  const ProgressProjection p = project(f, 100000 + 3600);
  EXPECT_EQ(p.start, "fresh");
  EXPECT_EQ(p.steps_this_run, 317);
  EXPECT_NEAR(*p.percent, 317.0 / 2000 * 100, 1e-9);
  EXPECT_DOUBLE_EQ(*p.step_seconds, 10.0);
  EXPECT_EQ(p.checkpoint_period, kDefaultCheckpointPeriod);
  EXPECT_EQ(p.last_periodic_checkpoint, 200);
  EXPECT_EQ(p.progress_lost_steps, 116);
  EXPECT_DOUBLE_EQ(*p.progress_lost_seconds, 1160);
  EXPECT_DOUBLE_EQ(*p.remaining_seconds, (2000 - 1 - 316) * 10.0);
  EXPECT_EQ(p.expected_step, 316 + 360);
  EXPECT_TRUE(p.stalled);
}

TEST(Progress, ARunThatNeverReachedTheCheckpointPeriodLosesEverything) {
  LogFacts f = run(0, 150, 10.0);
  f.config.checkpoint_period = 500;
  const ProgressProjection p = project(f);
  EXPECT_FALSE(p.last_periodic_checkpoint);
  EXPECT_TRUE(p.progress_lost_all);
  EXPECT_EQ(p.progress_lost_steps, 151);
}

TEST(Progress, RestoredRunCountsOnlyCheckpointsItSavedItself) {
  LogFacts f = run(1201, 1745, 11.0);
  f.config.checkpoint_period = 200;
  f.config.total_steps = 6000;
  ProgressProjection p = project(f);
  EXPECT_EQ(p.start, "restored");
  EXPECT_EQ(p.restored_from_step, 1200);
  EXPECT_EQ(p.steps_this_run, 545);
  EXPECT_EQ(p.last_periodic_checkpoint, 1600);
  EXPECT_EQ(p.progress_lost_steps, 145);

  LogFacts g = run(201, 350, 11.0);
  g.config.checkpoint_period = 200;
  p = project(g);
  EXPECT_FALSE(p.last_periodic_checkpoint) << "step 200 was saved by the earlier run";
  EXPECT_EQ(p.resume_step, 200);
  EXPECT_EQ(p.progress_lost_steps, 150);
}

TEST(Progress, AnExplicitRestoreMessageBeatsTheFirstStep) {
  LogFacts f = run(1, 40, 5.0);
  f.restore.restored_step = 0;
  f.restore.line = 12;
  f.restore.source = "log";
  EXPECT_EQ(project(f).restored_from_step, 0);
  LogFacts g = run(0, 40, 5.0);
  RestoreFacts worker;
  worker.fresh = true;
  worker.line = 3;
  worker.source = "ray_logs/s/worker-1.out";
  ProgressInput in;
  in.facts = &g;
  in.worker_restore = &worker;
  const ProgressProjection p = project_progress(in);
  EXPECT_EQ(p.start, "fresh");
  EXPECT_NE(p.start_basis.find("worker-1.out"), std::string::npos);
}

TEST(Progress, CheckpointingDisabledMeansNoResumePoint) {
  LogFacts f = run(0, 900, 2.0);
  f.config.enable_checkpointing = false;
  f.config.checkpoint_period = 100;
  const ProgressProjection p = project(f);
  EXPECT_FALSE(p.checkpoint_period);
  EXPECT_TRUE(p.progress_lost_all);
  EXPECT_EQ(p.progress_lost_steps, 901);
}

TEST(Progress, RecentStepsAreNotAStall) {
  const LogFacts f = run(0, 316, 10.0);
  const ProgressProjection p = project(f, 100000 + 120);
  EXPECT_FALSE(p.stalled);
  EXPECT_FALSE(p.stall_undetermined);
  EXPECT_EQ(p.expected_step, 328);
}

TEST(Progress, WithoutStepTimestampsOnlyAnOldLogMtimeProvesAStall) {
  LogFacts f = run(0, 100, 10.0);
  f.steps.last_time_usec = 0;
  f.steps.first_time_usec = 0;
  ProgressInput in;
  in.facts = &f;
  in.reference_time_usec = 200000 * kSec;
  in.log_mtime_usec = (200000 - 60) * kSec;  // written a minute ago: proves nothing
  ProgressProjection p = project_progress(in);
  EXPECT_FALSE(p.stalled);
  EXPECT_TRUE(p.stall_undetermined);
  in.log_mtime_usec = (200000 - 7200) * kSec;  // nothing written for two hours: stopped
  p = project_progress(in);
  EXPECT_TRUE(p.stalled);
}

TEST(Progress, TheFinalStepIsCompletion) {
  LogFacts f = run(0, 299, 3.0);
  f.config.total_steps = 300;
  const ProgressProjection p = project(f, 100000 + 99999);
  EXPECT_TRUE(p.reached_final_step);
  EXPECT_FALSE(p.stalled);
  EXPECT_DOUBLE_EQ(*p.remaining_seconds, 0);
}

}  // namespace
}  // namespace triage
