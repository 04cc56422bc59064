// Issue 30, case 2, on a real Slurm: one user's job must not read another user's log through the
// agent. User A's job runs in a directory only A may enter and prints a GPU out-of-memory line
// (an early-warning class); the agent follows that log as A and holds it open. User B's job then
// makes its own StdOut a symlink to /proc/self/fd/N, N being the number A's log has in the agent
// (read from /proc/<agent>/fd, so that the test needs one job where an attacker would try every
// number), and the agent follows B as B. Before the fix the opener's child, dropped to B, still
// held the agent's descriptors and opened A's log through the link: A's line became B's early
// warning and reached B's triage.md. Now B's log is refused with a reason naming it, and nothing
// of A appears in B's report, spool record or the agent's log lines about B.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

// Only A's log holds this; it must never show up anywhere that is B's.
const std::string kSecret = "SECRET-OF-USER-A-4711";

// The descriptor number under which `pid` holds `file` open, or -1.
int fd_holding(const std::string& pid, const fs::path& file) {
  std::error_code ec;
  const fs::path want = fs::canonical(file, ec);
  if (ec) return -1;
  for (const auto& e : fs::directory_iterator("/proc/" + pid + "/fd", ec)) {
    std::error_code lec;
    if (fs::read_symlink(e.path(), lec) == want) return std::stoi(e.path().filename().string());
  }
  return -1;
}

// The agent's log lines that are about `job_id`.
std::string agent_lines_about(const SlurmCluster& c, uint32_t job_id) {
  std::istringstream all(slurp(fs::path(c.state_dir()) / "log" / "agent.out"));
  const std::string tag = "job " + std::to_string(job_id) + ":";
  std::string line, out;
  while (std::getline(all, line)) {
    if (line.find(tag) != std::string::npos) out += line + "\n";
  }
  return out;
}

// Every file under `dir` that contains kSecret (names, for the failure message).
std::string files_with_secret(const fs::path& dir) {
  std::string found;
  std::error_code ec;
  for (const auto& e : fs::recursive_directory_iterator(dir, ec)) {
    if (e.is_regular_file() && !e.is_symlink() &&
        slurp(e.path()).find(kSecret) != std::string::npos)
      found += e.path().string() + "\n";
  }
  return found;
}

