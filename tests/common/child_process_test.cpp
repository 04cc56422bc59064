#include "common/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <functional>
#include <set>
#include <system_error>

#include "common/time_util.h"

namespace triage {
namespace {

using std::chrono::milliseconds;

ChildSpec shell(const std::string& script) {
  ChildSpec s;
  s.argv = {"/bin/sh", "-c", script};
  return s;
}

// Killed: no longer running (a zombie waits for a reaper that may not be this test's process).
bool dead(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const auto close = line.rfind(')');
  return close != std::string::npos && line.substr(close + 2, 1) == "Z";
}

// The descriptors this process has open, but the one used to list them.
std::set<int> open_fds() {
  std::set<int> fds;
  DIR* d = ::opendir("/proc/self/fd");
  if (d == nullptr) return fds;
  while (const dirent* e = ::readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const int fd = std::stoi(e->d_name);
    if (fd != ::dirfd(d)) fds.insert(fd);
  }
  ::closedir(d);
  return fds;
}

std::string joined(const std::set<int>& fds) {
  std::string s;
  for (const int fd : fds)
    s += (s.empty() ? "" : " ") + std::to_string(fd);
  return s;
}

ChildLimits within(milliseconds timeout) {
  ChildLimits l;
  l.timeout = timeout;
  return l;
}

TEST(RunChild, CapturesStdoutAndStderrSeparatelyAndReportsTheExitStatus) {
  const ChildResult r =
      run_child(shell("echo out; echo err >&2; exit 3"), within(milliseconds(5000)));
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  ASSERT_TRUE(WIFEXITED(r.wait_status));
  EXPECT_EQ(WEXITSTATUS(r.wait_status), 3);
  EXPECT_FALSE(r.timed_out);
  EXPECT_FALSE(r.exited_ok());
}

TEST(RunChild, ReportsTheSignalThatEndedTheChild) {
  const ChildResult r = run_child(shell("kill -SEGV $$"), within(milliseconds(5000)));
  ASSERT_TRUE(WIFSIGNALED(r.wait_status));
  EXPECT_EQ(WTERMSIG(r.wait_status), SIGSEGV);
}

TEST(RunChild, FeedsStdinFromTheBufferAndGivesDevNullOtherwise) {
  ChildSpec fed = shell("cat");
  fed.stdin_data = std::string(200000, 'x');  // more than a pipe holds
  const ChildResult r = run_child(fed, within(milliseconds(5000)));
  EXPECT_EQ(r.out.size(), 200000u);
  EXPECT_TRUE(r.exited_ok());

  const ChildResult empty = run_child(shell("cat"), within(milliseconds(5000)));
  EXPECT_EQ(empty.out, "");
  EXPECT_TRUE(empty.exited_ok());
}

TEST(RunChild, KeepsOutputWithinTheCapAndStillLetsTheChildFinish) {
  ChildLimits l = within(milliseconds(10000));
  l.stdout_max = 1000;
  const ChildResult r = run_child(shell("head -c 300000 /dev/zero; echo done >&2"), l);
  EXPECT_EQ(r.out.size(), 1000u);
  EXPECT_TRUE(r.out_truncated);
  EXPECT_EQ(r.err, "done\n") << "the child was not blocked on a full pipe";
  EXPECT_TRUE(r.exited_ok());
}

TEST(RunChild, KillsTheChildAndItsGroupAtTheDeadline) {
  ChildSpec s = shell("sleep 30 & echo $!; wait");
  s.own_process_group = true;
  const int64_t before = monotonic_usec();
  const ChildResult r = run_child(s, within(milliseconds(300)));
  EXPECT_LT(monotonic_usec() - before, 5'000'000);
  EXPECT_TRUE(r.timed_out);
  ASSERT_TRUE(WIFSIGNALED(r.wait_status));
  EXPECT_EQ(WTERMSIG(r.wait_status), SIGKILL);
  const pid_t grandchild = static_cast<pid_t>(std::stol(r.out));
  // The background sleep was in the group: killed too.
  for (int i = 0; i < 100 && !dead(grandchild); ++i)
    ::usleep(10000);
  EXPECT_TRUE(dead(grandchild));
}

TEST(RunChild, MergesStderrIntoStdoutWhenAsked) {
  ChildSpec s = shell("echo one; echo two >&2");
  s.stderr_to = ChildOutput::kStdout;
  const ChildResult r = run_child(s, within(milliseconds(5000)));
  EXPECT_EQ(r.out, "one\ntwo\n");
  EXPECT_EQ(r.err, "");
}

TEST(RunChild, PassesOnlyTheGivenEnvironmentAndWorkingDirectory) {
  ChildSpec s = shell("echo \"$ONLY:$HOME:$(pwd)\"");
  s.env = std::vector<std::string>{"ONLY=yes"};
  s.working_dir = "/";
  const ChildResult r = run_child(s, within(milliseconds(5000)));
  EXPECT_EQ(r.out, "yes::/\n");
}

TEST(RunChild, ClosesEveryDescriptorButTheStandardOnes) {
  const int leaked = ::dup(0);  // not O_CLOEXEC on purpose
  const ChildResult r = run_child(shell("ls /proc/self/fd | wc -l"), within(milliseconds(5000)));
  ::close(leaked);
  // 0, 1, 2 and the one ls opens to read the directory.
  EXPECT_EQ(r.out, "4\n");
}

TEST(RunChild, AMissingExecutableIsAnErrorNamingItAndTheReason) {
  ChildSpec s;
  s.argv = {"/nonexistent/program"};
  try {
    (void)run_child(s, within(milliseconds(5000)));
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("exec /nonexistent/program"), std::string::npos)
        << e.what();
  }
}

TEST(RunChild, AMissingWorkingDirectoryIsReportedAsTheChdirThatFailed) {
  ChildSpec s = shell("true");
  s.working_dir = "/nonexistent/dir";
  EXPECT_THROW((void)run_child(s, within(milliseconds(5000))), std::system_error);
}

TEST(RunChild, DropsToTheGivenIdentityBeforeExec) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root";
  ChildSpec s = shell("id -u; id -g; id -G");
  s.run_as = Identity{65534, 65534, {65534}, "nobody"};
  const ChildResult r = run_child(s, within(milliseconds(5000)));
  EXPECT_EQ(r.out, "65534\n65534\n65534\n");
}

