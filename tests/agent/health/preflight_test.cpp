// The preflight decision as plain facts: which node may take a job, and the evidence a refusal
// names (it becomes the drained node's reason in Slurm); then the agent answering it on its socket.
#include "agent/health/preflight.h"

#include <gtest/gtest.h>

#include <optional>

#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

PreflightFacts clean_node() {
  PreflightFacts f;
  f.verdict.host = "gpu-a017";
  f.gpus_expected = {"0", "1"};
  f.gpus_present = std::set<std::string>{"0", "1", "2", "3"};
  return f;
}

TEST(Preflight, ACleanNodeIsFit) {
  const PreflightAnswer a = decide_preflight(clean_node());
  EXPECT_TRUE(a.fit);
  EXPECT_TRUE(a.evidence.empty());
}

TEST(Preflight, ADegradedNodeIsStillFit) {
  PreflightFacts f = clean_node();
  f.verdict.verdict = "degraded";
  f.verdict.reasons.push_back({"3 correctable ECC errors on GPU 0000:c1:00.0", "watch", {}});
  EXPECT_TRUE(decide_preflight(f).fit);
}

TEST(Preflight, ADrainRecommendedVerdictRefusesWithItsReasons) {
  PreflightFacts f = clean_node();
  f.verdict.verdict = "drain-recommended";
  f.verdict.reasons.push_back({"GPU 0000:c1:00.0 fell off the bus (Xid 79)", "drain", {"b:12"}});
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0], "drain recommended: GPU 0000:c1:00.0 fell off the bus (Xid 79)");
  EXPECT_EQ(preflight_reason(a),
            "triage preflight: drain recommended: GPU 0000:c1:00.0 fell off the bus (Xid 79)");
}

TEST(Preflight, APortDownRefuses) {
  PreflightFacts f = clean_node();
  f.ports_down = {"mlx5_0/1", "mlx5_1/1"};
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0], "port down: mlx5_0/1, mlx5_1/1");
}

TEST(Preflight, AProcessOfAnEndedJobHoldingAGpuRefuses) {
  PreflightFacts f = clean_node();
  f.leftovers.push_back({4711, "python3", 4242, "/dev/nvidia0", false, ""});
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0], "pid 4711 (python3) of ended job 4242 holds /dev/nvidia0");
}

TEST(Preflight, AProcessOfAnEndedJobStuckInDStateRefuses) {
  PreflightFacts f = clean_node();
  f.leftovers.push_back({4711, "python3", 4242, "", true, "amdgpu_cper_ring_write"});
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0],
            "pid 4711 (python3) of ended job 4242 is stuck in D state (amdgpu_cper_ring_write)");
}

TEST(Preflight, ALeftoverThatHoldsNothingAndRunsCostsNothing) {
  PreflightFacts f = clean_node();
  f.leftovers.push_back({4711, "sleep", 4242, "", false, ""});
  EXPECT_TRUE(decide_preflight(f).fit);
}

TEST(Preflight, AGpuOfTheJobsGresThatIsMissingRefuses) {
  PreflightFacts f = clean_node();
  f.gpus_expected = {"1", "3"};
  f.gpus_present = std::set<std::string>{"0", "1", "2"};
  const PreflightAnswer a = decide_preflight(f);
  EXPECT_FALSE(a.fit);
  ASSERT_EQ(a.evidence.size(), 1U);
  EXPECT_EQ(a.evidence[0], "GPU 3 of the job's gres is not present");
}

TEST(Preflight, WithoutAnInventoryGpuPresenceIsNotJudged) {
  PreflightFacts f = clean_node();
  f.gpus_present.reset();
  f.gpus_expected = {"7"};
  EXPECT_TRUE(decide_preflight(f).fit);
}

TEST(Preflight, EveryFactIsNamedInOrder) {
  PreflightFacts f = clean_node();
  f.verdict.verdict = "drain-recommended";
  f.verdict.reasons.push_back({"uncorrectable ECC error on GPU 0", "drain", {}});
  f.ports_down = {"mlx5_0/1"};
  f.leftovers.push_back({9, "x", 7, "/dev/kfd", true, "kfd_wait"});
  f.gpus_expected = {"5"};
  const PreflightAnswer a = decide_preflight(f);
  ASSERT_EQ(a.evidence.size(), 4U);
  EXPECT_EQ(a.evidence[0].rfind("drain recommended:", 0), 0U);
  EXPECT_EQ(a.evidence[1], "port down: mlx5_0/1");
  EXPECT_EQ(a.evidence[2],
            "pid 9 (x) of ended job 7 holds /dev/kfd and is stuck in D state (kfd_wait)");
  EXPECT_EQ(a.evidence[3], "GPU 5 of the job's gres is not present");
}

TEST(Preflight, TheReasonStaysOneShortLine) {
  PreflightAnswer a;
  a.fit = false;
  a.evidence = {std::string(300, 'x'), "line\nbreak"};
  const std::string r = preflight_reason(a, 64);
  EXPECT_EQ(r.size(), 64U);
  EXPECT_EQ(r.find('\n'), std::string::npos);
  EXPECT_EQ(r.substr(61), "...");
}

TEST(Preflight, JobGpusAreSlurmsCommaList) {
  EXPECT_EQ(parse_job_gpus("0,1,3"), (std::vector<std::string>{"0", "1", "3"}));
  EXPECT_EQ(parse_job_gpus("2"), (std::vector<std::string>{"2"}));
  EXPECT_TRUE(parse_job_gpus("").empty());
  EXPECT_TRUE(parse_job_gpus("0,,1").empty());
  EXPECT_TRUE(parse_job_gpus("gpu:0").empty());
}

