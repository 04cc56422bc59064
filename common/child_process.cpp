#include "common/child_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include "common/text.h"
#include "common/time_util.h"

extern char** environ;

namespace triage {

namespace {

// ---- The child's side, between fork and exec: system calls only. ----

[[noreturn]] void report_and_exit(int report_fd, const char* step, int err,
                                  bool privileges = false) {
  // The step names are string literals: their address means the same in the parent.
  const SpawnFailure f{step, err, privileges};
  (void)!::write(report_fd, &f, sizeof f);
  ::_exit(127);
}

// Moves `fd` above the standard descriptors so that the dup2 calls cannot overwrite it.
int lift(int fd) {
  if (fd < 0 || fd > 2) return fd;
  return ::fcntl(fd, F_DUPFD_CLOEXEC, 3);
}

void reset_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) (void)::sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  (void)::sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Whether `fd` is the report pipe or one of the descriptors the child was handed.
bool kept(int fd, int report_fd, const int* keep, size_t n_keep) {
  if (fd == report_fd) return true;
  for (size_t i = 0; i < n_keep; ++i) {
    if (keep[i] == fd) return true;
  }
  return false;
}

// close_range(2) over every gap between the kept descriptors (`keep` ascending). False when the
// kernel has no close_range (before 5.9); the other closes then finish the job.
bool close_gaps(int report_fd, const int* keep, size_t n_keep) {
  unsigned from = 3;
  size_t i = 0;
  for (;;) {
    while (i < n_keep && keep[i] < static_cast<int>(from))
      ++i;
    int next = i < n_keep ? keep[i] : -1;
    if (report_fd >= static_cast<int>(from) && (next < 0 || report_fd < next)) next = report_fd;
    const unsigned to = next < 0 ? ~0U : static_cast<unsigned>(next) - 1;
    if (from <= to && ::syscall(SYS_close_range, from, to, 0U) != 0) return false;
    if (next < 0) return true;
    from = static_cast<unsigned>(next) + 1;
  }
}

// The kernel's own list of this process's descriptors (/proc/self/fd, read with getdents64 into a
// stack buffer: no allocation), closing each one not kept. Listed again after any was closed, as
// closing while reading a directory may skip entries. False when /proc cannot be read.
bool close_listed(int report_fd, const int* keep, size_t n_keep) {
  const int dir = ::open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return false;
  alignas(dirent64) char buf[4096];
  for (bool closed_any = true; closed_any;) {
    closed_any = false;
    if (::lseek(dir, 0, SEEK_SET) != 0) break;
    ssize_t got = 0;
    while ((got = ::getdents64(dir, buf, sizeof buf)) > 0) {
      for (ssize_t off = 0; off < got;) {
        // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast): the kernel's record layout
        const auto* e = reinterpret_cast<const dirent64*>(buf + off);
        off += e->d_reclen;
        int fd = 0;
        const char* c = e->d_name;
        for (; *c >= '0' && *c <= '9' && fd < (1 << 24); ++c)
          fd = fd * 10 + (*c - '0');
        if (*c != '\0' || c == e->d_name || fd < 3 || fd == dir) continue;
        if (kept(fd, report_fd, keep, n_keep)) continue;
        (void)::close(fd);
        closed_any = true;
      }
    }
    if (got < 0) {
      (void)::close(dir);
      return false;
    }
  }
  (void)::close(dir);
  return true;
}

// Closes every descriptor above 2 but the report pipe and `keep` (ascending): close_range where
// the kernel has it, else what /proc/self/fd lists, else every number below the descriptor limit.
void close_inherited(int report_fd, const int* keep, size_t n_keep) {
  if (close_gaps(report_fd, keep, n_keep) || close_listed(report_fd, keep, n_keep)) return;
  struct rlimit rl {};
  const int max_fd = ::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY
                         ? static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536))
                         : 65536;
  for (int fd = 3; fd < max_fd; ++fd) {
    if (!kept(fd, report_fd, keep, n_keep)) (void)::close(fd);
  }
}