TEST(ChildFds, AJobLoggingToProcSelfFdGetsNothingOfAnotherUsersFollowedLog) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  // A: its directory closed to everyone else, then the failure line, then quiet running.
  const LayoutJob a = submit_layout_job(
      c, "fds-owner", "private-oom",
      "chmod 700 \"$PWD\"\n"
      "echo \"0: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; " +
          kSecret + ")\"\nsleep 300",
      {"-t", "5"});
  c.wait_running(a.id);
  const std::string agent_pid = [&] {
    std::string pid;
    std::ifstream(fs::path(c.state_dir()) / "pids" / "agent") >> pid;
    return pid;
  }();
  ASSERT_FALSE(agent_pid.empty()) << c.logs();
  int n = -1;
  ASSERT_TRUE(within(seconds(30), [&] { return (n = fd_holding(agent_pid, a.log())) >= 0; }))
      << "the agent never followed A's log\n"
      << c.logs();
  ASSERT_TRUE(within(seconds(10),
                     [&] {
                       return (fs::status(a.dir).permissions() & fs::perms::others_exec) ==
                              fs::perms::none;
                     }))
      << a.dir << " is still open to other users";

  // B: its log becomes a symlink to that number before the agent first opens it.
  const LayoutJob b = submit_layout_job(
      c, "fds-reader", "via-proc",
      "rm -f \"$d.log\" && ln -s /proc/self/fd/" + std::to_string(n) + " \"$d.log\"\nsleep 300",
      {"-t", "5"}, SlurmCluster::kOtherUser);
  c.wait_running(b.id);
  ASSERT_TRUE(within(seconds(30),
                     [&] {
                       const std::string about_b = agent_lines_about(c, b.id);
                       return about_b.find("live log:") != std::string::npos ||
                              about_b.find("early warning") != std::string::npos;
                     }))
      << "the agent never followed B's log\n"
      << c.logs();
  EXPECT_TRUE(fs::is_symlink(b.log())) << "B's job did not plant its symlink";

  // B puts a plain log back before its job ends, so that the post-mortem analysis (run as B, and
  // holding nothing of the agent's) has a log to read and writes triage.md with B's live record:
  // before the fix, A's line was among its early warnings.
  const CommandResult restored =
      c.as(SlurmCluster::kOtherUser, b.dir,
           {"sh", "-c", "rm -f \"$0\" && echo '0: nothing to see' >\"$0\"", b.log().string()});
  ASSERT_TRUE(restored.ok()) << restored.output;
  (void)c.as_root({"scancel", std::to_string(b.id), std::to_string(a.id)});
  c.wait_job(b.id);
  c.wait_job(a.id);
  const nlohmann::json analysis = wait_for_analysis(c, b.id);
  EXPECT_EQ(analysis.value("result", ""), "ok") << analysis.dump();
  EXPECT_TRUE(fs::exists(b.job_dir() / "triage.md")) << analysis.dump();

  const std::string about_b = agent_lines_about(c, b.id);
  EXPECT_EQ(about_b.find(kSecret), std::string::npos) << about_b;
  EXPECT_EQ(about_b.find("early warning"), std::string::npos) << about_b;
  EXPECT_NE(about_b.find("live log: open " + b.log().string() + ": refused"), std::string::npos)
      << about_b;
  // B's own files (its report among them) and the agent's record of B.
  EXPECT_EQ(files_with_secret(b.dir), "");
  const fs::path record =
      fs::path(c.inbox_dir()).parent_path() / "jobs" / (std::to_string(b.id) + ".jsonl");
  ASSERT_TRUE(fs::exists(record)) << record;
  EXPECT_EQ(slurp(record).find(kSecret), std::string::npos) << slurp(record);
  // A's own record does have it: the line was there to be stolen.
  EXPECT_NE(agent_lines_about(c, a.id).find("early warning"), std::string::npos)
      << agent_lines_about(c, a.id);
}

// The other way Slurm allows: --output naming /proc/self/fd/N itself. slurmstepd runs such a job
// when N is open in it (1 and 2 always are: its output goes wherever the step's own stdout does),
// and the agent is handed the path as the job's StdOut. It is refused by name, before any child
// is forked.
TEST(ChildFds, AnOutputNamingProcSelfFdItselfIsRefusedByName) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("fds-direct", SlurmCluster::kOtherUser);
  std::ofstream(dir + "/job.sh") << "#!/bin/bash\necho '0: torch.OutOfMemoryError: CUDA out of "
                                    "memory.'\nsleep 300\n";
  const uint32_t id =
      c.sbatch_as(SlurmCluster::kOtherUser, dir, {"-t", "5", "-o", "/proc/self/fd/1", "job.sh"});
  c.wait_running(id);
  EXPECT_EQ(c.job(id)["StdOut"], "/proc/self/fd/1");
  const std::string refused = "live log: open /proc/self/fd/1: refused";
  const bool said = within(
      seconds(30), [&] { return agent_lines_about(c, id).find(refused) != std::string::npos; });
  (void)c.as_root({"scancel", std::to_string(id)});
  EXPECT_TRUE(said) << agent_lines_about(c, id) << c.logs();
  EXPECT_EQ(agent_lines_about(c, id).find("early warning"), std::string::npos)
      << agent_lines_about(c, id);
  c.wait_job(id);
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.agent_settings = {"EvidenceSettleDelay=1s"};
  return triage::testing::run_with_cluster(argc, argv, "child_fds_e2e_tests", options,
                                           &triage::testing::g_env);
}
