// The whole chain on a real Slurm: spank_triage.so in slurmd/slurmstepd, slurm-triage-agent on
// the node, slurm-triage spawned by the agent as the job's owner. Jobs are submitted by a non-root
// user in the training harness's layout (outputs/<id>-<name>.log beside outputs/<id>-<name>/ with
// a `log` symlink), and the reports they leave are read back.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

TEST(Triage, TheDefaultReportIsTheUsersWithStatusClassAndRankExits) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(c, "nccl", "mixtral-8x7b",
                                        std::string(kStepLines) +
                                            "\nsrun -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then "
                                            "echo \"vm:1:1 [1] NCCL WARN Timeout waiting for "
                                            "all-reduce after 600000 ms\"; exit 1; fi; "
                                            "sleep 1'\nexit 1",
                                        {"-n", "2"});
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  expect_users_regular_file(c, j.job_dir() / "triage.md");
  expect_users_regular_file(c, j.job_dir() / "triage.json");
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["primary_failure"], "nccl-timeout");
  EXPECT_EQ(r["mode"], "basic");
  ASSERT_EQ(r["nodes"].size(), 1u) << r["nodes"].dump();
  const json& node = r["nodes"][0];
  EXPECT_EQ(node["host"], c.node());
  EXPECT_EQ(node["from_agent"], true) << "the exits came from slurmstepd through the agent";
  EXPECT_EQ(node["ranks"], json::array({0, 1}));
  EXPECT_NE(node["exit"].get<std::string>().find("exit 1"), std::string::npos) << node.dump();
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("NCCL WARN Timeout"), std::string::npos);
}

TEST(Triage, ARankKilledBySigkillIsNamedInTheNodeTable) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j =
      submit_layout_job(c, "sigkill", "deepseek-v3-lite",
                        std::string(kStepLines) +
                            "\nsrun -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then kill -9 $$; fi; "
                            "sleep 1'\nexit 137",
                        {"-n", "2"});
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r["status"], "failed");
  ASSERT_FALSE(r["nodes"].empty());
  EXPECT_NE(r["nodes"][0]["exit"].get<std::string>().find("SIGKILL"), std::string::npos)
      << r["nodes"].dump();
}

TEST(Triage, TriageOffWritesNothing) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(c, "off", "quiet-run", std::string(kStepLines) + "\nexit 1",
                                        {"--triage=off"});
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  for (const auto& e : fs::recursive_directory_iterator(j.dir)) {
    EXPECT_EQ(e.path().filename().string().find("triage"), std::string::npos) << e.path();
  }
}

TEST(Triage, ALogSymlinkToARootOnlyFileLeaksNothing) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string secret_text = "TOP-SECRET-" + std::to_string(getpid()) + "-do-not-leak";
  const fs::path secret = fs::path(c.state_dir()) / "root-only-secret.log";
  std::ofstream(secret) << "0: [2026-11-21 10:00:00] completed step: 1, " << secret_text << "\n"
                        << "NCCL WARN Timeout " << secret_text << "\n";
  chmod(secret.c_str(), 0600);
  const LayoutJob j = submit_layout_job(
      c, "leak", "sneaky",
      // The job points its log symlink at a file only root can read, hoping root reads it.
      "ln -sfn " + secret.string() + " $d/log\n" + kStepLines + "\nexit 1");
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  bool report = false;
  for (const auto& e : fs::recursive_directory_iterator(j.dir)) {
    // Only what was written into the job's tree; the test itself must not follow the job's link.
    if (e.is_symlink() || !e.is_regular_file()) continue;
    report = report || e.path().filename() == "triage.md";
    EXPECT_EQ(slurp(e.path()).find(secret_text), std::string::npos) << e.path() << " leaks it";
  }
  EXPECT_TRUE(report) << "a report is still written, saying the log could not be read";
}

