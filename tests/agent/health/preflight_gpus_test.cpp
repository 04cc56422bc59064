// The preflight's GPU facts from the node as the agent reads it: a /proc tree whose processes hold
// GPU device files, the job table that says which jobs ended here and when, and the GPUs present
// (issue 27, part 2).
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>

#include "agent/health/preflight.h"
#include "collector/sysfs/gpu_inventory.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::TempDir;
using testing::write_file;
using testing::write_proc_tree;

constexpr int64_t kSecond = 1000000;
constexpr int64_t kGrace = 30 * kSecond;

LifecycleMessage message(const char* op, uint64_t job, const std::string& id, int64_t t) {
  return parse_lifecycle({{"op", op},
                          {"msg_id", id},
                          {"job_id", job},
                          {"uid", 1000},
                          {"gid", 1000},
                          {"host", "gpu-a017"},
                          {"mode", "basic"},
                          {"nodelist", "gpu-a017"},
                          {"wait_status", 0},
                          {"time_usec", t}});
}

// A node whose /proc holds one process of job `job`, holding /dev/nvidia1 open.
class GpuLeftovers : public ::testing::Test {
 protected:
  void holder(uint64_t job) {
    const std::string proc = dir / "proc";
    write_proc_tree(proc, {{4711, "python3", 'S', "0",
                            "0::/system.slice/slurmstepd.scope/job_" + std::to_string(job) +
                                "/step_0/user/task_0\n"}});
    const std::string fd = proc + "/4711/fd";
    ::mkdir(fd.c_str(), 0755);
    ASSERT_EQ(::symlink("/dev/nvidiactl", (fd + "/3").c_str()), 0);
    ASSERT_EQ(::symlink("/dev/nvidia1", (fd + "/4").c_str()), 0);
  }
  PreflightAnswer ask(int64_t now) {
    collector::GpuHolderScanner scanner({dir / "proc", "/dev", std::chrono::milliseconds(500), 2});
    PreflightFacts f;
    f.gpus_expected = {"0", "1"};
    f.gpus_present = std::set<std::string>{"0", "1"};
    f.leftovers = gpu_leftovers(scanner.scan(), jobs, now, kGrace);
    return decide_preflight(f);
  }
  TempDir dir{"preflight-gpus"};
  JobTable jobs;
};

TEST_F(GpuLeftovers, AProcessOfAnEndedJobStillHoldingAGpuMakesTheNodeUnfit) {
  holder(41);
  jobs.apply(message("job_start", 41, "a", 100 * kSecond), 0);
  jobs.apply(message("job_end", 41, "b", 200 * kSecond), 0);
  const PreflightAnswer a = ask(200 * kSecond + kGrace);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0], "pid 4711 (python3) of ended job 41 holds /dev/nvidia1");
}

TEST_F(GpuLeftovers, AProcessOfARunningJobHoldsItsGpuAndTheNodeIsFit) {
  holder(42);
  jobs.apply(message("job_start", 42, "a", 100 * kSecond), 0);
  EXPECT_TRUE(ask(1000 * kSecond).fit);
}

TEST_F(GpuLeftovers, AProcessStillClosingItsGpuJustAfterItsJobEndedIsNotALeftover) {
  holder(41);
  jobs.apply(message("job_start", 41, "a", 100 * kSecond), 0);
  jobs.apply(message("job_end", 41, "b", 200 * kSecond), 0);
  EXPECT_TRUE(ask(200 * kSecond + kGrace - 1).fit);
}

TEST_F(GpuLeftovers, AProcessOfAJobThisNodeNeverRanIsNotJudged) {
  // Another node's job (the dev cluster's nodes share one /proc) or one evicted long ago.
  holder(43);
  EXPECT_TRUE(ask(1000 * kSecond).fit);
}

TEST(GpuLeftoversMerge, AProcessStuckInDAndHoldingAGpuIsOneLeftover) {
  const std::vector<LeftoverTask> merged = merge_leftovers(
      {{4711, "python3", 41, "", true, "nvidia_wait"}, {12, "bash", 40, "", true, ""}},
      {{4711, "python3", 41, "/dev/nvidia1", false, ""}, {99, "x", 41, "/dev/kfd", false, ""}});
  ASSERT_EQ(merged.size(), 3U);
  PreflightFacts f;
  f.leftovers = merged;
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_EQ(a.evidence,
            (std::vector<std::string>{
                "pid 12 (bash) of ended job 40 is stuck in D state",
                "pid 99 (x) of ended job 41 holds /dev/kfd",
                "pid 4711 (python3) of ended job 41 holds /dev/nvidia1 and is stuck in D "
                "state (nvidia_wait)"}));
}

TEST(GpuPresence, AGpuOfTheJobsGresMissingFromTheNodeMakesItUnfit) {
  TempDir dir("preflight-inventory");
  write_file(dir / "dev/nvidia0", "");
  write_file(dir / "dev/nvidia2", "");  // GPU 1 was not found by the driver at boot
  collector::GuardedReader reader({std::chrono::milliseconds(500), 2});
  PreflightFacts f;
  f.gpus_expected = parse_job_gpus("0,1");
  f.gpus_present = collector::read_gpu_inventory(reader, dir / "sys", dir / "dev");
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  EXPECT_EQ(a.evidence, std::vector<std::string>{"GPU 1 of the job's gres is not present"});
}

TEST(GpuPresence, ACpuNodeIsNeverRefusedForItsGpus) {
  TempDir dir("preflight-cpu");
  write_file(dir / "dev/null", "");
  collector::GuardedReader reader({std::chrono::milliseconds(500), 2});
  PreflightFacts f;
  f.gpus_expected = parse_job_gpus("0");  // whatever the job's environment says
  f.gpus_present = collector::read_gpu_inventory(reader, dir / "sys", dir / "dev");
  EXPECT_FALSE(f.gpus_present.has_value());
  EXPECT_TRUE(decide_preflight(f).fit);
}

}  // namespace
}  // namespace triage::agent