// Everything up to the exec: descriptors, group, signals, directory, privileges. Returns the
// (possibly moved) report descriptor; reports and exits on failure.
int prepare_child(const ExecPlan& p, int report_fd, pid_t parent) {
  if (p.die_with_parent) {
    (void)::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before the prctl
  }
  if (p.own_process_group) (void)::setpgid(0, 0);
  reset_signals();
  report_fd = lift(report_fd);
  const int in = lift(p.stdin_fd), out = lift(p.stdout_fd), err = lift(p.stderr_fd);
  if (report_fd < 0 || (p.stdin_fd >= 0 && in < 0) || (p.stdout_fd >= 0 && out < 0) ||
      (p.stderr_fd >= 0 && err < 0)) {
    ::_exit(127);
  }
  if ((in >= 0 && ::dup2(in, 0) < 0) || (out >= 0 && ::dup2(out, 1) < 0) ||
      (err >= 0 && ::dup2(err, 2) < 0)) {
    report_and_exit(report_fd, "dup2", errno);
  }
  close_inherited(report_fd, p.keep_fds, p.keep_count);
  if (p.working_dir != nullptr && ::chdir(p.working_dir) != 0)
    report_and_exit(report_fd, "chdir", errno);
  if (p.run_as != nullptr) {
    const char* step = "";
    const int e = drop_privileges_raw(*p.run_as, &step);
    if (e != 0) report_and_exit(report_fd, step, e, true);
  }
  return report_fd;
}

// Forks; the child prepares itself per `plan` and then runs `then` (exec, or a function). Returns
// the pid, or -1 with `*failure` set when the child reported a failure before `then` (or fork
// failed). The report pipe is closed by exec (O_CLOEXEC) or by `then`, which is how the parent
// knows the preparation succeeded.
template <typename Then>
pid_t fork_prepared(const ExecPlan& plan, SpawnFailure* failure, Then then) noexcept {
  int rep[2];
  if (::pipe2(rep, O_CLOEXEC) != 0) {
    *failure = {"pipe", errno};
    return -1;
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    *failure = {"fork", errno};
    ::close(rep[0]);
    ::close(rep[1]);
    return -1;
  }
  if (pid == 0) {
    ::close(rep[0]);
    then(prepare_child(plan, rep[1], parent));
  }
  ::close(rep[1]);
  SpawnFailure got{};
  ssize_t n = 0;
  do {
    n = ::read(rep[0], &got, sizeof got);
  } while (n < 0 && errno == EINTR);
  ::close(rep[0]);
  if (n != static_cast<ssize_t>(sizeof got)) return pid;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  *failure = got;
  return -1;
}

// ---- The parent's side. ----

struct Pipe {
  UniqueFd read, write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw_errno("pipe", errno);
  return {UniqueFd(fds[0]), UniqueFd(fds[1])};
}

void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// The strings and descriptors an ExecPlan points into, owned for the duration of the spawn.
struct PreparedSpawn {
  std::vector<std::string> env_strings;
  std::vector<char*> argv, envp;
  UniqueFd devnull, child_in, child_out, child_err;
  std::vector<int> keep;
  ExecPlan plan;
};

