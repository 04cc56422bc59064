#include "agent/node/attribution.h"

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
    EventStore store(100);
    store.apply(e);
    for (const auto& [id, job] : jobs.jobs()) {
      const bool belongs = belongs_to_job(e, job, job_window(job), jobs, opt);
      if (belongs) out.push_back(id);
      // The store's indexes must find every event the rules would give the job.
      EXPECT_EQ(events_for_job(store, job, job_window(job), jobs, opt).size(), belongs ? 1U : 0U)
          << "event " << e.id << ", job " << id;
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

// A node that ran 5,000 jobs back to back (100 s each, one rank each, pids reused every 1,000
// jobs). Each job left an OOM kill in its cgroup, a hung task naming its rank's pid and a GPU
// error; a sysfs read has been stuck for the node's whole history. Asking for the latest job must
// give exactly what applying the rules to every event gives, while looking at a handful of events
// and tasks instead of all 15,001 events and 5,000 jobs.
TEST(AttributionAtScale, ANodeThatRan5000JobsAnswersForTheLatestWithoutScanningTheOthers) {
  constexpr uint64_t kJobs = 5000;
  JobTable jobs;
  EventStore store(20000);
  const auto apply = [&](const nlohmann::json& m) { jobs.apply(parse_lifecycle(m), 0); };
  KernelEvent stuck = make_event("stuck", "sysfs-read-stuck", 500 * kSec);
  stuck.last_usec = (1000 + 100 * static_cast<int64_t>(kJobs)) * kSec;
  store.apply(stuck);
  for (uint64_t id = 1; id <= kJobs; ++id) {
    const int64_t start = (1000 + 100 * static_cast<int64_t>(id)) * kSec;
    const int64_t pid = 10000 + static_cast<int64_t>(id % 1000);
    const std::string tag = std::to_string(id);
    apply(lifecycle("job_start", id, "s", {{"uid", 1000}, {"time_usec", start}}));
    apply(lifecycle("task_start", id, "t",
                    {{"step", "0"}, {"task", 0}, {"pid", pid}, {"time_usec", start}}));
    apply(lifecycle("task_exit", id, "x",
                    {{"step", "0"},
                     {"task", 0},
                     {"pid", pid},
                     {"wait_status", 0},
                     {"time_usec", start + 90 * kSec}}));
    apply(lifecycle("job_end", id, "e", {{"time_usec", start + 90 * kSec}}));
    KernelEvent oom = make_event("oom" + tag, "oom-kill", start + 10 * kSec);
    oom.job_id = id;
    store.apply(oom);
    KernelEvent hung = make_event("hung" + tag, "hung-task", start + 20 * kSec);
    hung.pid = pid;
    store.apply(hung);
    store.apply(make_event("ue" + tag, "gpu-ras-uncorrectable", start + 30 * kSec));
  }
  ASSERT_EQ(store.size(), 3 * kJobs + 1);

  const JobRecord& latest = *jobs.find(kJobs);
  AttributionOptions opt;
  opt.grace_usec = 60 * kSec;
  opt.now_usec = (2000 + 100 * static_cast<int64_t>(kJobs)) * kSec;
  AttributionStats indexed;
  opt.stats = &indexed;
  const auto got = events_for_job(store, latest, job_window(latest), jobs, opt);
  AttributionStats full;
  opt.stats = &full;
  const auto expected = events_for_job(store.events(), latest, job_window(latest), jobs, opt);

  std::vector<std::string> got_ids, expected_ids;
  for (const auto& e : got)
    got_ids.push_back(e.id);
  for (const auto& e : expected)
    expected_ids.push_back(e.id);
  EXPECT_EQ(got_ids, expected_ids);
  EXPECT_EQ(got_ids, (std::vector<std::string>{"stuck", "oom5000", "hung5000", "ue5000"}))
      << "its own three events and the read stuck since before it started";
  EXPECT_EQ(full.events_examined, store.size()) << "the plain scan looks at everything";
  // Looked at: its three events, the stuck read, and the four older hung tasks that named the same
  // (reused) pid 10000; for those five pid events, only the jobs that ever had pid 10000 (1000,
  // 2000, ..., 5000) are compared: 1 + 2 + 3 + 4 + 5 tasks.
  EXPECT_LE(indexed.events_examined, 8U);
  EXPECT_LE(indexed.tasks_examined, 15U) << "only jobs that used the same pid are compared";
}

TEST(AttributionAtScale, PrunedAndUpdatedEventsLeaveTheIndexesInStep) {
  JobTable jobs;
  jobs.apply(parse_lifecycle(lifecycle("job_start", 7, "s", {{"time_usec", 1000 * kSec}})), 0);
  jobs.apply(parse_lifecycle(lifecycle("job_end", 7, "e", {{"time_usec", 1100 * kSec}})), 0);
  const JobRecord& job = *jobs.find(7);
  AttributionOptions opt;
  EventStore store(100);
  // A flood first seen long before the job, then seen again during it: it moves to long-lived.
  KernelEvent flood = make_event("flood", "gpu-ring-timeout", 100 * kSec);
  store.apply(flood);
  EXPECT_TRUE(events_for_job(store, job, job_window(job), jobs, opt).empty());
  flood.last_usec = 1050 * kSec;
  flood.count = 40;
  store.apply(flood);
  ASSERT_EQ(events_for_job(store, job, job_window(job), jobs, opt).size(), 1U);
  store.apply(make_event("old", "mce", 10 * kSec));
  store.apply(make_event("during", "mce", 1010 * kSec));
  EXPECT_EQ(store.prune(50 * kSec), 1U);
  const auto left = events_for_job(store, job, job_window(job), jobs, opt);
  ASSERT_EQ(left.size(), 2U);
  EXPECT_EQ(left[0].id, "flood");
  EXPECT_EQ(left[1].id, "during");

  jobs.apply(parse_lifecycle(lifecycle("task_start", 8, "t", {{"task", 0}, {"pid", 4242}})), 0);
  EXPECT_EQ(jobs.jobs_with_pid(4242), std::set<uint64_t>{8});
  jobs.erase(8);
  EXPECT_TRUE(jobs.jobs_with_pid(4242).empty()) << "a forgotten job leaves no pid behind";
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