TEST(RunChild, AFailedPrivilegeDropIsReportedNotRunAsTheCaller) {
  if (::geteuid() == 0) GTEST_SKIP() << "root can change uid";
  ChildSpec s = shell("echo ran");
  s.run_as = Identity{::geteuid() + 1, ::getegid(), {}, "someone"};
  try {
    (void)run_child(s, within(milliseconds(5000)));
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_NE(std::string(e.what()).find("dropping privileges to uid"), std::string::npos)
        << e.what();
  }
}

TEST(ChildProcess, WaitsWithATimeoutAndTerminatesALongRunningChild) {
  ChildSpec s = shell("exec sleep 30");
  s.stdout_to = ChildOutput::kNull;
  s.stderr_to = ChildOutput::kNull;
  ChildProcess server = ChildProcess::spawn(s);
  EXPECT_GT(server.pid(), 0);
  EXPECT_FALSE(server.wait_for(milliseconds(50)).has_value());
  EXPECT_FALSE(server.try_wait().has_value());
  const int st = server.terminate(milliseconds(2000));
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
}

TEST(ChildProcess, SigkillsAChildThatIgnoresSigtermAfterTheGrace) {
  ChildSpec s = shell("trap '' TERM; echo ready; while :; do sleep 1; done");
  ChildProcess stubborn = ChildProcess::spawn(s);
  char c = 0;
  ASSERT_EQ(::read(stubborn.out().get(), &c, 1), 1);  // the trap is in place
  const int st = stubborn.terminate(milliseconds(200));
  ASSERT_TRUE(WIFSIGNALED(st));
  EXPECT_EQ(WTERMSIG(st), SIGKILL);
}

TEST(ChildProcess, ForkCallRunsTheFunctionAndReturnsItsStatus) {
  ChildSpec s;
  s.stdout_to = ChildOutput::kCapture;
  s.stderr_to = ChildOutput::kNull;
  ChildProcess c = ChildProcess::fork_call(s, [] {
    (void)!::write(1, "hi", 2);
    return 7;
  });
  std::string out;
  bool truncated = false;
  while (read_available(c.out().get(), out, 100, truncated)) {
  }
  const int st = c.wait();
  EXPECT_EQ(out, "hi");
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);
}

TEST(ChildProcess, ForkCallHoldsOnlyItsStandardDescriptorsAndTheOnesItIsHanded) {
  // What a forked body could otherwise reach: the parent's files, with and without close-on-exec
  // (without an exec that flag protects nothing).
  const UniqueFd secret(::open("/etc/hostname", O_RDONLY | O_CLOEXEC));
  const UniqueFd plain(::open("/etc/hostname", O_RDONLY));
  ASSERT_TRUE(secret && plain);
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd answer_r(p[0]), answer_w(p[1]);
  ChildSpec s;
  s.stdout_to = ChildOutput::kNull;
  s.stderr_to = ChildOutput::kNull;
  s.keep_fds = {answer_w.get()};
  ChildProcess c = ChildProcess::fork_call(s, [&] {
    write_all(answer_w.get(), joined(open_fds()));
    return 0;
  });
  answer_w.reset();
  const std::string held = read_fd_limited(answer_r.get(), 4096);
  EXPECT_EQ(c.wait(), 0);
  EXPECT_EQ(held, "0 1 2 " + std::to_string(p[1]));
  // The parent still holds what the child did not get.
  const std::set<int> parent = open_fds();
  EXPECT_TRUE(parent.count(secret.get()) == 1 && parent.count(plain.get()) == 1);
}

