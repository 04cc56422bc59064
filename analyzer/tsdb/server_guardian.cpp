#include "analyzer/tsdb/server_guardian.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <system_error>

#include "common/child_process.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::tsdb {

namespace {

// ---- Code that runs in the guardian after fork(): system calls only. ----

constexpr size_t kCmdLen = 6;  // "P09190" start on a port, "S00000" stop

void raw_sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1000000L};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

size_t raw_utoa(unsigned long v, char* out) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0 && n < sizeof tmp);
  for (size_t i = 0; i < n; ++i)
    out[i] = tmp[n - 1 - i];
  return n;
}

// Sends "<tag><number>\n" to the parent. The parent may be gone; that is not an error here.
void report(int fd, char tag, long number) {
  char buf[32];
  size_t n = 0;
  buf[n++] = tag;
  if (number < 0) {
    buf[n++] = '-';
    number = -number;
  }
  n += raw_utoa(static_cast<unsigned long>(number), buf + n);
  buf[n++] = '\n';
  (void)::send(fd, buf, n, MSG_NOSIGNAL);
}

int remove_tree_at(int parent_fd, const char* name, int depth) {
  if (depth > 16) return ELOOP;
  const int fd = ::openat(parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 0;
    if (errno == ENOTDIR || errno == ELOOP) return ::unlinkat(parent_fd, name, 0) == 0 ? 0 : errno;
    return errno;
  }
  int result = 0;
  alignas(8) char buf[4096];
  // Entries are removed while reading, so read from the start again until nothing is left.
  for (int pass = 0; pass < 1000000; ++pass) {
    if (::lseek(fd, 0, SEEK_SET) < 0) {
      result = errno;
      break;
    }
    bool removed_any = false;
    bool failed_any = false;
    for (;;) {
      const ssize_t n = ::getdents64(fd, buf, sizeof buf);
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
        off += d->d_reclen;
        const char* nm = d->d_name;
        if (nm[0] == '.' && (nm[1] == '\0' || (nm[1] == '.' && nm[2] == '\0'))) continue;
        int rc = 0;
        if (d->d_type == DT_DIR) {
          rc = remove_tree_at(fd, nm, depth + 1);
        } else if (::unlinkat(fd, nm, 0) != 0) {
          rc = errno;
          // DT_UNKNOWN on some filesystems: it may be a directory after all.
          if (rc == EISDIR) rc = remove_tree_at(fd, nm, depth + 1);
        }
        if (rc == 0) {
          removed_any = true;
        } else {
          failed_any = true;
          result = rc;
        }
      }
    }
    if (!removed_any || failed_any) break;
  }
  ::close(fd);
  if (::unlinkat(parent_fd, name, AT_REMOVEDIR) != 0 && errno != ENOENT && result == 0)
    result = errno;
  return result;
}

struct GuardianPlan {
  const char* binary;
  char** argv;
  // Arguments holding "{port}": the template (prefix, suffix) and the buffer argv points at.
  struct PortArg {
    const char* prefix;
    size_t prefix_len;
    const char* suffix;
    size_t suffix_len;
    char* out;
  };
  PortArg* port_args;
  size_t n_port_args;
  const char* scratch;
  int ctrl;
  int status;
  int log;
  int devnull;
  long grace_ms;
  int max_fd;
};

void close_other_fds(const GuardianPlan& p) {
  for (int fd = 3; fd <= p.max_fd; ++fd) {
    if (fd != p.ctrl && fd != p.status && fd != p.log && fd != p.devnull) ::close(fd);
  }
}

pid_t start_server_raw(GuardianPlan& p, unsigned port, int* exec_errno) {
  for (size_t i = 0; i < p.n_port_args; ++i) {
    auto& a = p.port_args[i];
    size_t n = 0;
    std::memcpy(a.out, a.prefix, a.prefix_len);
    n += a.prefix_len;
    n += raw_utoa(port, a.out + n);
    std::memcpy(a.out + n, a.suffix, a.suffix_len);
    n += a.suffix_len;
    a.out[n] = '\0';
  }
  ExecPlan exec;
  exec.path = p.binary;
  exec.argv = p.argv;
  exec.stdin_fd = p.devnull;
  exec.stdout_fd = p.log;
  exec.stderr_fd = p.log;
  exec.die_with_parent = true;  // the server dies with its guardian, whatever kills the guardian
  SpawnFailure failure;
  const pid_t pid = spawn_raw(exec, &failure);
  if (pid < 0) *exec_errno = failure.err;
  return pid;
}

void stop_server_raw(pid_t server, long grace_ms) {
  if (server <= 0) return;
  ::kill(server, SIGTERM);
  int st = 0;
  for (long waited = 0; waited < grace_ms; waited += 20) {
    if (::waitpid(server, &st, WNOHANG) == server) return;
    raw_sleep_ms(20);
  }
  ::kill(server, SIGKILL);
  while (::waitpid(server, &st, 0) < 0 && errno == EINTR) {
  }
}

