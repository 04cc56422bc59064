// Issue 30, "Children hold only what they need": every kind of child the agent starts (the log
// opener, the analyzer, a Slurm command) holds its standard descriptors and what it was handed,
// never what the agent has open for other jobs; and the log opener cannot be pointed at another
// process's open files through /proc (/proc/self/fd/N, a symlink to it, /dev/fd/N), nor at
// anything but a regular file.
#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/base/event_loop.h"
#include "agent/job_end/analysis_runner.h"
#include "agent/live/log_follower.h"
#include "agent/slurm/slurm_command_runner.h"
#include "common/child_process.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using testing::write_file;

// The job's owner: `nobody` when the tests run as root (so the children really drop), else us.
Identity owner() {
  return identity_for_uid(::geteuid() == 0 ? testing::kNobody : ::geteuid());
}

// The descriptors this process has open, but the one used to list them, as "0 1 2 ...".
std::string open_fds() {
  std::set<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return "cannot list /proc/self/fd";
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] != '.' && std::stoi(e->d_name) != ::dirfd(d)) fds.insert(std::stoi(e->d_name));
  }
  ::closedir(d);
  std::string s;
  for (const int fd : fds)
    s += (s.empty() ? "" : " ") + std::to_string(fd);
  return s;
}

bool holds(int fd) {
  return ::fcntl(fd, F_GETFD) >= 0;
}

// Another user's log as the agent holds it while following it: a file in a directory only its
// owner may enter (root's here), open in this process.
class OtherUsersLog {
 public:
  explicit OtherUsersLog(const TempDir& dir) : path_(dir / "private/slurm-7.out") {
    testing::make_dirs(dir / "private", 0700);
    write_file(path_, "0: torch.OutOfMemoryError: CUDA out of memory. SECRET of job 7\n", 0644);
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
  }
  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  UniqueFd fd_;
};

class ChildDescriptorsTest : public ::testing::Test {
 protected:
  TempDir dir{"children"};
  OtherUsersLog other{dir};
  void SetUp() override { ASSERT_TRUE(holds(other.fd())); }
};

// ---- The log opener ----

TEST_F(ChildDescriptorsTest, TheLogOpenersChildHoldsOnlyStdioAndItsEndOfTheSocket) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
  UniqueFd mine(sv[0]), theirs(sv[1]);
  // The opener's own child, with a body that reports what it holds instead of opening a log.
  ChildProcess child = ChildProcess::fork_call(owner_child_spec(owner(), theirs.get()), [&] {
    const std::string fds = open_fds();
    return ::send(theirs.get(), fds.data(), fds.size(), MSG_NOSIGNAL) < 0 ? 1 : 0;
  });
  theirs.reset();
  char buf[512] = {};
  const ssize_t n = ::recv(mine.get(), buf, sizeof buf - 1, 0);
  EXPECT_EQ(child.wait(), 0);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(buf, static_cast<size_t>(n)), "0 1 2 " + std::to_string(sv[1]));
  EXPECT_TRUE(holds(other.fd())) << "the agent keeps following the other user's log";
}

TEST_F(ChildDescriptorsTest, AProcSelfFdPathIsRefusedByName) {
  const std::string path = "/proc/self/fd/" + std::to_string(other.fd());
  for (const std::string& p :
       std::vector<std::string>{path, "/dev/fd/" + std::to_string(other.fd()),
                                "/proc/" + std::to_string(::getpid()) + "/fd/3", "/dev/stdout",
                                "//proc/./self/../self/fd/0"}) {
    const OwnerOpen o = open_as_owner(p, owner(), 10000);
    EXPECT_FALSE(o.fd) << p;
    EXPECT_EQ(o.err, EACCES) << p;
    EXPECT_NE(o.error.find(p), std::string::npos) << o.error;
    EXPECT_NE(o.error.find("refused"), std::string::npos) << o.error;
  }
}

TEST_F(ChildDescriptorsTest, ASymlinkToProcSelfFdIsRefusedWhateverTheNumber) {
  // N from 0 (open in the child: /dev/null) through numbers the agent holds, the other user's log
  // among them: none reaches anything.
  for (int n = 0; n <= std::max(other.fd(), 16); ++n) {
    const std::string link = dir / ("link-" + std::to_string(n));
    ASSERT_EQ(::symlink(("/proc/self/fd/" + std::to_string(n)).c_str(), link.c_str()), 0);
    const OwnerOpen o = open_as_owner(link, owner(), 10000);
    EXPECT_FALSE(o.fd) << link << " -> /proc/self/fd/" << n;
    // EACCES: refused for where it leads; ELOOP: the kernel refused to pass a descriptor link
    // (numbers the child does hold, such as its /dev/null).
    EXPECT_TRUE(o.err == EACCES || o.err == ELOOP) << n << ": " << o.error;
    EXPECT_NE(o.error.find(link), std::string::npos) << o.error;
  }
}

