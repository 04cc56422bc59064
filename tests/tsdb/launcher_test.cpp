// The private read-only prometheus: started on a copy, proven to be ours, stopped by pid, and gone
// with its copy afterwards, also when the analysis throws or is killed outright.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "analyzer/tsdb/local_prometheus.h"
#include "analyzer/tsdb/prom_client.h"
#include "analyzer/tsdb/server_guardian.h"
#include "analyzer/tsdb/tsdb_dir.h"
#include "common/safe_io.h"
#include "common/time_util.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

namespace fs = std::filesystem;

// Alive and not a zombie (a reparented zombie may never be reaped inside a container).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

bool wait_gone(pid_t pid, const std::string& dir, int64_t usec) {
  const int64_t deadline = monotonic_usec() + usec;
  while (monotonic_usec() < deadline) {
    if (!running(pid) && !fs::exists(dir)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class LauncherTest : public TsdbTest {
 protected:
  LaunchOptions options() const {
    LaunchOptions o;
    o.binary = find_executable("prometheus");
    o.scratch_parent = dir_ + "/scratch";
    o.label = "launcher-test";
    o.ready_timeout = std::chrono::milliseconds(30000);
    return o;
  }
  // Copies the job's TSDB into the server's directory and starts it.
  void serve_job(LocalPrometheus& lp) const {
    copy_tsdb(scan_tsdb_dir(job_dir()), lp.data_dir(), {});
    lp.start();
  }
  void make_tsdb() {
    Scenario sc({.hosts = {"node001"}, .gpus_per_host = 1, .rdma_per_host = 1, .duration_s = 900});
    sc.build_tsdb(job_dir());
  }
};

TEST_F(LauncherTest, ServesTheCopyOnLoopbackAndStopsByPid) {
  make_tsdb();
  pid_t server = -1;
  std::string scratch;
  {
    LocalPrometheus lp(options());
    scratch = lp.scratch_dir();
    EXPECT_EQ(fs::status(scratch).permissions() & fs::perms::all, fs::perms::owner_all);
    serve_job(lp);
    server = lp.server_pid();
    EXPECT_TRUE(running(server));
    EXPECT_EQ(lp.url().rfind("http://127.0.0.1:", 0), 0u);
    PromClient c(lp.url());
    EXPECT_TRUE(c.ready(std::chrono::milliseconds(1000)));
    const auto names = c.label_values("__name__");
    EXPECT_NE(std::find(names.begin(), names.end(), "hw_gpu_power_watts"), names.end());
    EXPECT_EQ(c.flags().at("storage.tsdb.retention.time"), "100y");
  }
  EXPECT_FALSE(running(server));
  EXPECT_FALSE(fs::exists(scratch));
  // The job's own directory is untouched: no lock, no queries.active, no wal of the copy's server.
  EXPECT_FALSE(fs::exists(job_dir() + "/prometheus/queries.active"));
  EXPECT_FALSE(fs::exists(job_dir() + "/prometheus/wal"));
}

TEST_F(LauncherTest, AnExceptionWhileQueryingStillStopsTheServerAndRemovesTheCopy) {
  make_tsdb();
  pid_t server = -1;
  std::string scratch;
  try {
    LocalPrometheus lp(options());
    scratch = lp.scratch_dir();
    serve_job(lp);
    server = lp.server_pid();
    throw std::runtime_error("a playbook blew up");
  } catch (const std::runtime_error&) {
  }
  EXPECT_FALSE(running(server));
  EXPECT_FALSE(fs::exists(scratch));
}

TEST_F(LauncherTest, AnAnalyserKilledWithSigkillLeavesNoServerAndNoCopyBehind) {
  make_tsdb();
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    try {
      LocalPrometheus lp(options());
      serve_job(lp);
      const std::string msg = std::to_string(lp.server_pid()) + " " +
                              std::to_string(lp.guardian_pid()) + " " + lp.scratch_dir() + "\n";
      (void)!::write(fds[1], msg.data(), msg.size());
      (void)::raise(SIGKILL);  // no destructor, no atexit, nothing of ours runs
    } catch (...) {
    }
    ::_exit(3);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[512];
  ssize_t n = 0;
  while ((n = ::read(fds[0], buf, sizeof buf)) > 0)
    msg.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int st = 0;
  ::waitpid(child, &st, 0);
  ASSERT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) << "child status " << st << ": " << msg;
  std::istringstream in(msg);
  pid_t server = 0, guardian = 0;
  std::string scratch;
  in >> server >> guardian >> scratch;
  ASSERT_GT(server, 0);
  EXPECT_TRUE(wait_gone(server, scratch, 15'000'000))
      << "server " << server << " or " << scratch << " outlived the analysis";
  EXPECT_TRUE(wait_gone(guardian, scratch, 5'000'000));
}

TEST_F(LauncherTest, APortSomeoneHoldsIsNeverUsed) {
  make_tsdb();
  // Someone (an ssh tunnel to a live job's Prometheus, say) listens on the preferred port.
  const triage::UniqueFd holder(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const int s = holder.get();
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(s, 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
  const uint16_t held = ntohs(a.sin_port);
  EXPECT_NE(pick_free_loopback_port(held), held);
  auto o = options();
  o.port_hint = held;
  {
    LocalPrometheus lp(o);
    serve_job(lp);
    EXPECT_NE(lp.port(), held);
  }
  // The holder still owns its port.
  EXPECT_TRUE(port_accepts(held));
}

TEST_F(LauncherTest, AMissingBinaryIsAClearErrorAndLeavesNothing) {
  auto o = options();
  o.binary = dir_ + "/no-such-prometheus";
  std::string scratch;
  try {
    LocalPrometheus lp(o);
    scratch = lp.scratch_dir();
    lp.start();
    FAIL() << "started a missing binary";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("no-such-prometheus"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("No such file"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(scratch.empty());
  EXPECT_FALSE(fs::exists(scratch));
}

TEST_F(LauncherTest, ACorruptTsdbIsReportedWithTheServersOwnWords) {
  make_tsdb();
  const auto scan = scan_tsdb_dir(job_dir());
  ASSERT_FALSE(scan.blocks.empty());
  // A block whose index is garbage: Prometheus refuses to open the storage.
  std::ofstream(job_dir() + "/prometheus/" + scan.blocks.front().ulid + "/index", std::ios::trunc)
      << "garbage";
  std::string scratch;
  try {
    LocalPrometheus lp(options());
    scratch = lp.scratch_dir();
    serve_job(lp);
    FAIL() << "prometheus accepted a garbage index";
  } catch (const LaunchError& e) {
    EXPECT_NE(std::string(e.what()).find("exited"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("corrupted block"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(scratch));
}

TEST_F(LauncherTest, TreeRemovalNeverFollowsASymlinkOut) {
  fs::create_directories(dir_ + "/tree/a/b/c");
  fs::create_directories(dir_ + "/outside");
  std::ofstream(dir_ + "/outside/keep") << "x";
  std::ofstream(dir_ + "/tree/a/b/c/f") << "x";
  fs::create_symlink(dir_ + "/outside", dir_ + "/tree/a/link");
  fs::create_symlink(dir_ + "/outside/keep", dir_ + "/tree/filelink");
  EXPECT_EQ(remove_tree_raw((dir_ + "/tree").c_str()), 0);
  EXPECT_FALSE(fs::exists(dir_ + "/tree"));
  EXPECT_TRUE(fs::exists(dir_ + "/outside/keep"));
  EXPECT_EQ(remove_tree_raw((dir_ + "/does-not-exist").c_str()), 0);
}

}  // namespace
}  // namespace triage::tsdb::testing