void prepare(const ChildSpec& spec, PreparedSpawn& s, UniqueFd& in, UniqueFd& out, UniqueFd& err) {
  // Checked first, before a descriptor opened here can take a closed number, and in the parent,
  // where an error can still be thrown (a kept 0..2 would be overwritten by the dup2s).
  s.keep = spec.keep_fds;
  std::sort(s.keep.begin(), s.keep.end());
  s.keep.erase(std::unique(s.keep.begin(), s.keep.end()), s.keep.end());
  for (const int fd : s.keep) {
    if (fd <= 2 || ::fcntl(fd, F_GETFD) < 0) {
      throw std::system_error(
          EINVAL, std::generic_category(),
          "keep descriptor " + std::to_string(fd) + " in a child: not an open descriptor above 2");
    }
  }
  for (const auto& a : spec.argv)
    s.argv.push_back(const_cast<char*>(a.c_str()));
  s.argv.push_back(nullptr);
  if (spec.env) {
    s.env_strings = *spec.env;
    for (auto& e : s.env_strings)
      s.envp.push_back(e.data());
    s.envp.push_back(nullptr);
    s.plan.envp = s.envp.data();
  }
  const auto need_null = [&]() -> int {
    if (!s.devnull) {
      s.devnull.reset(::open("/dev/null", O_RDWR | O_CLOEXEC));
      if (!s.devnull) throw_errno("open /dev/null", errno);
    }
    return s.devnull.get();
  };
  if (spec.stdin_data) {
    Pipe p = make_pipe();
    s.child_in = std::move(p.read);
    in = std::move(p.write);
    s.plan.stdin_fd = s.child_in.get();
  } else if (!spec.inherit_stdin) {
    s.plan.stdin_fd = need_null();
  }
  const auto output = [&](ChildOutput to, UniqueFd& child_end, UniqueFd& parent_end) -> int {
    switch (to) {
      case ChildOutput::kCapture: {
        Pipe p = make_pipe();
        child_end = std::move(p.write);
        parent_end = std::move(p.read);
        return child_end.get();
      }
      case ChildOutput::kNull:
        return need_null();
      case ChildOutput::kInherit:
      case ChildOutput::kStdout:
        return -1;
    }
    return -1;
  };
  s.plan.stdout_fd = output(spec.stdout_to, s.child_out, out);
  s.plan.stderr_fd = spec.stderr_to == ChildOutput::kStdout
                         ? (s.plan.stdout_fd >= 0 ? s.plan.stdout_fd : 1)
                         : output(spec.stderr_to, s.child_err, err);
  s.plan.path = spec.argv.empty() ? nullptr : spec.argv.front().c_str();
  s.plan.argv = s.argv.data();
  s.plan.run_as = spec.run_as ? &*spec.run_as : nullptr;
  s.plan.working_dir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();
  s.plan.own_process_group = spec.own_process_group;
  s.plan.die_with_parent = spec.die_with_parent;
  s.plan.keep_fds = s.keep.data();
  s.plan.keep_count = s.keep.size();
}

[[noreturn]] void throw_spawn_failure(const ChildSpec& spec, const SpawnFailure& f) {
  const std::string program = spec.argv.empty() ? std::string("a function") : spec.argv.front();
  const std::string step = f.step;
  const std::string what = f.dropping_privileges && spec.run_as
                               ? "dropping privileges to uid " + std::to_string(spec.run_as->uid) +
                                     " for " + program + ": " + step
                               : step + " " + program;
  throw std::system_error(f.err, std::generic_category(), what);
}

int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

}  // namespace

pid_t spawn_raw(const ExecPlan& plan, SpawnFailure* failure) noexcept {
  return fork_prepared(plan, failure, [&plan](int report_fd) {
    for (size_t i = 0; i < plan.keep_count; ++i)
      (void)::fcntl(plan.keep_fds[i], F_SETFD, 0);  // handed to the program: survives the exec
    ::execve(plan.path, plan.argv, plan.envp != nullptr ? plan.envp : environ);
    report_and_exit(report_fd, "exec", errno);
  });
}

bool read_available(int fd, std::string& into, size_t cap, bool& truncated) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      const size_t room = cap > into.size() ? cap - into.size() : 0;
      const size_t take = std::min(static_cast<size_t>(n), room);
      into.append(buf, take);
      if (take < static_cast<size_t>(n)) truncated = true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