[[noreturn]] void guardian_main(GuardianPlan p) {
  ::setsid();  // out of the caller's process group: a Ctrl-C there must not skip our cleanup
  struct sigaction ign {};
  ign.sa_handler = SIG_IGN;
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU}) {
    (void)::sigaction(sig, &ign, nullptr);
  }
  ::dup2(p.devnull, 0);
  ::dup2(p.devnull, 1);
  ::dup2(p.devnull, 2);
  close_other_fds(p);

  pid_t server = -1;
  for (;;) {
    pollfd pfd{p.ctrl, POLLIN, 0};
    const int r = ::poll(&pfd, 1, server > 0 ? 100 : -1);
    if (server > 0) {
      int st = 0;
      if (::waitpid(server, &st, WNOHANG) == server) {
        report(p.status, 'X', st);
        server = -1;
      }
    }
    if (r <= 0) continue;
    char cmd[kCmdLen];
    size_t got = 0;
    while (got < kCmdLen) {
      const ssize_t n = ::read(p.ctrl, cmd + got, kCmdLen - got);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      got += static_cast<size_t>(n);
    }
    if (got == kCmdLen && cmd[0] == 'P' && server <= 0) {
      unsigned port = 0;
      for (size_t i = 1; i < kCmdLen; ++i)
        port = port * 10 + static_cast<unsigned>(cmd[i] - '0');
      int exec_errno = 0;
      server = start_server_raw(p, port, &exec_errno);
      if (server > 0) {
        report(p.status, 'R', server);
      } else {
        report(p.status, 'E', exec_errno);
      }
      continue;
    }
    // "S", a short read or EOF (the parent is gone): clean up and leave.
    break;
  }
  stop_server_raw(server, p.grace_ms);
  const int rc = remove_tree_raw(p.scratch);
  report(p.status, 'D', rc);
  ::_exit(0);
}

std::string describe_wait_status(int st) {
  if (WIFEXITED(st)) return "exit status " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return "killed by signal " + std::to_string(WTERMSIG(st));
  return "wait status " + std::to_string(st);
}

}  // namespace

int remove_tree_raw(const char* path) {
  // Split into parent directory and final component without allocating.
  const size_t len = std::strlen(path);
  if (len == 0 || len >= 4096) return EINVAL;
  char parent[4096];
  std::memcpy(parent, path, len + 1);
  size_t end = len;
  while (end > 1 && parent[end - 1] == '/')
    parent[--end] = '\0';
  char* slash = std::strrchr(parent, '/');
  const char* base = nullptr;
  int pfd = -1;
  if (slash == nullptr) {
    base = parent;
    pfd = ::open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  } else {
    base = slash + 1;
    *slash = '\0';
    pfd = ::open(slash == parent ? "/" : parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  if (pfd < 0) return errno;
  const int rc = remove_tree_at(pfd, base, 0);
  ::close(pfd);
  return rc;
}

ServerGuardian::ServerGuardian(Spec spec) : spec_(std::move(spec)) {
  // Everything the guardian touches is prepared here, before the fork.
  std::vector<std::string> args;
  args.push_back(spec_.binary);
  for (const auto& a : spec_.args)
    args.push_back(a);
  std::vector<std::string> prefixes, suffixes;
  std::vector<std::vector<char>> port_bufs;
  std::vector<size_t> port_arg_index;
  for (size_t i = 0; i < args.size(); ++i) {
    const auto pos = args[i].find("{port}");
    if (pos == std::string::npos) continue;
    prefixes.push_back(args[i].substr(0, pos));
    suffixes.push_back(args[i].substr(pos + 6));
    port_bufs.emplace_back(args[i].size() + 16, '\0');
    port_arg_index.push_back(i);
  }
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<GuardianPlan::PortArg> port_args;
  for (size_t k = 0; k < port_arg_index.size(); ++k) {
    port_args.push_back({prefixes[k].c_str(), prefixes[k].size(), suffixes[k].c_str(),
                         suffixes[k].size(), port_bufs[k].data()});
    argv[port_arg_index[k]] = port_bufs[k].data();
  }

  UniqueFd log(
      ::open(spec_.log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!log) throw_errno("create " + spec_.log_path, errno);
  UniqueFd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull) throw_errno("open /dev/null", errno);
  int ctrl[2], status[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctrl) != 0)
    throw_errno("socketpair", errno);
  UniqueFd ctrl_r(ctrl[0]), ctrl_w(ctrl[1]);
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, status) != 0)
    throw_errno("socketpair", errno);
  UniqueFd status_r(status[0]), status_w(status[1]);

  struct rlimit rl {};
  int max_fd = 1024;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 65536));
  }
  GuardianPlan plan{argv[0],
                    argv.data(),
                    port_args.data(),
                    port_args.size(),
                    spec_.scratch_dir.c_str(),
                    ctrl_r.get(),
                    status_w.get(),
                    log.get(),
                    devnull.get(),
                    static_cast<long>(spec_.term_grace.count()),
                    max_fd};
  const pid_t pid = ::fork();
  if (pid < 0) throw_errno("fork the TSDB server guardian", errno);
  if (pid == 0) guardian_main(plan);
  guardian_ = pid;
  ctrl_w_ = ctrl_w.release();
  status_r_ = status_r.release();
}