TEST(Triage, APreplacedTriageMdSymlinkIsNotFollowed) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // World-writable, so that following the link would visibly change it.
  const fs::path victim = fs::path(c.state_dir()) / "precious.conf";
  std::ofstream(victim) << "precious\n";
  chmod(victim.c_str(), 0666);
  const LayoutJob j =
      submit_layout_job(c, "symlink", "trap",
                        "ln -sfn " + victim.string() + " $d/triage.md\nln -sfn " + victim.string() +
                            " $d/triage.json\n" + kStepLines + "\nexit 1");
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  EXPECT_EQ(slurp(victim), "precious\n");
  struct stat st {};
  ASSERT_EQ(lstat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  expect_users_regular_file(c, j.job_dir() / "triage.md");
}

TEST(Triage, AKernelOomInTheJobsCgroupIsThePrimaryFailureWithTheKernelLine) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j =
      submit_layout_job(c, "oom", "llama3-70b",
                        std::string(kStepLines) +
                            "\nsrun -n 1 bash -c 'echo $$ > '$d'/rank0.pid; "
                            "while [ ! -e '$d'/go ]; do sleep 0.1; done; kill -9 $$'");
  c.wait_running(j.id);
  const fs::path pid_file = j.job_dir() / "rank0.pid";
  for (int i = 0; i < 300 && !fs::exists(pid_file); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  std::string pid = slurp(pid_file);
  while (!pid.empty() && pid.back() == '\n')
    pid.pop_back();
  ASSERT_FALSE(pid.empty()) << c.logs();
  // What the kernel prints when a memory cgroup under slurmstepd.scope runs out.
  const std::string cg = "/system.slice/slurmstepd.scope/job_" + std::to_string(j.id);
  const std::string oom_line =
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=" +
      cg + ",task_memcg=" + cg + "/step_0/user/task_0,task=python3,pid=" + pid +
      ",uid=" + std::to_string(c.user_uid());
  {
    std::ofstream k(fs::path(c.state_dir()) / "kernel.log", std::ios::app);
    k << "[ 7001.100001] python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, "
         "oom_score_adj=0\n"
      << "[ 7001.100200] " << oom_line << "\n"
      << "[ 7001.100300] Memory cgroup out of memory: Killed process " << pid
      << " (python3) total-vm:94121212kB, anon-rss:81234567kB, file-rss:0kB, shmem-rss:0kB, UID:"
      << c.user_uid() << " pgtables:160000kB oom_score_adj:0\n";
  }
  std::this_thread::sleep_for(seconds(2));  // the agent reads the kernel log as it grows
  std::ofstream(j.job_dir() / "go") << "";
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r["primary_failure"], "oom-host") << r.dump(1);
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("oom-kill:constraint=CONSTRAINT_MEMCG"), std::string::npos) << md;
}

// GET <target> on the node's agent with a munge credential made by `as_user` (the test user) or
// by root, as curl sends it; the answer's head and body.
std::string agent_get(const SlurmCluster& c, const std::string& target, bool as_user) {
  std::string port;
  std::ifstream conf(fs::path(c.state_dir()) / "etc" / "triage.conf");
  for (std::string line; std::getline(conf, line);) {
    if (line.rfind("HttpPort=", 0) == 0) port = line.substr(9);
  }
  const std::string script = "curl -s -i -H \"Authorization: Munge $(munge -S '" + c.state_dir() +
                             "/munge/munge.sock' -s \"$1\")\" \"http://127.0.0.1:" + port + "$1\"";
  const std::vector<std::string> argv = {"bash", "-c", script, "agent_get", target};
  const CommandResult r = as_user ? c.as_user(c.state_dir(), argv) : c.as_root(argv);
  EXPECT_TRUE(r.ok()) << r.output;
  return r.output;
}