std::string find_executable(const std::string& name_or_path) {
  const auto executable = [](const std::string& p) {
    struct stat st {};
    return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
  };
  if (name_or_path.empty()) return {};
  if (name_or_path.find('/') != std::string::npos)
    return executable(name_or_path) ? name_or_path : std::string();
  const char* path = std::getenv("PATH");
  for (const auto dir : split(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + name_or_path;
    if (executable(candidate)) return candidate;
  }
  return {};
}

ChildProcess ChildProcess::spawn(const ChildSpec& spec) {
  if (spec.argv.empty()) throw std::system_error(EINVAL, std::generic_category(), "spawn: no argv");
  ChildProcess c;
  PreparedSpawn s;
  prepare(spec, s, c.in_, c.out_, c.err_);
  SpawnFailure f;
  const pid_t pid = spawn_raw(s.plan, &f);
  if (pid < 0) throw_spawn_failure(spec, f);
  c.pid_ = pid;
  c.group_ = spec.own_process_group;  // set up by the child before spawn_raw returned
  c.exit_fd_.reset(open_pidfd(pid));
  return c;
}

ChildProcess ChildProcess::fork_call(const ChildSpec& spec, const std::function<int()>& body) {
  ChildProcess c;
  PreparedSpawn s;
  prepare(spec, s, c.in_, c.out_, c.err_);
  (void)std::fflush(stdout);
  (void)std::fflush(stderr);
  SpawnFailure f;
  const pid_t pid = fork_prepared(s.plan, &f, [&body](int report_fd) {
    ::close(report_fd);
    int status = 70;
    try {
      status = body();
    } catch (const std::exception& e) {
      (void)std::fprintf(stderr, "slurm-triage: %s\n", e.what());
    }
    (void)std::fflush(stdout);
    (void)std::fflush(stderr);
    ::_exit(status);
  });
  if (pid < 0) throw_spawn_failure(spec, f);
  c.pid_ = pid;
  c.group_ = spec.own_process_group;
  c.exit_fd_.reset(open_pidfd(pid));
  return c;
}

ChildProcess::ChildProcess(ChildProcess&& o) noexcept
    : pid_(o.pid_),
      group_(o.group_),
      status_(o.status_),
      in_(std::move(o.in_)),
      out_(std::move(o.out_)),
      err_(std::move(o.err_)),
      exit_fd_(std::move(o.exit_fd_)) {
  o.pid_ = -1;
}

ChildProcess& ChildProcess::operator=(ChildProcess&& o) noexcept {
  if (this != &o) {
    release();
    pid_ = o.pid_;
    group_ = o.group_;
    status_ = o.status_;
    in_ = std::move(o.in_);
    out_ = std::move(o.out_);
    err_ = std::move(o.err_);
    exit_fd_ = std::move(o.exit_fd_);
    o.pid_ = -1;
  }
  return *this;
}

ChildProcess::~ChildProcess() {
  release();
}

void ChildProcess::release() {
  if (pid_ > 0 && !status_) {
    kill(SIGKILL);
    (void)wait();
  }
  pid_ = -1;
}

std::optional<int> ChildProcess::try_wait() {
  if (status_ || pid_ <= 0) return status_;
  int st = 0;
  pid_t got = 0;
  while ((got = ::waitpid(pid_, &st, WNOHANG)) < 0 && errno == EINTR) {
  }
  if (got == pid_) status_ = st;
  return status_;
}

std::optional<int> ChildProcess::wait_for(std::chrono::milliseconds timeout) {
  const int64_t deadline = monotonic_usec() + static_cast<int64_t>(timeout.count()) * 1000;
  for (;;) {
    if (try_wait()) return status_;
    const int64_t left_ms = (deadline - monotonic_usec() + 999) / 1000;
    if (left_ms <= 0) return std::nullopt;
    if (exit_fd_) {
      pollfd pfd{exit_fd_.get(), POLLIN, 0};
      (void)::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left_ms, 60000)));
    } else {
      ::usleep(static_cast<useconds_t>(std::min<int64_t>(left_ms, 10) * 1000));
    }
  }
}

