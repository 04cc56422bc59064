// agent/slurm/slurm_client.cpp against a real slurmctld (Debian's, on loopback): job facts, the
// expanded StdOut path, node state, and drains that never override someone else's.
#include <signal.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "agent/health/drain_hygiene.h"
#include "agent/slurm/drain_steps.h"
#include "agent/slurm/slurm_client.h"
#include "agent/slurm/slurm_compat.h"
#include "tests/e2e/cluster_environment.h"

namespace triage::testing {
namespace {

using agent::SlurmClient;

ClusterEnvironment* g_env = nullptr;

class SlurmClientTest : public ::testing::Test {
 protected:
  void SetUp() override { client_ = agent::make_libslurm_client(); }
  void TearDown() override {
    // Whatever a test did to the node, the next one starts from an idle node.
    if (g_env->cluster() != nullptr) {
      SlurmCluster& c = *g_env->cluster();
      c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=resume"});
      for (int i = 0; i < 100 && c.node_state() != "idle"; ++i)
        usleep(100000);
    }
  }

  std::unique_ptr<SlurmClient> client_;
};

TEST_F(SlurmClientTest, AFailedJobsFactsComeFromSlurmctld) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("facts");
  std::filesystem::create_directory(dir + "/outputs");
  chown((dir + "/outputs").c_str(), c.user_uid(), c.user_gid());
  const time_t before = time(nullptr);
  const uint32_t id =
      c.sbatch(dir, {"-J", "llama-70b", "-o", "outputs/%j-%x.log", "--wrap", "echo hi; exit 3"});
  ASSERT_EQ(c.wait_job(id), "FAILED");

  std::string error;
  const auto f = client_->load_job(id, error);
  ASSERT_TRUE(f.has_value()) << error;
  EXPECT_EQ(f->job_id, id);
  EXPECT_EQ(f->name, "llama-70b");
  EXPECT_EQ(f->user, SlurmCluster::kUser);
  EXPECT_EQ(f->uid, c.user_uid());
  EXPECT_EQ(f->gid, c.user_gid());
  EXPECT_EQ(f->state, "FAILED");
  EXPECT_EQ(f->wait_status, 3 << 8);
  EXPECT_EQ(f->work_dir, dir);
  EXPECT_EQ(f->stdout_pattern, dir + "/outputs/%j-%x.log");
  EXPECT_EQ(f->stdout_path, dir + "/outputs/" + std::to_string(id) + "-llama-70b.log");
  EXPECT_TRUE(std::filesystem::exists(f->stdout_path)) << "the path Slurm actually wrote";
  EXPECT_EQ(f->nodes, std::vector<std::string>{c.node()});
  EXPECT_EQ(f->batch_host, c.node());
  EXPECT_GE(f->start_time, before - 1);
  EXPECT_GE(f->end_time, f->start_time);
  EXPECT_GE(f->submit_time, before - 1);
  EXPECT_EQ(f->restart_count, 0);
  EXPECT_EQ(f->partition, "debug");
  EXPECT_EQ(f->source, "slurmctld");
}

TEST_F(SlurmClientTest, WithoutOutputTheStdoutPathIsSlurmsDefault) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("default stdout");
  const uint32_t id = c.sbatch(dir, {"--wrap", "true"});
  ASSERT_EQ(c.wait_job(id), "COMPLETED");
  std::string error;
  const auto f = client_->load_job(id, error);
  ASSERT_TRUE(f.has_value()) << error;
  EXPECT_EQ(f->state, "COMPLETED");
  EXPECT_EQ(f->wait_status, 0);
  EXPECT_EQ(f->stdout_path, dir + "/slurm-" + std::to_string(id) + ".out");
  EXPECT_EQ(f->stderr_path, f->stdout_path) << "stderr goes with stdout unless -e is given";
}