TEST(Triage, TheOwnerAskingForAnyWindowGetsOnlyTheKernelLinesOfItsJobsSpan) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // Another user's process, named by the kernel, well before the job (more than the 1 s
  // EvidenceSettleDelay this cluster's agent widens the job's span by).
  c.kernel_line(c.node(),
                "NVRM: Xid (PCI:0000:3b:00): 13, pid=4711, name=before-the-job, Graphics SM "
                "Warp Exception");
  const int64_t before =
      std::chrono::duration_cast<seconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  std::this_thread::sleep_for(seconds(4));
  const LayoutJob j =
      submit_layout_job(c, "window", "events-window",
                        std::string(kStepLines) + "\nwhile [ ! -e $d/go ]; do sleep 0.2; done");
  c.wait_running(j.id);
  std::this_thread::sleep_for(seconds(2));  // the job's start is on the agent by now
  c.kernel_line(c.node(),
                "NVRM: Xid (PCI:0000:3b:00): 13, pid=4712, name=while-the-job-ran, Graphics SM "
                "Warp Exception");
  std::this_thread::sleep_for(seconds(2));  // the agent reads the kernel log as it grows
  const std::string target = "/v1/jobs/" + std::to_string(j.id) +
                             "/events?start=" + std::to_string(before - 3600) +
                             "&end=" + std::to_string(before + 3600);

  const std::string owner = agent_get(c, target, true);
  EXPECT_NE(owner.find("HTTP/1.1 200"), std::string::npos) << owner;
  EXPECT_NE(owner.find("while-the-job-ran"), std::string::npos) << owner;
  EXPECT_EQ(owner.find("before-the-job"), std::string::npos)
      << "the owner's window is the job's own span: " << owner;
  // Root (a peer's agent) may ask about any window: the earlier line is there to be found.
  const std::string root = agent_get(c, target, false);
  EXPECT_NE(root.find("before-the-job"), std::string::npos) << root;
  EXPECT_NE(root.find("while-the-job-ran"), std::string::npos) << root;

  std::ofstream(j.job_dir() / "go") << "";
  EXPECT_EQ(c.wait_job(j.id), "COMPLETED");
}

// SIGSTOP on the agent for as long as the object lives; SIGCONT when it goes, even when an
// assertion ends the test early, so that the other tests find a running agent.
class FrozenAgent {
 public:
  explicit FrozenAgent(const SlurmCluster& c) {
    pid_ = static_cast<pid_t>(std::stol(slurp(fs::path(c.state_dir()) / "pids" / "agent")));
    if (::kill(pid_, SIGSTOP) != 0) pid_ = 0;
  }
  ~FrozenAgent() { thaw(); }
  FrozenAgent(const FrozenAgent&) = delete;
  FrozenAgent& operator=(const FrozenAgent&) = delete;
  bool frozen() const { return pid_ > 0; }
  void thaw() {
    if (pid_ > 0) ::kill(pid_, SIGCONT);
    pid_ = 0;
  }

 private:
  pid_t pid_ = 0;
};

// The messages the agent applied for a job, as its spool recorded them.
std::vector<json> applied_messages(const SlurmCluster& c, uint32_t id) {
  std::vector<json> out;
  std::istringstream lines(
      slurp(fs::path(c.inbox_dir()).parent_path() / "jobs" / (std::to_string(id) + ".jsonl")));
  std::string line;
  while (std::getline(lines, line)) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("m")) out.push_back(j["m"]);
  }
  return out;
}

size_t count_op(const std::vector<json>& msgs, const std::string& op) {
  return static_cast<size_t>(std::count_if(msgs.begin(), msgs.end(),
                                           [&](const json& m) { return m.value("op", "") == op; }));
}

// The node's state once the last job's epilog is through (the srun job is not waited for).
std::string settled_node_state(const SlurmCluster& c) {
  std::string state = c.node_state();
  for (int i = 0; i < 150 && state.find("completing") != std::string::npos; ++i) {
    std::this_thread::sleep_for(milliseconds(200));
    state = c.node_state();
  }
  return state;
}

