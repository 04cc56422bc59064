// Every Slurm command names exactly one job attempt (issue 30, case 1): an array task as
// <ArrayJobId>_<ArrayTaskId>, a het job through its leader, and nothing at all when the facts
// cannot say which task (agent/slurm/job_ref.h); whether the job Slurm shows is still the analysed
// attempt (agent/requeue/attempt_check.h); and where the array fields come from
// (agent/node/job_table.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/job_end/job_end.h"
#include "agent/live/hang_commands.h"
#include "agent/live/live_decision.h"
#include "agent/node/job_table.h"
#include "agent/requeue/attempt_check.h"
#include "agent/slurm/job_ref.h"
#include "agent/slurm/slurm_commands.h"
#include "common/error.h"
#include "common/model.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using Argv = std::vector<std::string>;

JobFacts plain_job() {
  JobFacts f;
  f.job_id = 4242;
  return f;
}

// Task 2 of array 4240, which Slurm gave its own id 4243 when it started.
JobFacts array_task() {
  JobFacts f;
  f.job_id = 4243;
  f.array_job_id = 4240;
  f.array_task_id = 2;
  return f;
}

TEST(JobRef, APlainJobIsItsId) {
  const JobRef r = job_ref(plain_job());
  EXPECT_EQ(r.job_id, 4242u);
  EXPECT_EQ(cancel_job_argv(r), (Argv{"scancel", "4242"}));
  EXPECT_EQ(read_comment_argv(r, CommentField::kAdminComment),
            (Argv{"sacct", "-n", "-X", "-P", "-j", "4242", "-o", "AdminComment"}));
}

TEST(JobRef, AnArrayTaskIsNamedByItsArrayAndIndexInEveryCommand) {
  const JobRef r = job_ref(array_task());
  EXPECT_EQ(r.job_id, 4243u) << "logs and state files keep the task's own id";
  EXPECT_EQ(cancel_job_argv(r), (Argv{"scancel", "4240_2"}));
  EXPECT_EQ(requeue_job_argv(r), (Argv{"scontrol", "requeue", "4240_2"}));
  EXPECT_EQ(set_admin_comment_argv(r, "triage=hang"),
            (Argv{"scontrol", "update", "JobId=4240_2", "AdminComment=triage=hang"}));
  EXPECT_EQ(requeue_hold_argv(r), (Argv{"scontrol", "requeuehold", "4240_2"}));
  EXPECT_EQ(exclude_nodes_argv(r, "gpu-a017"),
            (Argv{"scontrol", "update", "JobId=4240_2", "ExcNodeList=gpu-a017"}));
  EXPECT_EQ(release_argv(r), (Argv{"scontrol", "release", "4240_2"}));
  EXPECT_EQ(read_comment_argv(r, CommentField::kComment),
            (Argv{"sacct", "-n", "-X", "-P", "-j", "4240_2", "-o", "Comment"}));
  EXPECT_EQ(write_comment_argv(r, CommentField::kAdminComment, "triage=x"),
            (Argv{"sacctmgr", "-i", "modify", "job", "where", "jobid=4240_2", "set",
                  "AdminComment=triage=x"}));
}

TEST(JobRef, TheTaskWhoseIdIsTheArraysIsStillNamedAsTheTask) {
  // The last task to start keeps the array's id: its bare id is the whole array to Slurm.
  JobFacts f = array_task();
  f.job_id = 4240;
  EXPECT_EQ(cancel_job_argv(job_ref(f)), (Argv{"scancel", "4240_2"}));
}

TEST(JobRef, AnArrayRecordWithoutATaskIdIsRefusedNotGuessed) {
  JobFacts pending = plain_job();
  pending.job_id = 4240;
  pending.array_job_id = 4240;  // slurmctld's meta record of tasks not started yet
  try {
    (void)job_ref(pending);
    FAIL() << "a pending array record names the whole array";
  } catch (const JobRefError& e) {
    EXPECT_NE(std::string(e.what()).find("whole array"), std::string::npos) << e.what();
  }
  JobFacts task_only = plain_job();
  task_only.array_task_id = 3;
  EXPECT_THROW((void)job_ref(task_only), JobRefError);
  EXPECT_THROW((void)job_ref(JobFacts{}), JobRefError) << "job 0";
}

TEST(JobRef, AHetJobIsActedOnThroughItsLeaderAndItsRowAlone) {
  JobFacts leader = plain_job();
  leader.job_id = 4300;
  leader.het_job_id = 4300;
  leader.het_job_offset = 0;
  const JobRef r = job_ref(leader);
  EXPECT_EQ(cancel_job_argv(r), (Argv{"scancel", "4300"}));
  EXPECT_EQ(read_comment_argv(r, CommentField::kAdminComment),
            (Argv{"sacct", "-n", "-X", "-P", "-j", "4300+0", "-o", "AdminComment"}))
      << "slurmdbd reads a bare 4300 as every component's row";
  JobFacts component = leader;
  component.job_id = 4301;
  component.het_job_offset = 1;
  EXPECT_THROW((void)job_ref(component), JobRefError);
}

TEST(JobRef, StateFilesGiveBackOnlyTheFormsJobRefMakes) {
  const JobRef r = job_ref_from_state(4243, "4240_2", "4240_2");
  EXPECT_EQ(release_argv(r), (Argv{"scontrol", "release", "4240_2"}));
  EXPECT_EQ(job_ref_from_state(4300, "4300", "4300+0").accounting, "4300+0");
  EXPECT_THROW((void)job_ref_from_state(4243, "", ""), JobRefError) << "an older agent's entry";
  EXPECT_THROW((void)job_ref_from_state(4243, "4240_2 --full", "4240_2"), JobRefError);
  EXPECT_THROW((void)job_ref_from_state(4243, "4240_", "4240_2"), JobRefError);
  EXPECT_THROW((void)job_ref_from_state(0, "1", "1"), JobRefError);
}