TEST_F(SlurmClientTest, ARunningJobHasNoEndTimeYetAndACancelledOneSaysSo) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("cancel");
  const uint32_t id = c.sbatch(dir, {"--wrap", "sleep 300"});
  c.wait_running(id);
  std::string error;
  auto f = client_->load_job(id, error);
  ASSERT_TRUE(f.has_value()) << error;
  EXPECT_EQ(f->state, "RUNNING");
  EXPECT_EQ(f->end_time, 0) << "an expected end is not an end";
  EXPECT_FALSE(f->wait_status.has_value() && *f->wait_status != 0);

  ASSERT_TRUE(c.as_root({"scancel", std::to_string(id)}).ok());
  EXPECT_EQ(c.wait_job(id), "CANCELLED");
  f = client_->load_job(id, error);
  ASSERT_TRUE(f.has_value()) << error;
  EXPECT_EQ(f->state, "CANCELLED");
  EXPECT_GT(f->end_time, 0);
}

// While a job is COMPLETING slurmctld sends, in place of its allocation, the nodes still completing
// (pack_job). two_node_e2e's leader once read a two-node job as one node that way and never asked
// the other. Here slurmd is stopped (SIGSTOP) before the batch script ends, so the job stays
// COMPLETING on its node: the facts name no nodes at all, and the job-end path takes the epilog's.
TEST_F(SlurmClientTest, ACompletingJobsFactsNameNoNodesRatherThanTheOnesStillCompleting) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("completing");
  const uint32_t id = c.sbatch(dir, {"--wrap", "touch started; sleep 2"});
  // RUNNING in slurmctld is not yet launched by slurmd: the script says when it runs.
  for (int i = 0; i < 100 && !std::filesystem::exists(dir + "/started"); ++i)
    usleep(100000);
  ASSERT_TRUE(std::filesystem::exists(dir + "/started")) << c.job(id)["JobState"];
  std::ifstream pid_file(c.state_dir() + "/pids/slurmd");
  pid_t slurmd = 0;
  ASSERT_TRUE(pid_file >> slurmd) << "no slurmd pid";
  ASSERT_EQ(kill(slurmd, SIGSTOP), 0);
  // Continued whatever happens below.
  struct Continue {
    pid_t pid;
    ~Continue() { (void)kill(pid, SIGCONT); }
  } go_on{slurmd};
  bool completing = false;
  for (int i = 0; i < 100 && !completing; ++i) {
    completing = c.job(id)["JobState"] == "COMPLETING";
    if (!completing) usleep(100000);
  }
  ASSERT_TRUE(completing) << c.job(id)["JobState"];
  std::string error;
  const auto f = client_->load_job(id, error);
  ASSERT_TRUE(f.has_value()) << error;
  EXPECT_EQ(f->state, "COMPLETED");
  EXPECT_EQ(f->nodes, std::vector<std::string>{}) << "the nodes still completing, not the job's";
  ASSERT_EQ(kill(slurmd, SIGCONT), 0);
  EXPECT_EQ(c.wait_job(id), "COMPLETED");
  const auto done = client_->load_job(id, error);
  ASSERT_TRUE(done.has_value()) << error;
  EXPECT_EQ(done->nodes, std::vector<std::string>{c.node()});
}

TEST_F(SlurmClientTest, AnUnknownJobIsAnErrorThatSaysWhy) {
  CLUSTER_OR_FAIL(g_env);
  std::string error;
  EXPECT_FALSE(client_->load_job(999999, error).has_value());
  EXPECT_NE(error.find("Invalid job id"), std::string::npos) << error;
  error.clear();
  EXPECT_FALSE(client_->load_job(uint64_t{1} << 40, error).has_value());
  EXPECT_NE(error.find("out of range"), std::string::npos) << error;
}

TEST_F(SlurmClientTest, AnIdleNodeIsNotDrained) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string error;
  const auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_EQ(n->name, c.node());
  EXPECT_EQ(n->state, "IDLE");
  EXPECT_FALSE(n->drain);
  EXPECT_FALSE(n->down);
  EXPECT_TRUE(n->reason.empty());
  EXPECT_EQ(n->addr, "127.0.0.1") << "NodeAddr, which peers use when names do not resolve";
  EXPECT_FALSE(client_->load_node("no-such-node", error).has_value());
}