TEST(Triage, AHungAgentCostsJobsNothingAndCatchesUpWhenItWakes) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // Generous for a loaded CI machine, yet far below what a plugin waiting on the agent would cost.
  constexpr double kEpilogBudgetMs = 1000;
  constexpr auto kLaunchBudget = seconds(10);
  std::vector<LayoutJob> jobs;
  {
    FrozenAgent frozen(c);
    ASSERT_TRUE(frozen.frozen());
    jobs.push_back(submit_layout_job(c, "frozen-ok", "clean-run",
                                     std::string(kStepLines) + "\nsrun -n 2 true\nexit 0",
                                     {"-n", "2"}));
    jobs.push_back(submit_layout_job(
        c, "frozen-fail", "nccl-run",
        std::string(kStepLines) +
            "\nsrun -n 2 bash -c 'if [ $SLURM_PROCID = 1 ]; then echo \"vm:1:1 [1] NCCL WARN "
            "Timeout waiting for all-reduce after 600000 ms\"; exit 1; fi'\nexit 1",
        {"-n", "2"}));
    // An interactive launch, timed: task start and exit go to the plugin while the agent sleeps.
    const std::string dir = c.make_job_dir("frozen-srun");
    const auto t0 = std::chrono::steady_clock::now();
    const CommandResult srun = c.as_user(dir, {"srun", "-n", "2", "true"}, {}, seconds(60));
    const auto launch = std::chrono::steady_clock::now() - t0;
    EXPECT_TRUE(srun.ok()) << srun.output;
    EXPECT_LT(launch, kLaunchBudget)
        << "srun took " << std::chrono::duration<double>(launch).count() << " s";

    EXPECT_EQ(c.wait_job(jobs[0].id), "COMPLETED");
    EXPECT_EQ(c.wait_job(jobs[1].id), "FAILED");
    for (const LayoutJob& j : jobs) {
      const auto ms = c.epilog_ms(j.id);
      ASSERT_TRUE(ms.has_value()) << c.logs();
      EXPECT_LT(*ms, kEpilogBudgetMs) << "job " << j.id;
      // The plugin fell back to the inbox: the agent was really asleep.
      EXPECT_EQ(count_op(c.inbox_messages(j.id), "job_end"), 1u) << "job " << j.id;
      EXPECT_FALSE(fs::exists(j.job_dir() / "triage.md")) << "nobody was awake to write it";
    }
    EXPECT_EQ(settled_node_state(c), "idle");
  }

  // Awake again: it takes the inbox (and the messages that waited in its socket's backlog, which
  // are the same ones) and writes every report, each message applied once.
  for (const LayoutJob& j : jobs) {
    const json summary = wait_for_analysis(c, j.id);
    expect_users_regular_file(c, j.job_dir() / "triage.md");
    const auto applied = applied_messages(c, j.id);
    EXPECT_EQ(count_op(applied, "job_end"), 1u) << summary.dump();
    EXPECT_EQ(count_op(applied, "task_exit"), 3u) << "batch + two ranks, once each";
    EXPECT_TRUE(c.inbox_messages(j.id).empty()) << "the inbox was drained";
  }
  const json failed = json::parse(slurp(jobs[1].job_dir() / "triage.json"));
  EXPECT_EQ(failed["status"], "failed");
  EXPECT_EQ(failed["primary_failure"], "nccl-timeout");
  ASSERT_EQ(failed["nodes"].size(), 1u);
  EXPECT_EQ(failed["nodes"][0]["from_agent"], true) << "the exits came through the inbox";
  EXPECT_EQ(failed["nodes"][0]["ranks"], json::array({0, 1}));
  EXPECT_EQ(json::parse(slurp(jobs[0].job_dir() / "triage.json"))["status"], "completed");
  EXPECT_EQ(settled_node_state(c), "idle");
  EXPECT_EQ(c.node_reason(), "none");
}

// Issue 29: another user holding a thousand connections to the agent's socket (idle ones and
// half-sent lines, every refused one opened again) while a job runs. The plugin's messages (with
// the issue's 50 ms budget as its acknowledgement timeout) all reach the agent directly: none
// falls back to the inbox.
constexpr const char* kSocketFlooder = R"PY(
import os, socket, sys, time
path, seconds, ready, stop = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4]
refused = 0
def one(i):
    global refused
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        refused += 1
        return None
    try:
        if i % 2:
            s.send(b'{"op":"health","pad":"')
    except OSError:
        pass  # refused already: the loop below reads why
    s.setblocking(False)
    return s
