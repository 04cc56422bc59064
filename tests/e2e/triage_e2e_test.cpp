// The whole chain on a real Slurm: spank_triage.so in slurmd/slurmstepd, slurm-triage-agent on
// the node, slurm-triage spawned by the agent as the job's owner. Jobs are submitted by a non-root
// user in the training harness's layout (outputs/<id>-<name>.log beside outputs/<id>-<name>/ with
// a `log` symlink), and the reports they leave are read back.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_environment.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// A job in the harness layout: `body` runs after outputs/<id>-<name>/ and its log symlink exist.
struct LayoutJob {
  std::string dir;  // the submission directory (holds outputs/)
  std::string name;
  uint32_t id = 0;

  fs::path job_dir() const { return fs::path(dir) / "outputs" / (std::to_string(id) + "-" + name); }
  fs::path log() const {
    return fs::path(dir) / "outputs" / (std::to_string(id) + "-" + name + ".log");
  }
};

LayoutJob submit_layout_job(const SlurmCluster& c, const std::string& case_name,
                            const std::string& job_name, const std::string& body,
                            const std::vector<std::string>& extra_args = {}) {
  LayoutJob j;
  j.dir = c.make_job_dir(case_name);
  j.name = job_name;
  fs::create_directories(fs::path(j.dir) / "outputs");
  chown((j.dir + "/outputs").c_str(), c.user_uid(), c.user_gid());
  const std::string script = j.dir + "/job.sh";
  std::ofstream(script)
      << "#!/bin/bash\n"
      << "d=outputs/${SLURM_JOB_ID}-${SLURM_JOB_NAME}\n"
      << "mkdir -p $d && ln -sfn ../${SLURM_JOB_ID}-${SLURM_JOB_NAME}.log $d/log\n"
      << "now() { date '+%Y-%m-%d %H:%M:%S'; }\n"
      << "echo \"SLURM_JOB_ID=$SLURM_JOB_ID\"\n"
      << "echo \"PASSTHROUGH_ARGS=steps=1000\"\n"
      << body << "\n";
  std::vector<std::string> args = {"-J", job_name, "-o", "outputs/%j-%x.log"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back("job.sh");
  j.id = c.sbatch(j.dir, args);
  return j;
}

// The agent is done with a job once its spool holds the analysis summary (report written, skipped
// for --triage=off, or failed).
json wait_for_analysis(const SlurmCluster& c, uint32_t id, milliseconds timeout = seconds(90)) {
  const fs::path spool =
      fs::path(c.state_dir()) / "triage/spool/jobs" / (std::to_string(id) + ".jsonl");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream lines(slurp(spool));
    std::string line;
    while (std::getline(lines, line)) {
      auto j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("r", "") == "analysis") return j;
    }
    std::this_thread::sleep_for(milliseconds(200));
  }
  throw std::runtime_error("the agent never finished job " + std::to_string(id) + "\n" + c.logs());
}

void expect_users_regular_file(const SlurmCluster& c, const fs::path& p) {
  struct stat st {};
  ASSERT_EQ(lstat(p.c_str(), &st), 0) << p << " is missing";
  EXPECT_TRUE(S_ISREG(st.st_mode)) << p << " is not a regular file";
  EXPECT_EQ(st.st_uid, c.user_uid()) << p;
  EXPECT_EQ(st.st_gid, c.user_gid()) << p;
}

const char* const kSteps =
    "for i in $(seq 1 8); do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done";

TEST(Triage, TheDefaultReportIsTheUsersWithStatusClassAndRankExits) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(c, "nccl", "mixtral-8x7b",
                                        std::string(kSteps) +
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
                        std::string(kSteps) +
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
  const LayoutJob j =
      submit_layout_job(c, "off", "quiet-run", std::string(kSteps) + "\nexit 1", {"--triage=off"});
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
      "ln -sfn " + secret.string() + " $d/log\n" + kSteps + "\nexit 1");
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
                            " $d/triage.json\n" + kSteps + "\nexit 1");
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
                        std::string(kSteps) +
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

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options;
  options.plugin = SPANK_TRIAGE_SO;
  options.agent = SLURM_TRIAGE_AGENT;
  options.analyzer = SLURM_TRIAGE_CLI;
  // The kernel log the OOM test writes to; the agent follows it.
  options.agent_settings = {"KernelSource=file", "KernelPath=@STATE@/kernel.log",
                            "EvidenceSettleDelay=1s"};
  return triage::testing::run_with_cluster(argc, argv, "triage_e2e_tests", options,
                                           &triage::testing::g_env);
}