TEST_F(SlurmClientTest, TriageDrainsANodeWithItsReasonAndDoesSoOnce) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string error;
  ASSERT_TRUE(
      client_->drain_node(c.node(), "uncorrectable ECC error on GPU 0000:c1:00.0\nmore", error))
      << error;
  auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_TRUE(n->drain);
  EXPECT_EQ(n->state, "DRAINED");
  EXPECT_EQ(n->reason, "triage: uncorrectable ECC error on GPU 0000:c1:00.0 more");
  EXPECT_EQ(n->reason_uid, 0u);
  EXPECT_EQ(c.node_state(), "drained");

  // A second recommendation for a node we drained already changes nothing.
  EXPECT_TRUE(client_->drain_node(c.node(), "another reason", error)) << error;
  n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->reason, "triage: uncorrectable ECC error on GPU 0000:c1:00.0 more");
}

TEST_F(SlurmClientTest, AnAdminsDrainIsNeverOverridden) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_TRUE(c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=drain",
                         "reason=bios upgrade"})
                  .ok());
  std::string error;
  EXPECT_FALSE(client_->drain_node(c.node(), "gpu reset storm", error));
  EXPECT_NE(error.find("bios upgrade"), std::string::npos) << error;
  const auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->reason, "bios upgrade");
  EXPECT_TRUE(n->drain);
}

TEST_F(SlurmClientTest, AnAdminsDrainBetweenOurCheckAndOurDrainKeepsItsReasonAndIsNeverOurs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // The real steps, with the admin's `scontrol update State=DRAIN` landing after our check (the
  // node was idle then) and before our DRAIN reaches slurmctld.
  agent::DrainSteps steps = agent::libslurm_drain_steps(*client_, c.node());
  const auto drain = steps.drain_keeping_reason;
  steps.drain_keeping_reason = [&c, drain](std::string& e) {
    EXPECT_TRUE(c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=drain",
                           "reason=firmware flash, ticket 4412"})
                    .ok());
    return drain(e);
  };
  std::string error;
  EXPECT_FALSE(agent::drain_in_steps(steps, "triage: gpu reset storm [boot 3f2a9c1b]", error));
  EXPECT_NE(error.find("drained by someone else meanwhile"), std::string::npos) << error;
  auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_TRUE(n->drain);
  EXPECT_EQ(n->reason, "firmware flash, ticket 4412") << "our drain replaced nothing";
  EXPECT_EQ(agent::drain_owner(*n), agent::DrainOwner::kAdmin);
  EXPECT_FALSE(client_->undrain_node(c.node(), "triage: gpu reset storm [boot 3f2a9c1b]", error));
  EXPECT_EQ(c.node_state(), "drained");
}

// From 23.11 on, a cluster without accounting storage (this one) keeps a resumed node's reason
// (agent/slurm/slurm_compat.h); 22.05 clears it. An admin who drains the node again for the same
// reason, in the same words, between our check and our drain, still owns the drain: the reason's
// time tells the two apart.
TEST_F(SlurmClientTest, AnAdminsDrainRepeatingTheReasonOfAResumedDrainIsStillTheirs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string admin = "PSU swap, ticket 4413";
  ASSERT_TRUE(
      c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=drain", "reason=" + admin})
          .ok());
  ASSERT_TRUE(c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=resume"}).ok());
  std::string error;
  auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  ASSERT_FALSE(n->drain);
  if (slurm_compat::kResumeClearsReasonWithoutAccounting) {
    EXPECT_TRUE(n->reason.empty()) << n->reason;
  } else {
    EXPECT_EQ(n->reason, admin) << "Slurm 23.11+ without accounting keeps the old reason";
  }
  // slurmctld keeps reason times in seconds: the admin's next drain is a later one.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));

  agent::DrainSteps steps = agent::libslurm_drain_steps(*client_, c.node());
  const auto drain = steps.drain_keeping_reason;
  steps.drain_keeping_reason = [&c, drain, admin](std::string& e) {
    EXPECT_TRUE(
        c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=drain", "reason=" + admin})
            .ok());
    return drain(e);
  };
  EXPECT_FALSE(agent::drain_in_steps(steps, "triage: gpu reset storm [boot 3f2a9c1b]", error));
  EXPECT_NE(error.find("drained by someone else meanwhile"), std::string::npos) << error;
  n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_EQ(n->reason, admin) << "our drain replaced nothing";
  EXPECT_EQ(agent::drain_owner(*n), agent::DrainOwner::kAdmin);
}

TEST_F(SlurmClientTest, OurDrainInTwoStepsIsReadBackAsOurs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string error;
  ASSERT_TRUE(client_->drain_node(c.node(), "GPU fell off the bus [boot 3f2a9c1b]", error))
      << error;
  const auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_EQ(n->reason, "triage: GPU fell off the bus [boot 3f2a9c1b]");
  EXPECT_EQ(agent::drain_owner(*n), agent::DrainOwner::kOurs);
  EXPECT_EQ(agent::drain_reason_boot(n->reason), "3f2a9c1b");
}

TEST_F(SlurmClientTest, ADownNodeIsLeftAlone) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_TRUE(
      c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=down", "reason=cable pulled"})
          .ok());
  std::string error;
  auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_TRUE(n->down);
  EXPECT_EQ(n->state.rfind("DOWN", 0), 0u) << n->state;
  EXPECT_FALSE(client_->drain_node(c.node(), "whatever", error));
  EXPECT_NE(error.find("cable pulled"), std::string::npos) << error;
  n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->reason, "cable pulled");
}