int ChildProcess::wait() {
  if (status_ || pid_ <= 0) return status_.value_or(0);
  int st = 0;
  pid_t got = 0;
  while ((got = ::waitpid(pid_, &st, 0)) < 0 && errno == EINTR) {
  }
  status_ = got == pid_ ? st : 0;
  return *status_;
}

void ChildProcess::kill(int sig) {
  if (pid_ <= 0) return;
  if (group_) (void)::kill(-pid_, sig);
  if (!status_) (void)::kill(pid_, sig);
}

int ChildProcess::terminate(std::chrono::milliseconds grace) {
  if (status_) return *status_;
  kill(SIGTERM);
  if (const auto st = wait_for(grace)) return *st;
  kill(SIGKILL);
  return wait();
}

bool ChildResult::exited_ok() const {
  return !timed_out && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0;
}

namespace {

// The run_child loop's state: which pipes are still open and what they delivered.
struct Pump {
  ChildProcess& child;
  const std::string& input;
  size_t written = 0;
  ChildResult& result;
  const ChildLimits& limits;

  void feed() {
    while (written < input.size()) {
      const ssize_t n = ::write(child.in().get(), input.data() + written, input.size() - written);
      if (n > 0) {
        written += static_cast<size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      break;  // EPIPE: the program does not want the rest
    }
    child.in().reset();  // EOF for the program
  }

  void drain(UniqueFd& fd, std::string& into, size_t cap, bool& truncated) {
    if (fd && !read_available(fd.get(), into, cap, truncated)) fd.reset();
  }

  void drain_all() {
    drain(child.out(), result.out, limits.stdout_max, result.out_truncated);
    drain(child.err(), result.err, limits.stderr_max, result.err_truncated);
  }

  // One poll round of at most `wait_ms`. Returns true once the child has exited.
  bool step(int wait_ms) {
    pollfd fds[4];
    nfds_t n = 0;
    if (child.in()) fds[n++] = {child.in().get(), POLLOUT, 0};
    if (child.out()) fds[n++] = {child.out().get(), POLLIN, 0};
    if (child.err()) fds[n++] = {child.err().get(), POLLIN, 0};
    const bool have_exit_fd = child.exit_fd() >= 0;
    if (have_exit_fd) fds[n++] = {child.exit_fd(), POLLIN, 0};
    // Without a pidfd the exit is noticed by looking every 20 ms.
    const int r = ::poll(fds, n, have_exit_fd ? wait_ms : std::min(wait_ms, 20));
    if (r < 0 && errno != EINTR) throw_errno("poll", errno);
    if (child.in()) feed();
    drain_all();
    return child.try_wait().has_value();
  }
};

}  // namespace

ChildResult run_child(const ChildSpec& spec, const ChildLimits& limits) {
  const int64_t started = monotonic_usec();
  const int64_t deadline = started + static_cast<int64_t>(limits.timeout.count()) * 1000;
  ChildProcess child = ChildProcess::spawn(spec);
  for (UniqueFd* fd : {&child.in(), &child.out(), &child.err()}) {
    if (*fd) set_nonblocking(fd->get());
  }
  ChildResult result;
  static const std::string kNoInput;
  Pump pump{child, spec.stdin_data ? *spec.stdin_data : kNoInput, 0, result, limits};
  bool exited = false;
  while (!exited) {
    const int64_t left_ms = (deadline - monotonic_usec() + 999) / 1000;
    if (left_ms <= 0) break;
    exited = pump.step(static_cast<int>(std::min<int64_t>(left_ms, 60000)));
  }
  if (!exited) {
    result.timed_out = true;
    child.kill(SIGKILL);
  } else if (spec.own_process_group) {
    child.kill(SIGKILL);  // whatever it left running in its group goes with it
  }
  result.wait_status = child.wait();
  pump.drain_all();  // what it wrote before it ended; a descendant's later output is not awaited
  result.duration_ms = (monotonic_usec() - started) / 1000;
  return result;
}

}  // namespace triage
