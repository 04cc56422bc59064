#include "agent/attribution.h"

#include <gtest/gtest.h>

#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::lifecycle;
using testing::make_event;

constexpr int64_t kSec = 1000000;

// Two jobs on one node: 100 runs 1000..2000 s with rank pid 777; 200 runs 1500..3000 s with
// rank pid 888.
class Attribution : public ::testing::Test {
 protected:
  void SetUp() override {
    apply(lifecycle("job_start", 100, "a1", {{"uid", 1000}, {"time_usec", 1000 * kSec}}));
    apply(lifecycle(
        "task_start", 100, "a2",
        {{"step", "0"}, {"task", 0}, {"rank", 0}, {"pid", 777}, {"time_usec", 1000 * kSec}}));
    apply(lifecycle("task_exit", 100, "a3",
                    {{"step", "0"},
                     {"task", 0},
                     {"rank", 0},
                     {"pid", 777},
                     {"wait_status", 9},
                     {"time_usec", 2000 * kSec}}));
    apply(lifecycle("job_end", 100, "a4", {{"uid", 1000}, {"time_usec", 2000 * kSec}}));
    apply(lifecycle("job_start", 200, "b1", {{"uid", 1001}, {"time_usec", 1500 * kSec}}));
    apply(lifecycle(
        "task_start", 200, "b2",
        {{"step", "0"}, {"task", 0}, {"rank", 0}, {"pid", 888}, {"time_usec", 1500 * kSec}}));
    apply(lifecycle("job_end", 200, "b3", {{"uid", 1001}, {"time_usec", 3000 * kSec}}));
  }
  void apply(const nlohmann::json& m) { jobs.apply(parse_lifecycle(m), 0); }
  std::vector<uint64_t> owners(const KernelEvent& e) {
    std::vector<uint64_t> out;
    AttributionOptions opt;
    opt.grace_usec = 60 * kSec;
    opt.now_usec = 5000 * kSec;
    for (const auto& [id, job] : jobs.jobs()) {
      if (belongs_to_job(e, job, job_window(job), jobs, opt)) out.push_back(id);
    }
    return out;
  }
  JobTable jobs;
};

TEST_F(Attribution, AnOomKillInAJobsCgroupIsThatJobsOnly) {
  KernelEvent oom = make_event("o1", "oom-kill", 1800 * kSec);
  oom.job_id = 200;
  oom.cgroup = "/system.slice/slurmstepd.scope/job_200/step_0/user/task_0";
  EXPECT_EQ(owners(oom), std::vector<uint64_t>{200});
}

TEST_F(Attribution, ARegisteredPidTiesAnEventToItsJobWhileTheTaskRan) {
  KernelEvent hung = make_event("h1", "hung-task", 1600 * kSec);
  hung.pid = 777;
  EXPECT_EQ(owners(hung), std::vector<uint64_t>{100});
  KernelEvent oom = make_event("o2", "oom-kill", 1900 * kSec);
  oom.pid = 888;
  EXPECT_EQ(owners(oom), std::vector<uint64_t>{200});
}

TEST_F(Attribution, AGpuErrorDuringBothJobsBelongsToBoth) {
  KernelEvent ue = make_event("u1", "gpu-ras-uncorrectable", 1700 * kSec);
  EXPECT_EQ(owners(ue), (std::vector<uint64_t>{100, 200}));
  KernelEvent late = make_event("u2", "nvidia-xid", 2500 * kSec);
  EXPECT_EQ(owners(late), std::vector<uint64_t>{200});
  KernelEvent grace = make_event("u3", "gpu-reset", 2030 * kSec);
  EXPECT_EQ(owners(grace), (std::vector<uint64_t>{100, 200}))
      << "within the grace period after job 100 ended";
  KernelEvent before = make_event("u4", "gpu-reset", 500 * kSec);
  EXPECT_TRUE(owners(before).empty());
}

TEST_F(Attribution, AFloodThatStartedBeforeTheJobAndLastedIntoItCounts) {
  KernelEvent flood = make_event("f1", "gpu-ring-timeout", 900 * kSec);
  flood.last_usec = 1100 * kSec;
  flood.count = 500;
  EXPECT_EQ(owners(flood), std::vector<uint64_t>{100});
}

TEST_F(Attribution, AnOomKillOfSomeOtherProcessBelongsToNobody) {
  KernelEvent oom = make_event("o3", "oom-kill", 1700 * kSec);
  oom.pid = 4321;
  oom.task = "sshd";
  EXPECT_TRUE(owners(oom).empty());
  KernelEvent other_job = make_event("o4", "oom-kill", 1700 * kSec);
  other_job.job_id = 999;
  EXPECT_TRUE(owners(other_job).empty());
}

TEST_F(Attribution, TheLeadersTimesWidenAWindowTheNodeSawOnlyPartly) {
  JobRecord unseen;
  unseen.job_id = 300;
  EXPECT_EQ(job_window(unseen).start_usec, 0);
  const AttributionWindow w = job_window(unseen, {4000 * kSec, 4100 * kSec});
  AttributionOptions opt;
  opt.now_usec = 5000 * kSec;
  EXPECT_TRUE(belongs_to_job(make_event("x", "mce", 4050 * kSec), unseen, w, jobs, opt));
  EXPECT_FALSE(belongs_to_job(make_event("y", "mce", 0), unseen, w, jobs, opt))
      << "an event without a time cannot be placed";
}

TEST(JobTable, LifecycleMessagesAreValidatedFieldByField) {
  EXPECT_THROW(
      parse_lifecycle(lifecycle("task_exit", 1, "m", {{"pid", "twelve"}, {"wait_status", 0}})),
      InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("task_exit", 1, "m", {{"pid", 12}})), InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 1, "", {})), InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 0, "m", {})), InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 1, "m", {{"mode", "verbose"}})), InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 1, "m", {{"nodelist", "node[1-"}})),
               InputError);
  try {
    parse_lifecycle(lifecycle("task_start", 1, "m", {{"pid", -1.5}}));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("task_start.pid"), std::string::npos) << e.what();
  }
}

TEST(JobTable, TaskExitsDecodeTheirWaitStatusAndTheBatchStepMarksTheLeader) {
  JobTable jobs;
  jobs.apply(parse_lifecycle(
                 lifecycle("task_start", 5, "m1", {{"step", "batch"}, {"task", 0}, {"pid", 10}})),
             1);
  jobs.apply(parse_lifecycle(lifecycle(
                 "task_exit", 5, "m2",
                 {{"step", "batch"}, {"task", 0}, {"pid", 10}, {"wait_status", 137 << 8}})),
             2);
  jobs.apply(parse_lifecycle(lifecycle(
                 "task_exit", 5, "m3",
                 {{"step", 0}, {"task", 1}, {"rank", 1}, {"pid", 11}, {"wait_status", 9}})),
             3);
  const JobRecord* j = jobs.find(5);
  ASSERT_NE(j, nullptr);
  EXPECT_TRUE(j->batch_here);
  EXPECT_EQ(j->tasks.at("batch/0").exit_code, 137);
  EXPECT_EQ(j->tasks.at("0/1").signal, 9);
  EXPECT_TRUE(jobs.has_message(5, "m2"));
  EXPECT_TRUE(jobs.running_pids().empty());
}

}  // namespace
}  // namespace triage::agent