// The analysed attempt: the third run (restart 2) of array task 4240_2, started at 1000 and failed.
JobFacts analysed() {
  JobFacts f = array_task();
  f.restart_count = 2;
  f.start_time = 1000;
  f.state = "FAILED";
  f.source = "slurmctld";
  return f;
}

TEST(AttemptCheck, TheSameAttemptIsTheSameRestartCountAndAKnownStartTime) {
  const JobFacts shown = analysed();  // restart 2, started at 1000
  EXPECT_TRUE(same_attempt(2, 1000, shown));
  EXPECT_FALSE(same_attempt(1, 1000, shown)) << "requeued since";
  EXPECT_FALSE(same_attempt(2, 900, shown)) << "restarted with the same count";
  EXPECT_TRUE(same_attempt(2, 0, shown)) << "a start not known is not compared";
  JobFacts pending = shown;
  pending.start_time = 0;
  EXPECT_TRUE(same_attempt(2, 1000, pending));
  // Both action checks refuse the restart with the same count, each with its own words.
  JobFacts restarted = shown;
  restarted.start_time = 1300;
  EXPECT_NE(attempt_changed(analysed(), restarted), "");
  restarted.state = "RUNNING";
  EXPECT_NE(attempt_mismatch(LiveAttempt{2, 1000}, restarted).find("another attempt"),
            std::string::npos);
}

TEST(AttemptCheck, TheEndedAttemptThatWasAnalysedIsTheSame) {
  JobFacts now = analysed();
  now.name = "spoof Restarts=0 JobState=PENDING ExcNodeList=(null)";
  EXPECT_EQ(attempt_changed(analysed(), now), "") << "a job name is only a name";
}

TEST(AttemptCheck, ARequeueSinceIsAnotherAttempt) {
  JobFacts now = analysed();
  now.restart_count = 3;
  now.state = "PENDING";
  const std::string why = attempt_changed(analysed(), now);
  EXPECT_NE(why.find("restart 3"), std::string::npos) << why;
  EXPECT_NE(why.find("requeued since"), std::string::npos) << why;
}

TEST(AttemptCheck, AnotherStartTimeIsAnotherAttempt) {
  JobFacts now = analysed();
  now.start_time = 1300;
  EXPECT_NE(attempt_changed(analysed(), now).find("started at 1300"), std::string::npos);
  JobFacts from_epilog = analysed();
  from_epilog.source = "epilog";  // the agent's own clock: not comparable with slurmctld's
  from_epilog.start_time = 1001;
  EXPECT_EQ(attempt_changed(from_epilog, analysed()), "");
}

TEST(AttemptCheck, ARunningOrPendingJobIsNotTheEndedAttempt) {
  for (const char* state : {"RUNNING", "PENDING", "SUSPENDED", ""}) {
    JobFacts now = analysed();
    now.state = state;
    EXPECT_NE(attempt_changed(analysed(), now), "") << state;
  }
}

TEST(AttemptCheck, AnotherTaskOrJobIsNotTheAnalysedOne) {
  JobFacts other = analysed();
  other.array_task_id = 1;
  EXPECT_NE(attempt_changed(analysed(), other).find("4240_1"), std::string::npos);
  JobFacts elsewhere = analysed();
  elsewhere.job_id = 4244;
  EXPECT_NE(attempt_changed(analysed(), elsewhere), "");
  JobFacts epilog_only = analysed();
  epilog_only.array_job_id.reset();
  epilog_only.array_task_id.reset();
  EXPECT_EQ(attempt_changed(epilog_only, analysed()), "")
      << "the epilog does not know the array fields on 22.05; slurmctld's record names the task";
}

TEST(JobTableArray, TheBatchStepsArrayFieldsAreKeptAnSrunStepsAreNot) {
  JobTable t;
  t.apply(
      parse_lifecycle(testing::lifecycle(
          "task_start", 4243, "s1",
          {{"step", "0"}, {"pid", 10}, {"task", 0}, {"array_job_id", 1}, {"array_task_id", 9}})),
      1);
  EXPECT_FALSE(t.find(4243)->array_job_id) << "an srun step's come from the user's environment";
  const JobRecord& j = t.apply(parse_lifecycle(testing::lifecycle("task_start", 4243, "s2",
                                                                  {{"step", "batch"},
                                                                   {"pid", 11},
                                                                   {"task", 0},
                                                                   {"array_job_id", 4240},
                                                                   {"array_task_id", 2}})),
                               2);
  EXPECT_EQ(j.array_job_id, 4240u);
  EXPECT_EQ(j.array_task_id, 2u);
  const JobFacts f = facts_from_epilog(j, "node1");
  EXPECT_EQ(cancel_job_argv(job_ref(f)), (Argv{"scancel", "4240_2"}));
  EXPECT_THROW(
      parse_lifecycle(testing::lifecycle("job_end", 4243, "s3", {{"array_task_id", 1ull << 33}})),
      InputError);
}

TEST(JobFactsJson, TheArrayAndHetFieldsTravelInTheEvidence) {
  JobFacts f = array_task();
  f.het_job_id = 7;
  f.het_job_offset = 0;
  const JobFacts back = job_facts_from_json(nlohmann::json(f), "test");
  EXPECT_EQ(back.array_job_id, 4240u);
  EXPECT_EQ(back.array_task_id, 2u);
  EXPECT_EQ(back.het_job_id, 7u);
  EXPECT_EQ(back.het_job_offset, 0u);
  EXPECT_FALSE(nlohmann::json(plain_job()).contains("array_job_id")) << "absent, not null";
}

}  // namespace
}  // namespace triage::agent