TEST_F(ChildDescriptorsTest, AChainOfSymlinksIntoProcIsRefusedToo) {
  ASSERT_EQ(::symlink("/dev/fd", (dir / "fds").c_str()), 0);
  ASSERT_EQ(::symlink((dir / "fds/0").c_str(), (dir / "chain").c_str()), 0);
  ASSERT_EQ(::symlink("/proc/self/status", (dir / "status").c_str()), 0);
  for (const std::string& p : {dir / "chain", dir / "status"}) {
    const OwnerOpen o = open_as_owner(p, owner(), 10000);
    EXPECT_FALSE(o.fd) << p;
    EXPECT_TRUE(o.err == EACCES || o.err == ELOOP) << o.error;
    EXPECT_NE(o.error.find(p), std::string::npos) << o.error;
  }
}

TEST_F(ChildDescriptorsTest, AFifoIsRefusedAtOnce) {
  const std::string fifo = dir / "slurm-8.out";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  const OwnerOpen o = open_as_owner(fifo, owner(), 10000);
  EXPECT_FALSE(o.fd);
  EXPECT_EQ(o.err, EINVAL);
  EXPECT_NE(o.error.find(fifo + " is a FIFO"), std::string::npos) << o.error;
}

TEST_F(ChildDescriptorsTest, AFollowerPointedAtProcSelfFdNeverHandsOutTheOtherUsersLines) {
  // The agent follows the other user's log, then a job whose log is a symlink to the number that
  // log has in the agent (and every number around it).
  LogFollower followed(FollowState{.path = other.path()},
                       identity_for_uid(::geteuid()));  // root's own file, as root
  const PollResult first = followed.poll();
  ASSERT_EQ(first.status, LogStatus::kFollowing) << first.error;
  ASSERT_EQ(first.chunks.size(), 1U);
  const int held = first.chunks.front().fd;
  for (int n = std::max(3, held - 4); n <= held + 4; ++n) {
    const std::string link = dir / ("slurm-9-" + std::to_string(n) + ".out");
    ASSERT_EQ(::symlink(("/proc/self/fd/" + std::to_string(n)).c_str(), link.c_str()), 0);
    LogFollower attacker(FollowState{.path = link}, owner());
    const PollResult r = attacker.poll();
    EXPECT_TRUE(r.chunks.empty()) << "fd " << n << " reached through " << link;
    EXPECT_EQ(r.status, LogStatus::kUnreadable) << n << ": " << r.error;
    EXPECT_NE(r.error.find(link), std::string::npos) << r.error;
  }
}

// ---- The analyzer ----

TEST_F(ChildDescriptorsTest, TheAnalyzerHoldsOnlyItsStandardDescriptors) {
  const std::string work = dir / "job";
  testing::make_dirs(work, 0777);
  EventLoop loop;
  AnalysisRunner runner(loop);
  AnalysisRequest req;
  req.job_id = 4242;
  req.argv = {testing::fake_analyzer_in(dir.path())};
  req.who = owner();
  req.stdin_data = nlohmann::json({{"job", {{"job_id", 4242}, {"work_dir", work}}}}).dump();
  req.timeout_ms = 30000;
  AnalysisOutcome got;
  runner.start(req, [&](AnalysisOutcome o) {
    got = std::move(o);
    loop.stop();
  });
  (void)loop.after(40000, [&] { loop.stop(); });
  loop.run();
  ASSERT_TRUE(got.started) << got.err;
  std::string record;
  for (const auto& e : fs::directory_iterator(work)) {
    if (e.path().filename().string().starts_with("analyzer-4242-")) record = e.path();
  }
  ASSERT_FALSE(record.empty()) << "the fake analyzer left no record; stderr: " << got.err;
  const auto r = nlohmann::json::parse(testing::read_file(record));
  // stdin (the evidence pipe), stdout and stderr (captured): nothing of the agent's.
  EXPECT_EQ(r["fds"], nlohmann::json::array({0, 1, 2})) << r["fds"];
  EXPECT_TRUE(holds(other.fd()));
}

// ---- A Slurm command ----

TEST_F(ChildDescriptorsTest, ASlurmCommandHoldsOnlyItsStandardDescriptors) {
  // The command lists its own descriptors above 2 (a shell builtin loop: nothing else is opened).
  const SlurmCommandResult r = run_slurm_command(
      {"sh", "-c", "for n in $(seq 3 1024); do [ -e /proc/$$/fd/$n ] && echo $n; done; echo end"},
      std::chrono::seconds(20));
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.out, "end\n");
  EXPECT_TRUE(holds(other.fd()));
}

}  // namespace
}  // namespace triage::agent