TEST(Preflight, GpuDeviceFilesNameTheirIndex) {
  EXPECT_EQ(gpu_index_of_device("/dev/nvidia3"), "3");
  EXPECT_EQ(gpu_index_of_device("/dev/dri/renderD129"), "1");
  EXPECT_FALSE(gpu_index_of_device("/dev/nvidiactl"));
  EXPECT_FALSE(gpu_index_of_device("/dev/nvidia-uvm"));
  EXPECT_FALSE(gpu_index_of_device("/dev/kfd"));
  EXPECT_FALSE(gpu_index_of_device("/dev/dri/card0"));
  EXPECT_FALSE(gpu_index_of_device("/dev/dri/renderD12"));
}

// The leftovers the agent already holds: the D-state sampler's tasks against the job table.
TEST(Preflight, LeftoversAreTasksOfEndedJobsLongInDState) {
  JobTable jobs;
  const auto msg = [](const char* op, uint64_t job, const char* id) {
    return parse_lifecycle({{"op", op},
                            {"msg_id", id},
                            {"job_id", job},
                            {"uid", 1000},
                            {"gid", 1000},
                            {"host", "node001"},
                            {"mode", "basic"},
                            {"nodelist", "node001"},
                            {"wait_status", 0},
                            {"time_usec", 1}});
  };
  jobs.apply(msg("job_start", 4100, "a"), 1);
  jobs.apply(msg("job_end", 4100, "b"), 2);
  jobs.apply(msg("job_start", 4200, "c"), 3);  // still running
  collector::DStateSample sample;
  const auto task = [](int64_t pid, uint64_t job, bool persistent) {
    collector::DStateTask t;
    t.pid = pid;
    t.comm = "python3";
    t.wchan = "nfs_wait";
    t.job_id = job;
    t.persistent = persistent;
    return t;
  };
  sample.tasks = {task(11, 4100, true), task(12, 4100, false), task(13, 4200, true),
                  task(14, 9999, true)};
  const std::vector<LeftoverTask> left = stuck_leftovers(sample, jobs);
  ASSERT_EQ(left.size(), 1U) << "only the ended job's task that stayed in D";
  EXPECT_EQ(left[0].pid, 11);
  EXPECT_EQ(left[0].job_id, 4100U);
  EXPECT_TRUE(left[0].stuck_in_d);
  EXPECT_EQ(left[0].wchan, "nfs_wait");
}

// The agent answering the prolog over its socket, from what it holds.
class PreflightOverTheSocket : public ::testing::Test {
 protected:
  void SetUp() override {
    h.start();
    SlurmNodeState n;
    n.name = "node001";
    n.state = "IDLE";
    h.slurm().set_node(n);
  }
  nlohmann::json ask(uint64_t job, std::optional<uid_t> as = std::nullopt) {
    return testing::socket_json(
        h.socket(), {{"op", "preflight"}, {"job_id", job}, {"host", "node001"}, {"gpus", "0"}}, as);
  }
  testing::AgentHarness h{"preflight", "node001", "SlurmUser=daemon\n"};
};

TEST_F(PreflightOverTheSocket, AHealthyNodeIsFit) {
  const nlohmann::json a = ask(41);
  ASSERT_EQ(a["ok"], true) << a.dump();
  EXPECT_EQ(a["fit"], true);
  EXPECT_FALSE(a.contains("reason"));
  EXPECT_TRUE(h.slurm().preflight_labels().empty());
}

TEST_F(PreflightOverTheSocket, ADrainRecommendedNodeRefusesNamingTheEvidenceAndLabelsItsDrain) {
  KernelEvent e = testing::make_event("boot-a:812", "gpu-ras-uncorrectable", now_usec());
  e.summary = "uncorrectable umc error on GPU 0000:c1:00.0";
  e.action = "drain";
  ASSERT_TRUE(h.agent().ingest({e}, "c1"));
  ASSERT_TRUE(testing::eventually([&] {
    return testing::socket_json(h.socket(), {{"op", "health"}})["verdict"]["verdict"] ==
           "drain-recommended";
  }));
  const nlohmann::json a = ask(42);
  ASSERT_EQ(a["ok"], true) << a.dump();
  EXPECT_EQ(a["fit"], false);
  const std::string reason =
      "triage preflight: drain recommended: uncorrectable umc error on GPU 0000:c1:00.0";
  EXPECT_EQ(a["reason"], reason);
  EXPECT_EQ(a["evidence"].size(), 1U);
  ASSERT_TRUE(testing::eventually([&] { return !h.slurm().preflight_labels().empty(); }));
  EXPECT_EQ(h.slurm().preflight_labels()[0],
            (std::pair<std::string, std::string>{"node001", reason}));
  EXPECT_EQ(testing::socket_json(h.socket(), {{"op", "health"}})["preflight"]["unfit"], 1);
}

TEST_F(PreflightOverTheSocket, OnlyRootAndSlurmUserMayAsk) {
  const nlohmann::json user = ask(43, testing::kNobody);
  EXPECT_EQ(user["ok"], false);
  EXPECT_NE(user.value("error", "").find("permission denied"), std::string::npos) << user.dump();
  EXPECT_EQ(ask(43, testing::kDaemon)["fit"], true);
}

}  // namespace
}  // namespace triage::agent
