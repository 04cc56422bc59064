#include "collector/proc/dstate_sampler.h"

#include "collector/proc/job_cgroups.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "tests/agent/test_support.h"

namespace triage::collector {
namespace {

using agent::testing::FakeProcess;
using agent::testing::TempDir;
using agent::testing::write_file;
using agent::testing::write_proc_tree;

DStateSampler::Options options(const std::string& root) {
  DStateSampler::Options o;
  o.proc_root = root;
  o.read_timeout = std::chrono::milliseconds(200);
  o.persistent_after = std::chrono::seconds(0);
  o.max_stuck = 2;
  return o;
}

// Releases a reader blocked opening a FIFO: a writer appears and leaves.
void release_fifo(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
}

TEST(ProcStat, CommandNamesWithSpacesAndParenthesesParse) {
  const auto st = parse_proc_stat(
      "4242 (python3 (rank 3)) D 1 4242 4242 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 98765 0 0\n");
  ASSERT_TRUE(st);
  EXPECT_EQ(st->pid, 4242);
  EXPECT_EQ(st->comm, "python3 (rank 3)");
  EXPECT_EQ(st->state, 'D');
  EXPECT_EQ(st->start_ticks, 98765u);
  EXPECT_FALSE(parse_proc_stat("garbage"));
  EXPECT_FALSE(parse_proc_stat("12 (x)"));
}

TEST(ProcStat, SlurmJobIdsComeOutOfCgroupV1AndV2Paths) {
  EXPECT_EQ(job_id_from_cgroup("0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_3\n"),
            4242u);
  EXPECT_EQ(job_id_from_cgroup("0::/system.slice/node7_slurmstepd.scope/job_17/step_batch\n"), 17u);
  EXPECT_EQ(job_id_from_cgroup("12:memory:/slurm/uid_1000/job_99/step_1/task_0\n4:cpu:/\n"), 99u);
  EXPECT_FALSE(job_id_from_cgroup("0::/user.slice/user-1000.slice/session-3.scope\n"));
  EXPECT_FALSE(job_id_from_cgroup("0::/system.slice/myjob_12.service\n"));
}

TEST(JobCgroups, TheTasksOfSlurmJobsComeFromTheirCgroupsInTheV2AndV1Layouts) {
  TempDir dir("cgroup");
  const std::string v2 = dir / "v2";
  const std::string scope = v2 + "/system.slice/slurmstepd.scope";
  write_file(scope + "/job_41/step_0/user/task_0/cgroup.procs", "100\n101\n");
  write_file(scope + "/job_41/step_extern/slurm/cgroup.procs", "90\n");
  write_file(v2 + "/system.slice/node7_slurmstepd.scope/job_42/step_batch/user/task_0/cgroup.procs",
             "200\n");
  write_file(scope + "/system/cgroup.procs", "50\n");  // slurmstepd's own, no job's
  write_file(v2 + "/system.slice/sshd.service/cgroup.procs", "60\n");
  write_file(v2 + "/user.slice/job_99/cgroup.procs", "70\n");  // not where Slurm puts jobs
  const JobTasks t2 = read_job_tasks(v2);
  EXPECT_EQ(t2.pids, (std::map<int64_t, uint64_t>{{90, 41}, {100, 41}, {101, 41}, {200, 42}}));
  EXPECT_EQ(t2.jobs, 2u);

  const std::string v1 = dir / "v1";
  write_file(v1 + "/freezer/slurm/uid_1000/job_7/step_0/cgroup.procs", "300\n");
  write_file(v1 + "/freezer/slurm/uid_1000/job_7/step_batch/cgroup.procs", "301\n");
  write_file(v1 + "/memory/slurm/uid_1000/job_8/step_0/cgroup.procs", "400\n");
  EXPECT_EQ(read_job_tasks(v1).pids, (std::map<int64_t, uint64_t>{{300, 7}, {301, 7}}))
      << "the freezer hierarchy alone names every job's tasks";

  EXPECT_TRUE(read_job_tasks(dir / "missing").pids.empty());
  EXPECT_TRUE(read_job_tasks("").pids.empty());
}

TEST(JobCgroups, AJobsTreeIsWalkedWhenNewAndReadAgainFromMemoryUntilAStepGoes) {
  TempDir dir("cgroup");
  const std::string scope = dir / "system.slice/slurmstepd.scope";
  write_file(scope + "/job_41/step_0/user/task_0/cgroup.procs", "100\n");
  JobCgroups cgroups(dir.path());
  using Pids = std::map<int64_t, uint64_t>;
  EXPECT_EQ(cgroups.read(false).pids, (Pids{{100, 41}}));

  // A rank forks, another step starts, another job starts.
  write_file(scope + "/job_41/step_0/user/task_0/cgroup.procs", "100\n101\n");
  write_file(scope + "/job_41/step_1/user/task_0/cgroup.procs", "110\n");
  write_file(scope + "/job_42/step_0/user/task_0/cgroup.procs", "200\n");
  EXPECT_EQ(cgroups.read(false).pids, (Pids{{100, 41}, {101, 41}, {200, 42}}))
      << "the known job's new step waits for a rescan; the new job is walked at once";
  EXPECT_EQ(cgroups.read(true).pids, (Pids{{100, 41}, {101, 41}, {110, 41}, {200, 42}}));

  // Step 0 ends and step 2 starts: the cgroup that went makes the job walked again.
  std::filesystem::remove_all(scope + "/job_41/step_0");
  write_file(scope + "/job_41/step_2/user/task_0/cgroup.procs", "120\n");
  EXPECT_EQ(cgroups.read(false).pids, (Pids{{110, 41}, {120, 41}, {200, 42}}));
}

TEST(DStateSampler, WalksTheWholeProcessTableOnlyNowAndThen) {
  const int64_t minute = 60'000'000;
  EXPECT_TRUE(whole_node_walk_due(std::nullopt, 5, minute)) << "the first sample walks";
  EXPECT_FALSE(whole_node_walk_due(1'000'000, 1'000'000 + minute - 1, minute));
  EXPECT_TRUE(whole_node_walk_due(1'000'000, 1'000'000 + minute, minute));
  EXPECT_TRUE(whole_node_walk_due(1'000'000, 1'000'001, 0)) << "0: at every sample";
  EXPECT_EQ(pids_between_walks({{300, 7}, {100, 7}}, {200, 100, 200}),
            (std::vector<int64_t>{100, 200, 300}));
}

// Job 41's two tasks run on a node that also has a daemon (300) and a task stuck in D outside any
// job (200). Between walks, the daemon's trip into D goes unseen; the job's task and the stuck
// task are followed.
TEST(DStateSampler, BetweenWalksTheJobsTasksAndTheTasksAlreadyInDAreRead) {
  TempDir dir("dstate");
  const std::string root = dir / "proc";
  const std::string cgroup = dir / "cgroup";
  write_file(cgroup + "/system.slice/slurmstepd.scope/job_41/step_0/user/task_0/cgroup.procs",
             "100\n101\n");
  write_proc_tree(root, {{100, "python3", 'S', "do_wait"},
                         {101, "python3", 'S', "do_wait"},
                         {200, "cat", 'D', "amdgpu_cper_ring_write"},
                         {300, "sshd", 'S', "do_select"}});
  DStateSampler::Options o = options(root);
  o.cgroup_root = cgroup;
  o.whole_node_every = std::chrono::seconds(3600);
  DStateSampler sampler(o);
  const DStateSample walk = sampler.sample();
  EXPECT_TRUE(walk.whole_node);
  EXPECT_EQ(walk.processes, 4u);
  ASSERT_EQ(walk.tasks.size(), 1u);

  write_proc_tree(root, {{100, "python3", 'S', "do_wait"},
                         {101, "python3", 'D', "amdgpu_cper_ring_write"},
                         {200, "cat", 'D', "amdgpu_cper_ring_write"},
                         {300, "sshd", 'D', "nfs_wait_on_request"}});
  const DStateSample between = sampler.sample();
  EXPECT_FALSE(between.whole_node);
  EXPECT_EQ(between.processes, 3u) << "the job's two tasks and the one already in D";
  ASSERT_EQ(between.tasks.size(), 2u);
  EXPECT_EQ(between.tasks[0].pid, 101);
  EXPECT_EQ(between.tasks[0].job_id, 41u) << "its job cgroup names the job";
  EXPECT_EQ(between.tasks[1].pid, 200);
  EXPECT_EQ(between.tasks[1].samples, 2u) << "the task the walk found in D is followed";
  EXPECT_TRUE(between.tasks[1].persistent);
  EXPECT_EQ(between.by_job.at(41), 1u);
}

TEST(DStateSampler, CountsTasksInDStateByWchanAndJob) {
  TempDir dir("dstate");
  const std::string root = dir / "proc";
  write_proc_tree(root,
                  {{100, "python3", 'D', "amdgpu_cper_ring_write",
                    "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n"},
                   {101, "cat", 'D', "amdgpu_cper_ring_write", "0::/user.slice\n"},
                   {102, "python3", 'D', "nfs_wait_on_request", "0::/user.slice\n"},
                   {103, "bash", 'S', "do_wait", "0::/user.slice\n"},
                   {104, "python3", 'R', "0", "0::/user.slice\n"}},
                  7);
  DStateSampler sampler(options(root));
  const DStateSample s = sampler.sample({{102, 77}});
  EXPECT_TRUE(s.error.empty());
  EXPECT_EQ(s.processes, 5u);
  ASSERT_EQ(s.tasks.size(), 3u);
  EXPECT_EQ(s.by_wchan.at("amdgpu_cper_ring_write"), 2u);
  EXPECT_EQ(s.by_wchan.at("nfs_wait_on_request"), 1u);
  EXPECT_EQ(s.by_job.at(4242), 1u);
  EXPECT_EQ(s.by_job.at(77), 1u)
      << "a registered pid without a job cgroup still counts for its job";
  EXPECT_EQ(s.procs_blocked, 7u);
  EXPECT_EQ(s.persistent, 0u) << "nothing is stuck after a single look";
  EXPECT_TRUE(s.skipped_pids.empty());
}

TEST(DStateSampler, TasksThatStayInDAcrossSamplesArePersistentAndReusedPidsAreNot) {
  TempDir dir("dstate");
  const std::string root = dir / "proc";
  write_proc_tree(root, {{100, "cat", 'D', "amdgpu_cper_ring_write"},
                         {101, "cat", 'D', "amdgpu_cper_ring_write"}});
  DStateSampler sampler(options(root));
  sampler.sample();
  // pid 101 exits and its number is reused by a new process, also in D.
  write_proc_tree(root, {{100, "cat", 'D', "amdgpu_cper_ring_write"},
                         {101, "dd", 'D', "blk_wait", "0::/\n", 5555}});
  const DStateSample s = sampler.sample();
  ASSERT_EQ(s.tasks.size(), 2u);
  EXPECT_TRUE(s.tasks[0].persistent);
  EXPECT_EQ(s.tasks[0].samples, 2u);
  EXPECT_FALSE(s.tasks[1].persistent);
  EXPECT_EQ(s.persistent, 1u);
}

TEST(DStateSampler, AHungProcEntryIsSkippedAndTheRestStillCounted) {
  TempDir dir("dstate");
  const std::string root = dir / "proc";
  write_proc_tree(root, {{100, "cat", 'D', "amdgpu_cper_ring_write"},
                         {200, "stuck", 'D', "<fifo>"},
                         {300, "cat", 'D', "amdgpu_cper_ring_write"}});
  ASSERT_EQ(::mkfifo((root + "/200/wchan").c_str(), 0644), 0);
  DStateSampler sampler(options(root));
  const auto t0 = std::chrono::steady_clock::now();
  const DStateSample s = sampler.sample();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(3));
  EXPECT_EQ(s.stuck_pids, std::vector<int64_t>{200});
  ASSERT_EQ(s.tasks.size(), 2u) << "pids after the hung one are still read";
  EXPECT_EQ(s.tasks[1].pid, 300);
  EXPECT_EQ(sampler.reader().stuck_workers(), 1u);

