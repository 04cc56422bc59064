// Issue 14's "done when" on two nodes with accounting (MariaDB + slurmdbd): a --triage-requeue
// job whose node logs an Xid 79 during its first attempt is requeued once, away from that node,
// and completes on the other; sacct keeps the first attempt's triage summary; the node is
// drain-recommended; each attempt's report is in place. A user-code failure is not requeued, and
// its report says why. One that fails the same way twice without progress is not requeued a third
// time (issue 28, crashloop stop).
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

constexpr const char* kXid79 =
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.";

// The first attempt trains a little, waits for the test's go-ahead (the kernel line is in by
// then) and dies; a later attempt trains and completes.
constexpr const char* kTwoAttempts =
    "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then\n"
    "  for i in $(seq 1 4); do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done\n"
    "  while [ ! -e go ]; do sleep 0.2; done\n"
    "  echo 'RuntimeError: CUDA error: unspecified launch failure'\n"
    "  exit 1\n"
    "fi\n"
    "for i in $(seq 1 4); do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done\n"
    "echo 'training done'\n";

// Waits until the job has ended for good: not pending, running or completing. A requeued job may
// start only after Slurm's credential window (120 s by default); the test moves its start to now
// once it is pending again, as an admin could, to keep the run short.
std::map<std::string, std::string> wait_final(const SlurmCluster& c, uint32_t id,
                                              std::chrono::seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::map<std::string, std::string> j;
  bool nudged = false;
  while (std::chrono::steady_clock::now() < deadline) {
    j = c.job(id);
    const std::string st = j["JobState"];
    if (st == "COMPLETED" || (st == "FAILED" && j["Restarts"] != "0")) return j;
    if (!nudged && st == "PENDING" && j["Restarts"] == "1" && j["Reason"] != "JobHeldUser") {
      nudged =
          c.as_root({"scontrol", "update", "JobId=" + std::to_string(id), "StartTime=now"}).ok();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  throw std::runtime_error("job " + std::to_string(id) + " did not end: " + j["JobState"] + "\n" +
                           c.logs());
}

// The agent's health answer on its local socket.
json agent_health(const SlurmCluster& c, const std::string& node) {
  const CommandResult r =
      c.as_root({"python3", "-c",
                 "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
                 "s.sendall(b'{\"op\":\"health\"}\\n')\nb=b''\nwhile not b.endswith(b'\\n'):\n"
                 "  d=s.recv(65536)\n  if not d: break\n  b+=d\nprint(b.decode())",
                 c.socket_path(node)});
  return json::parse(r.output, nullptr, false);
}

// The job's accounting records, every attempt (-D), as "State|AdminComment" lines.
std::string sacct_rows(const SlurmCluster& c, uint32_t id) {
  return c
      .as_root(
          {"sacct", "-D", "-X", "-n", "-P", "-j", std::to_string(id), "-o", "State,AdminComment"})
      .output;
}

std::string wait_sacct(const SlurmCluster& c, uint32_t id, const std::string& text) {
  std::string rows;
  for (int i = 0; i < 100; ++i) {
    rows = sacct_rows(c, id);
    if (rows.find(text) != std::string::npos) return rows;
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  return rows;
}

TEST(Requeue, AnXidOnTheFirstNodeRequeuesTheJobOnceOntoTheOther) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j =
      submit_layout_job(c, "xid", "train", kTwoAttempts, {"-N", "1", "--triage-requeue"});
  c.wait_running(j.id);
  const std::string first = c.job(j.id)["NodeList"];
  const std::string other = first == c.nodes()[0] ? c.nodes()[1] : c.nodes()[0];
  c.kernel_line(first, kXid79);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the agent's file poll
  std::ofstream(j.dir + "/go") << "go\n";

  auto final = wait_final(c, j.id, seconds(150));
  EXPECT_EQ(final["JobState"], "COMPLETED") << c.logs();
  EXPECT_EQ(final["Restarts"], "1");
  EXPECT_EQ(final["NodeList"], other);
  EXPECT_NE(final["ExcNodeList"].find(first), std::string::npos) << final["ExcNodeList"];

  wait_for_analysis(c, j.id, other);  // the second attempt's report
  const std::string attempt0 = slurp(j.job_dir() / "triage.attempt0.md");
  EXPECT_NE(attempt0.find("### Requeue (--triage-requeue=1)"), std::string::npos) << attempt0;
  EXPECT_NE(attempt0.find("**requeued**"), std::string::npos) << attempt0;
  EXPECT_NE(attempt0.find(first), std::string::npos);
  expect_users_regular_file(c, j.job_dir() / "triage.attempt0.json");
  const json last = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(last["status"], "completed") << "triage.md is the latest attempt's";

  const std::string rows = wait_sacct(c, j.id, "blame=platform");
  EXPECT_NE(rows.find("triage="), std::string::npos) << rows;
  EXPECT_NE(rows.find("blame=platform;nodes=" + first), std::string::npos) << rows;
  EXPECT_NE(rows.find("triage.attempt0.md"), std::string::npos) << rows;

  const json h = agent_health(c, first);
  EXPECT_EQ(h["drain"]["recommended"], true) << h.dump(1);
}

TEST(Requeue, AUserCodeFailureIsNotRequeuedAndTheReportSaysWhy) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // On a healthy node: on one already recommended for drain a failure is the node's as well.
  std::string healthy;
  for (const std::string& n : c.nodes()) {
    if (agent_health(c, n)["drain"]["recommended"] != true) healthy = n;
  }
  ASSERT_FALSE(healthy.empty()) << "no node left that is not drain-recommended";
  const LayoutJob j = submit_layout_job(
      c, "usercode", "train",
      "echo 'Traceback (most recent call last):'\necho '  File \"train.py\", line 3, in <module>'\n"
      "echo \"KeyError: 'vocab_size'\"\nexit 1",
      {"-N", "1", "-w", healthy, "--triage-requeue=2"});
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  (void)wait_for_analysis(c, j.id, c.job(j.id)["BatchHost"]);
  // The report pass follows the analysis: wait for the attempt's copy.
  for (int i = 0; i < 100 && access((j.job_dir() / "triage.attempt0.md").c_str(), F_OK) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("**declined**"), std::string::npos) << md;
  EXPECT_NE(md.find("blamed on user-code"), std::string::npos) << md;
  EXPECT_EQ(c.job(j.id)["Restarts"], "0");
  EXPECT_EQ(c.job(j.id)["JobState"], "FAILED");
}

// The agents' log lines about job `id` (what they decided, and why).
std::string agent_lines_about(const SlurmCluster& c, uint32_t id) {
  const std::string tag = "job " + std::to_string(id) + ":";
  std::string out;
  for (const std::string& n : c.nodes()) {
    std::istringstream all(
        slurp(std::filesystem::path(c.state_dir()) / "log" / ("agent-" + n + ".out")));
    for (std::string line; std::getline(all, line);) {
      if (line.find(tag) != std::string::npos) out.append(n).append(": ").append(line).append("\n");
    }
  }
  return out;
}

// Every attempt trains the same four steps, waits for the test's go-ahead for this attempt (the
// kernel line of its node is in by then) and dies the same way.
constexpr const char* kSameFailureEveryAttempt =
    "for i in $(seq 1 4); do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done\n"
    "while [ ! -e go${SLURM_RESTART_COUNT:-0} ]; do sleep 0.2; done\n"
    "echo 'RuntimeError: CUDA error: unspecified launch failure'\n"
    "exit 1\n";

// Issue 28 part 5: the first attempt's Xid requeues the job onto the other node, where the same
// Xid ends the second attempt at the same step. The second attempt's leader finds the first's
// record on the node the requeue excluded, calls it a crashloop and does not requeue a third time
// (without the stop it would requeue again, with both nodes excluded).
TEST(Requeue, TheSameFailureTwiceWithoutProgressIsNotRequeuedAThirdTime) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(c, "crashloop", "train", kSameFailureEveryAttempt,
                                        {"-N", "1", "--triage-requeue=3"});
  c.wait_running(j.id);
  const std::string first = c.job(j.id)["NodeList"];
  c.kernel_line(first, kXid79);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the agent's file poll
  std::ofstream(j.dir + "/go0") << "go\n";

  // The second attempt: pending again after the requeue, started at once (see wait_final).
  std::map<std::string, std::string> job;
  bool nudged = false;
  ASSERT_TRUE(within(
      seconds(90),
      [&] {
        job = c.job(j.id);
        if (!nudged && job["JobState"] == "PENDING" && job["Restarts"] == "1" &&
            job["Reason"] != "JobHeldUser") {
          nudged =
              c.as_root({"scontrol", "update", "JobId=" + std::to_string(j.id), "StartTime=now"})
                  .ok();
        }
        return job["JobState"] == "RUNNING" && job["Restarts"] == "1";
      },
      std::chrono::milliseconds(300)))
      << job["JobState"] << " " << job["Restarts"] << "\n"
      << c.logs();
  const std::string second = job["NodeList"];
  ASSERT_NE(second, first);
  c.kernel_line(second, kXid79);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  std::ofstream(j.dir + "/go1") << "go\n";

  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  (void)wait_for_analysis(c, j.id, second);
  std::string md;
  ASSERT_TRUE(within(
      seconds(30),
      [&] {
        md = slurp(j.job_dir() / "triage.md");
        return md.find("**Requeue:**") != std::string::npos;
      },
      std::chrono::milliseconds(300)))
      << md;
  // Among the report's first lines, before "What happened".
  const size_t said = md.find("not requeued: the same failure twice without progress");
  EXPECT_NE(said, std::string::npos) << md << agent_lines_about(c, j.id);
  EXPECT_LT(said, md.find("### What happened")) << md;
  EXPECT_NE(md.find("in attempt 0 at step 4, no checkpoint"), std::string::npos) << md;

  const std::string rows = wait_sacct(c, j.id, "requeue=stopped-crashloop");
  EXPECT_NE(rows.find("requeue=stopped-crashloop"), std::string::npos) << rows;
  std::this_thread::sleep_for(std::chrono::seconds(2));  // nothing requeues it after the report
  job = c.job(j.id);
  EXPECT_EQ(job["JobState"], "FAILED");
  EXPECT_EQ(job["Restarts"], "1");
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  if (!triage::testing::accounting_available()) {
    (void)std::fprintf(stderr,
                       "requeue_e2e_tests: needs mariadb-server and slurmdbd "
                       "(scripts/install-deps installs them); skipped\n");
    return 77;
  }
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.plugin_more = "requeue=allow";
  options.nodes = 2;
  options.accounting = true;
  options.agent_settings = {"EvidenceSettleDelay=1s", "PeerFetchTimeout=3s", "KernelSource=file",
                            "KernelPath=@STATE@/kernel-@NODE@.log"};
  return triage::testing::run_with_cluster(argc, argv, "requeue_e2e_tests", options,
                                           &triage::testing::g_env);
}