ServerGuardian::~ServerGuardian() {
  stop();
}

void ServerGuardian::read_status(std::chrono::milliseconds wait) {
  const int64_t deadline = monotonic_usec() + static_cast<int64_t>(wait.count()) * 1000;
  for (;;) {
    // Consume complete lines.
    size_t nl = 0;
    while ((nl = status_buf_.find('\n')) != std::string::npos) {
      const std::string line = status_buf_.substr(0, nl);
      status_buf_.erase(0, nl + 1);
      if (line.empty()) continue;
      const auto num = parse_int(std::string_view(line).substr(1)).value_or(0);
      switch (line[0]) {
        case 'R':
          server_ = static_cast<pid_t>(num);
          started_ = true;
          break;
        case 'E':
          exec_errno_ = static_cast<int>(num);
          break;
        case 'X':
          exited_ = describe_wait_status(static_cast<int>(num));
          break;
        case 'D':
          done_ = true;
          if (num != 0) {
            (void)std::fprintf(stderr, "slurm-triage: could not remove %s: %s\n",
                               spec_.scratch_dir.c_str(), std::strerror(static_cast<int>(num)));
          }
          break;
        default:
          break;
      }
      return;
    }
    const int64_t left = deadline - monotonic_usec();
    pollfd pfd{status_r_, POLLIN, 0};
    const int r = ::poll(&pfd, 1, left > 0 ? static_cast<int>(left / 1000) : 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return;
    char buf[256];
    const ssize_t n = ::read(status_r_, buf, sizeof buf);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return;  // the guardian is gone
    }
    status_buf_.append(buf, static_cast<size_t>(n));
  }
}

pid_t ServerGuardian::start_server(uint16_t port) {
  if (ctrl_w_ < 0)
    throw std::system_error(ESRCH, std::generic_category(), "the TSDB server guardian is stopped");
  char cmd[kCmdLen + 1];
  (void)std::snprintf(cmd, sizeof cmd, "P%05u", static_cast<unsigned>(port));
  if (::send(ctrl_w_, cmd, kCmdLen, MSG_NOSIGNAL) != static_cast<ssize_t>(kCmdLen)) {
    throw_errno("talk to the TSDB server guardian", errno);
  }
  server_ = -1;
  exited_.reset();
  exec_errno_ = 0;
  const int64_t deadline = monotonic_usec() + 10'000'000;
  while (server_ <= 0 && exec_errno_ == 0 && monotonic_usec() < deadline) {
    read_status(std::chrono::milliseconds(200));
  }
  if (exec_errno_ != 0) throw_errno("execute " + spec_.binary, exec_errno_);
  if (server_ <= 0)
    throw std::system_error(ETIMEDOUT, std::generic_category(), "start " + spec_.binary);
  return server_;
}

std::optional<std::string> ServerGuardian::server_exit() {
  if (status_r_ >= 0 && !exited_) read_status(std::chrono::milliseconds(0));
  return exited_;
}

void ServerGuardian::stop() {
  if (guardian_ <= 0) return;
  if (ctrl_w_ >= 0) {
    (void)::send(ctrl_w_, "S00000", kCmdLen, MSG_NOSIGNAL);
    const int64_t deadline =
        monotonic_usec() + (static_cast<int64_t>(spec_.term_grace.count()) + 15000) * 1000;
    while (!done_ && monotonic_usec() < deadline) {
      const size_t before = status_buf_.size();
      read_status(std::chrono::milliseconds(250));
      // The guardian closed its end without reporting: nothing more will come.
      pollfd pfd{status_r_, POLLIN, 0};
      if (!done_ && before == status_buf_.size() && ::poll(&pfd, 1, 0) > 0 &&
          (pfd.revents & POLLHUP) != 0)
        break;
    }
    ::close(ctrl_w_);
    ctrl_w_ = -1;
  }
  int st = 0;
  bool reaped = false;
  for (int i = 0; i < 200 && !reaped; ++i) {
    const pid_t r = ::waitpid(guardian_, &st, WNOHANG);
    if (r == guardian_ || (r < 0 && errno == ECHILD)) {
      reaped = true;
    } else {
      ::usleep(10000);
    }
  }
  if (!reaped) {
    // A guardian that does not finish is killed; its server follows (PR_SET_PDEATHSIG).
    ::kill(guardian_, SIGKILL);
    while (::waitpid(guardian_, &st, 0) < 0 && errno == EINTR) {
    }
  }
  if (!done_) {
    std::error_code ec;
    std::filesystem::remove_all(spec_.scratch_dir, ec);
  }
  if (status_r_ >= 0) ::close(status_r_);
  status_r_ = -1;
  guardian_ = -1;
}

}  // namespace triage::tsdb