conns = [one(i) for i in range(1000)]
open(ready, "w").close()
end = time.time() + seconds
while time.time() < end and not os.path.exists(stop):
    for i, s in enumerate(conns):
        if s is not None:
            try:
                got = s.recv(4096)
            except BlockingIOError:
                continue
            except OSError:
                got = b""
            if b'"refused":"per-uid"' in got:
                refused += 1
            s.close()
        conns[i] = one(i)
        time.sleep(0.001)
    time.sleep(0.001)
print("refused", refused)
)PY";

// The agent's count of inbox files it applied (each one a message the plugin could not deliver).
double inbox_files_applied(const SlurmCluster& c) {
  std::ifstream conf(c.state_dir() + "/etc/triage.conf");
  std::string line;
  std::string address;
  std::string port;
  while (std::getline(conf, line)) {
    if (line.rfind("HttpAddress=", 0) == 0) address = line.substr(12);
    if (line.rfind("HttpPort=", 0) == 0) port = line.substr(9);
  }
  const CommandResult r =
      c.as_root({"curl", "-s", "--max-time", "10", "http://" + address + ":" + port + "/metrics"});
  const std::string series =
      "triage_inbox_files_total{host=\"" + c.node() + "\",result=\"applied\"} ";
  const size_t at = r.output.find(series);
  if (at == std::string::npos) return -1;
  return std::stod(r.output.substr(at + series.size()));
}

TEST(Triage, AUserFloodingTheAgentsSocketSendsNoneOfAJobsMessagesToTheInbox) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const double applied_before = inbox_files_applied(c);
  ASSERT_GE(applied_before, 0) << "no metrics from the agent";
  const std::string flood_dir = c.make_job_dir("flood", SlurmCluster::kOtherUser);
  { std::ofstream(flood_dir + "/flood.py") << kSocketFlooder; }
  const std::string ready = flood_dir + "/ready";
  const std::string stop = flood_dir + "/stop";  // written by root when the job is done
  CommandResult flood;
  std::thread flooder([&] {
    flood = c.as(SlurmCluster::kOtherUser, flood_dir,
                 {"/usr/bin/python3", flood_dir + "/flood.py", c.socket_path(), "30", ready, stop},
                 {}, seconds(40));
  });
  for (int i = 0; i < 200 && !fs::exists(ready); ++i)
    std::this_thread::sleep_for(milliseconds(100));
  EXPECT_TRUE(fs::exists(ready)) << "the flood did not start";

  const std::string dir = c.make_job_dir("flooded");
  uint32_t id = 0;
  {
    const std::string plugstack = c.state_dir() + "/etc/plugstack.conf";
    std::string original;
    std::getline(std::ifstream(plugstack), original);
    std::ofstream(plugstack) << original << " timeout_ms=50\n";
    id = c.sbatch(dir, {"-n", "2", "--triage=basic", "--wrap", "srun -n 2 true"});
    EXPECT_EQ(c.wait_job(id), "COMPLETED");
    std::ofstream(plugstack) << original << "\n";
  }
  std::ofstream(stop).close();
  flooder.join();
  EXPECT_TRUE(flood.ok()) << flood.output;
  const size_t at = flood.output.find("refused ");
  ASSERT_NE(at, std::string::npos) << flood.output;
  EXPECT_GE(std::stol(flood.output.substr(at + 8)), 900) << "the flood was held to its share";

  const auto applied = applied_messages(c, id);
  EXPECT_EQ(count_op(applied, "job_start"), 1u);
  EXPECT_EQ(count_op(applied, "task_exit"), 3u) << "batch + two ranks";
  EXPECT_EQ(count_op(applied, "job_end"), 1u);
  EXPECT_EQ(inbox_files_applied(c), applied_before) << "a message went through the inbox";
  EXPECT_TRUE(c.inbox_messages(id).empty());
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  // The kernel log the OOM test writes to; the agent follows it.
  options.agent_settings = {"KernelSource=file", "KernelPath=@STATE@/kernel.log",
                            "EvidenceSettleDelay=1s"};
  return triage::testing::run_with_cluster(argc, argv, "triage_e2e_tests", options,
                                           &triage::testing::g_env);
}
