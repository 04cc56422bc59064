// Running another program (or a function) in a child process, the one way the tree does it:
// fork + execve with an argv (never a shell), an optional environment, an optional permanent
// privilege drop before exec, stdin from a buffer or /dev/null, stdout and stderr captured with
// caps, a timeout that kills the child (and its process group when it has one), and a failure to
// start reported to the parent with the errno of the step that failed. Every descriptor is
// O_CLOEXEC, and every child, exec'd or not, closes all but its three standard ones and those it is
// explicitly handed (ChildSpec::keep_fds) before anything else runs in it: a child dropped to a
// job's owner must not inherit what the agent holds open for other users (issue 30).
//
// Three layers, for three kinds of caller:
// - run_child: run to completion with a deadline (squeue, short probes);
// - ChildProcess: spawn, then read its pipes from your own loop, wait with a timeout, terminate
//   (the agent's analyses on its event loop, long-running servers);
// - spawn_raw: the allocation-free core, for code that itself runs after a fork in a threaded
//   process and may only make system calls (the TSDB server guardian).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/privilege.h"
#include "common/safe_io.h"

namespace triage {

// Where one of the child's standard outputs goes.
enum class ChildOutput {
  kCapture,  // a pipe the parent reads (ChildProcess::out/err)
  kNull,     // /dev/null
  kInherit,  // this process's own descriptor
  kStdout,   // stderr only: the same destination as stdout (2>&1)
};

struct ChildSpec {
  std::vector<std::string> argv;  // argv[0] is the program's path; no PATH search (find_executable)
  std::optional<std::vector<std::string>> env;  // "NAME=value" entries; nullopt: this environment
  std::optional<Identity> run_as;         // dropped to for good (groups, gid, uid) before exec
  std::string working_dir;                // chdir before exec; empty: unchanged
  std::optional<std::string> stdin_data;  // written to a pipe; nullopt: stdin is /dev/null
  bool inherit_stdin = false;             // without stdin_data: this process's stdin, not /dev/null
  ChildOutput stdout_to = ChildOutput::kCapture;
  ChildOutput stderr_to = ChildOutput::kCapture;
  bool own_process_group = false;  // setpgid(0, 0), so kill() reaches what the child started
  bool die_with_parent = false;    // PR_SET_PDEATHSIG SIGKILL: gone when this process dies
  // Descriptors above 2 the child keeps (fork_call: what the body uses, such as its end of a
  // socketpair; spawn: inherited by the program, close-on-exec cleared). Every other one is
  // closed in the child.
  std::vector<int> keep_fds;
};

// The child-side half of a spawn, prepared before fork so that spawn_raw allocates nothing.
struct ExecPlan {
  const char* path = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;  // nullptr: environ
  const Identity* run_as = nullptr;
  const char* working_dir = nullptr;  // nullptr: unchanged
  int stdin_fd = -1;                  // each -1: inherited as it is
  int stdout_fd = -1;
  int stderr_fd = -1;
  bool own_process_group = false;
  bool die_with_parent = false;
  // Descriptors above 2 that survive (ascending, each > 2); every other one above 2 is closed
  // before exec (spawn_raw clears close-on-exec on these).
  const int* keep_fds = nullptr;
  size_t keep_count = 0;
};

// Why a child could not be started: the step ("exec", "setresuid", "chdir", ...) and its errno.
struct SpawnFailure {
  const char* step = "";
  int err = 0;
  bool dropping_privileges = false;  // `step` is one of the privilege drop's calls
};

// Forks and execs `plan`. Async-signal-safe. Returns the child's pid, or -1 with `*failure` set
// when the fork failed or the child could not get as far as exec (it is reaped then).
pid_t spawn_raw(const ExecPlan& plan, SpawnFailure* failure) noexcept;

// A started child: its pid, the parent's ends of its pipes, and waiting and killing. The
// destructor kills (SIGKILL) and reaps a child that has not been waited for.
class ChildProcess {
 public:
  // Starts `spec`. Throws std::system_error naming the program and the failed step ("exec
  // /usr/bin/x: No such file or directory") when it cannot be started.
  static ChildProcess spawn(const ChildSpec& spec);

  // Forks a child that applies `spec`'s descriptors and privilege drop (argv and env are unused),
  // runs `body` and exits with what it returns (70 when it throws). For work that must happen in
  // another process without a program to exec: an isolated libslurm initialisation, or reading a
  // user's files as that user. The body finds only its standard descriptors and `spec.keep_fds`
  // open. Throws std::system_error as spawn does, and with EINVAL when a kept descriptor is not
  // an open one above 2.
  static ChildProcess fork_call(const ChildSpec& spec, const std::function<int()>& body);

  ChildProcess(ChildProcess&& o) noexcept;
  ChildProcess& operator=(ChildProcess&& o) noexcept;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess();

  pid_t pid() const { return pid_; }
  // The parent's pipe ends (empty unless captured or fed); reset() one to close it early.
  UniqueFd& in() { return in_; }
  UniqueFd& out() { return out_; }
  UniqueFd& err() { return err_; }
  // Readable once the child has exited (a pidfd), or -1 where the kernel has none.
  int exit_fd() const { return exit_fd_.get(); }

  // The raw wait status once reaped, without blocking (nullopt while it runs).
  std::optional<int> try_wait();
  // Waits up to `timeout` for the child to end; nullopt when it is still running.
  std::optional<int> wait_for(std::chrono::milliseconds timeout);
  int wait();
  // Sends `sig` to the child, and to its process group when it has its own. A no-op for a reaped
  // child without a group.
  void kill(int sig);
  // SIGTERM, up to `grace` to end, then SIGKILL; returns the wait status.
  int terminate(std::chrono::milliseconds grace);

 private:
  ChildProcess() = default;
  void release();

  pid_t pid_ = -1;
  bool group_ = false;
  std::optional<int> status_;
  UniqueFd in_, out_, err_, exit_fd_;
};

struct ChildLimits {
  std::chrono::milliseconds timeout{60000};
  size_t stdout_max = size_t{1} << 20;  // bytes kept; the rest is read and dropped
  size_t stderr_max = size_t{64} << 10;
};

struct ChildResult {
  int wait_status = 0;     // raw (common/wait_status.h decodes it)
  bool timed_out = false;  // killed at the deadline
  std::string out;
  std::string err;
  bool out_truncated = false;
  bool err_truncated = false;
  int64_t duration_ms = 0;

  bool exited_ok() const;  // exited normally with status 0
};

// Runs `spec` to completion: feeds stdin, captures output within the caps and kills the child (and
// its group) at the deadline. Throws std::system_error when it cannot be started.
ChildResult run_child(const ChildSpec& spec, const ChildLimits& limits);

// Appends what `fd` (non-blocking) has now, keeping `into` within `cap` bytes and setting
// `truncated` when bytes were dropped. Returns false at end of file or on a read error.
bool read_available(int fd, std::string& into, size_t cap, bool& truncated);

// The program a name stands for: a name with a '/' is taken as a path, any other is looked up in
// $PATH (/usr/local/bin:/usr/bin:/bin when unset). "" when it is not an executable regular file.
std::string find_executable(const std::string& name_or_path);

}  // namespace triage