  // While the first reader is still stuck, the next sample skips that pid instead of piling up.
  const DStateSample again = sampler.sample();
  EXPECT_EQ(again.skipped_pids, std::vector<int64_t>{200});
  EXPECT_TRUE(again.stuck_pids.empty());
  EXPECT_EQ(sampler.reader().stuck_workers(), 1u);

  release_fifo(root + "/200/wchan");
  EXPECT_TRUE(agent::testing::eventually([&] { return sampler.reader().stuck_workers() == 0; }));
}

TEST(DStateSampler, TooManyStuckReadersPauseReadingInsteadOfSpawningThreads) {
  TempDir dir("dstate");
  const std::string root = dir / "proc";
  std::vector<FakeProcess> procs;
  for (int64_t pid : {10, 11, 12, 13})
    procs.push_back({pid, "stuck", 'D', "<fifo>"});
  write_proc_tree(root, procs);
  for (int64_t pid : {10, 11, 12, 13})
    ASSERT_EQ(::mkfifo((root + "/" + std::to_string(pid) + "/wchan").c_str(), 0644), 0);
  DStateSampler sampler(options(root));  // max_stuck = 2
  const DStateSample s = sampler.sample();
  EXPECT_EQ(s.stuck_pids.size(), 2u);
  EXPECT_EQ(s.skipped_pids, (std::vector<int64_t>{12, 13}));
  EXPECT_EQ(sampler.reader().stuck_workers(), 2u);
  for (int64_t pid : {10, 11, 12, 13})
    release_fifo(root + "/" + std::to_string(pid) + "/wchan");
  EXPECT_TRUE(agent::testing::eventually([&] { return sampler.reader().stuck_workers() == 0; }));
}

TEST(DStateSampler, AMissingProcRootIsReportedNotFatal) {
  DStateSampler sampler(options("/nonexistent/proc"));
  const DStateSample s = sampler.sample();
  EXPECT_FALSE(s.error.empty());
  EXPECT_TRUE(s.tasks.empty());
}

}  // namespace
}  // namespace triage::collector