TEST(ChildProcess, ForkCallWithNothingHandedHoldsOnlyItsStandardDescriptors) {
  const UniqueFd extra(::open("/etc/hostname", O_RDONLY));
  ASSERT_TRUE(extra);
  ChildSpec s;
  s.stdout_to = ChildOutput::kCapture;
  s.stderr_to = ChildOutput::kNull;
  ChildProcess c = ChildProcess::fork_call(s, [] {
    const std::string fds = joined(open_fds());
    (void)!::write(1, fds.data(), fds.size());
    return 0;
  });
  const std::string out = read_fd_limited(c.out().get(), 4096);
  EXPECT_EQ(c.wait(), 0);
  EXPECT_EQ(out, "0 1 2");
}

TEST(ChildProcess, SpawnHandsAKeptDescriptorToTheProgramAcrossExec) {
  const UniqueFd handed(::open("/etc/hostname", O_RDONLY | O_CLOEXEC));
  const UniqueFd other(::open("/etc/hostname", O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(handed && other);
  const std::string fd = "/proc/self/fd/";
  ChildSpec s = shell("test -e " + fd + std::to_string(handed.get()) + " && echo handed; test -e " +
                      fd + std::to_string(other.get()) + " && echo other; exit 0");
  s.keep_fds = {handed.get()};
  const ChildResult r = run_child(s, within(milliseconds(5000)));
  EXPECT_EQ(r.out, "handed\n");
}

TEST(ChildProcess, AKeptDescriptorMustBeAnOpenOneAboveTheStandardThree) {
  ChildSpec s;
  s.stdout_to = ChildOutput::kNull;
  s.stderr_to = ChildOutput::kNull;
  s.keep_fds = {1};
  try {
    (void)ChildProcess::fork_call(s, [] { return 0; });
    ADD_FAILURE() << "keeping descriptor 1 was accepted";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), EINVAL);
    EXPECT_NE(std::string(e.what()).find("keep descriptor 1"), std::string::npos) << e.what();
  }
  int closed = ::open("/etc/hostname", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(closed, 3);
  ::close(closed);
  s.keep_fds = {closed};
  EXPECT_THROW((void)ChildProcess::fork_call(s, [] { return 0; }), std::system_error);
}

// Runs `fn` in a process of its own after `setup` (which returns false when it cannot be done);
// returns fn's exit status, 99 when the setup failed, 128 + the signal that ended it.
int in_a_process(const std::function<bool()>& setup, const std::function<int()>& fn) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(setup() ? fn() : 99);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

// close_range(2) fails with ENOSYS from here on, as on kernels before 5.9 (a seccomp filter).
bool without_close_range() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_close_range, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  const sock_fprog prog{static_cast<unsigned short>(std::size(filter)), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 &&
         ::syscall(SYS_close_range, 1000U, 1000U, 0U) != 0 && errno == ENOSYS;
}

// The extra descriptor `fd`'s fate in a forked child with nothing handed: 0 when it was closed,
// 1 when the child still held it.
int fork_call_closes(int fd) {
  ChildSpec s;
  s.stdout_to = ChildOutput::kNull;
  s.stderr_to = ChildOutput::kNull;
  ChildProcess c = ChildProcess::fork_call(s, [fd] { return ::fcntl(fd, F_GETFD) < 0 ? 0 : 1; });
  const int st = c.wait();
  return WIFEXITED(st) ? WEXITSTATUS(st) : 2;
}

TEST(ChildProcess, WithoutCloseRangeTheChildClosesWhatProcSelfFdLists) {
  const int status = in_a_process(without_close_range, [] {
    const int extra = ::open("/etc/hostname", O_RDONLY);
    const int high = ::fcntl(extra, F_DUPFD, 900);  // far above the others
    return fork_call_closes(extra) + fork_call_closes(high);
  });
  EXPECT_EQ(status, 0) << (status == 99 ? "no seccomp filter" : "the child held a descriptor");
}

TEST(ChildProcess, WithoutCloseRangeOrProcTheChildClosesEveryNumberBelowTheLimit) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to hide /proc in a mount namespace";
  const auto no_proc = [] {
    // A private mount namespace with an empty tmpfs over /proc: /proc/self/fd does not exist.
    return without_close_range() && ::unshare(CLONE_NEWNS) == 0 &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("none", "/proc", "tmpfs", 0, nullptr) == 0 &&
           ::access("/proc/self/fd", F_OK) != 0;
  };
  const int status = in_a_process(no_proc, [] {
    const int extra = ::open("/etc/hostname", O_RDONLY);
    const int high = ::fcntl(extra, F_DUPFD, 900);
    return fork_call_closes(extra) + fork_call_closes(high);
  });
  EXPECT_EQ(status, 0) << (status == 99 ? "could not hide /proc" : "the child held a descriptor");
}

TEST(ChildProcess, ADestroyedChildIsKilledAndReaped) {
  pid_t pid = -1;
  {
    ChildSpec s = shell("exec sleep 30");
    ChildProcess c = ChildProcess::spawn(s);
    pid = c.pid();
  }
  EXPECT_NE(::kill(pid, 0), 0) << "neither running nor a zombie";
}

}  // namespace
}  // namespace triage