TEST_F(SlurmClientTest, OurDrainIsLiftedOnlyWhileItsReasonIsStillExactlyOurs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string error;
  ASSERT_TRUE(client_->drain_node(c.node(), "GPU fell off the bus [boot 3f2a9c1b]", error))
      << error;
  auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  const std::string ours = n->reason;
  EXPECT_EQ(ours, "triage: GPU fell off the bus [boot 3f2a9c1b]");

  EXPECT_FALSE(client_->undrain_node(c.node(), "triage: something else", error));
  EXPECT_NE(error.find("not lifting"), std::string::npos) << error;
  EXPECT_EQ(c.node_state(), "drained");

  ASSERT_TRUE(client_->undrain_node(c.node(), ours, error)) << error;
  n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value()) << error;
  EXPECT_FALSE(n->drain);
  // IDLE, perhaps +NOT_RESPONDING while slurmd re-registers after an earlier test's DOWN.
  EXPECT_EQ(n->state.rfind("IDLE", 0), 0u) << n->state;
  // 22.05 clears the reason; from 23.11 on, without accounting storage, Slurm leaves it on the
  // idle node (agent/slurm/slurm_compat.h), where it makes no drain of anybody's.
  if (slurm_compat::kResumeClearsReasonWithoutAccounting) {
    EXPECT_TRUE(n->reason.empty()) << "UNDRAIN clears the reason: " << n->reason;
  } else {
    EXPECT_EQ(n->reason, ours) << "Slurm 23.11+ without accounting keeps it";
  }
  EXPECT_EQ(agent::drain_owner(*n), agent::DrainOwner::kNone);
  EXPECT_EQ(c.node_state().rfind("idle", 0), 0u) << c.node_state();
  EXPECT_FALSE(client_->undrain_node(c.node(), ours, error)) << "nothing left to lift";
}

TEST_F(SlurmClientTest, AnAdminWhoDrainsAgainOverOurDrainOwnsIt) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string error;
  ASSERT_TRUE(client_->drain_node(c.node(), "GPU fell off the bus [boot 3f2a9c1b]", error))
      << error;
  ASSERT_TRUE(
      c.as_root({"scontrol", "update", "nodename=" + c.node(), "state=drain", "reason=RMA the GPU"})
          .ok());
  EXPECT_FALSE(
      client_->undrain_node(c.node(), "triage: GPU fell off the bus [boot 3f2a9c1b]", error));
  EXPECT_NE(error.find("RMA the GPU"), std::string::npos) << error;
  const auto n = client_->load_node(c.node(), error);
  ASSERT_TRUE(n.has_value());
  EXPECT_TRUE(n->drain);
  EXPECT_EQ(n->reason, "RMA the GPU");
}

TEST_F(SlurmClientTest, AnUnknownNodeCannotBeDrained) {
  CLUSTER_OR_FAIL(g_env);
  std::string error;
  EXPECT_FALSE(client_->drain_node("no-such-node", "x", error));
  EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  return triage::testing::run_with_cluster(argc, argv, "slurm_client_e2e_tests", {},
                                           &triage::testing::g_env);
}
