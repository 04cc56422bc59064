#include "agent/analysis_runner.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::agent {

struct AnalysisRunner::Run {
  AnalysisRequest request;
  Done done;
  pid_t pid = -1;
  UniqueFd in;
  UniqueFd out;
  UniqueFd err;
  UniqueFd status;
  UniqueFd pidfd;
  size_t in_written = 0;
  uint64_t timeout_timer = 0;
  uint64_t poll_timer = 0;
  int64_t started_usec = 0;
  bool exited = false;
  AnalysisOutcome outcome;
};

namespace {

void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
}

// Reads what is there without blocking; appends up to `cap` bytes. Returns false at EOF.
bool read_available(int fd, std::string& into, size_t cap, bool& truncated) {
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      const size_t take =
          std::min(static_cast<size_t>(n), cap > into.size() ? cap - into.size() : 0);
      into.append(buf, take);
      if (take < static_cast<size_t>(n)) truncated = true;
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

[[noreturn]] void child_fail(const std::string& why, int code) {
  (void)!::write(3, why.data(), why.size());
  ::_exit(code);
}

}  // namespace

AnalysisRunner::AnalysisRunner(EventLoop& loop) : loop_(loop) {}

AnalysisRunner::~AnalysisRunner() {
  kill_all();
}

void AnalysisRunner::start(AnalysisRequest request, Done done) {
  auto run = std::make_unique<Run>();
  run->request = std::move(request);
  run->done = std::move(done);
  run->outcome.job_id = run->request.job_id;
  const AnalysisRequest& req = run->request;

  int in[2], out[2], err[2], st[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 ||
      ::pipe2(st, O_CLOEXEC) != 0) {
    AnalysisOutcome o;
    o.job_id = req.job_id;
    o.err = std::string("pipe: ") + std::strerror(errno);
    loop_.post([d = run->done, o] { d(o); });
    return;
  }
  UniqueFd child_in(in[0]), child_out(out[1]), child_err(err[1]), child_st(st[1]);
  run->in.reset(in[1]);
  run->out.reset(out[0]);
  run->err.reset(err[0]);
  run->status.reset(st[0]);

  // Everything the child needs is prepared before fork: the child only makes system calls.
  std::vector<char*> argv;
  for (const auto& a : req.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings = {
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "LANG=C.UTF-8",
      "USER=" + req.who.user,
      "LOGNAME=" + req.who.user,
      "HOME=" + (req.home.empty() ? std::string("/") : req.home),
      "SLURM_JOB_ID=" + std::to_string(req.job_id),
      "SLURM_TRIAGE_AGENT=1",
  };
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (auto& e : env_strings)
    envp.push_back(e.data());
  envp.push_back(nullptr);

  run->started_usec = monotonic_usec();
  const pid_t pid = ::fork();
  if (pid < 0) {
    AnalysisOutcome o;
    o.job_id = req.job_id;
    o.err = std::string("fork: ") + std::strerror(errno);
    loop_.post([d = run->done, o] { d(o); });
    return;
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    sigset_t all;
    sigemptyset(&all);
    ::sigprocmask(SIG_SETMASK, &all, nullptr);
    (void)::signal(SIGPIPE, SIG_DFL);
    if (::dup3(child_st.get(), 3, O_CLOEXEC) < 0) ::_exit(125);
    if (::dup2(child_in.get(), 0) < 0 || ::dup2(child_out.get(), 1) < 0 ||
        ::dup2(child_err.get(), 2) < 0) {
      child_fail("dup2 failed", 125);
    }
    ::close_range(4, ~0U, 0);
    if (::chdir("/") != 0) child_fail("chdir /", 125);
    try {
      drop_privileges_permanently(req.who);
    } catch (const std::exception& e) {
      child_fail(std::string("dropping privileges to uid ") + std::to_string(req.who.uid) + ": " +
                     e.what(),
                 126);
    }
    ::execve(argv[0], argv.data(), envp.data());
    child_fail(std::string("exec ") + argv[0] + ": " + std::strerror(errno), 127);
  }
  run->pid = pid;
  (void)::setpgid(pid, pid);  // also from the parent, so a timeout kill finds the group at once
  child_in.reset();
  child_out.reset();
  child_err.reset();
  child_st.reset();

  const uint64_t id = next_id_++;
  set_nonblocking(run->in.get());
  set_nonblocking(run->out.get());
  set_nonblocking(run->err.get());
  set_nonblocking(run->status.get());
  loop_.add(run->out.get(), EPOLLIN,
            [this, id, fd = run->out.get()](uint32_t) { on_output(id, fd, true); });
  loop_.add(run->err.get(), EPOLLIN,
            [this, id, fd = run->err.get()](uint32_t) { on_output(id, fd, false); });
  if (req.stdin_data.empty()) {
    run->in.reset();
  } else {
    loop_.add(run->in.get(), EPOLLOUT, [this, id](uint32_t) { on_stdin(id); });
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    run->pidfd.reset(pidfd);
    loop_.add(pidfd, EPOLLIN, [this, id](uint32_t) { on_exit(id); });
  } else {
    run->poll_timer = loop_.after(100, [this, id] { poll_exit(id); });
  }
  run->timeout_timer = loop_.after(req.timeout_ms, [this, id] {
    auto it = runs_.find(id);
    if (it == runs_.end()) return;
    it->second->outcome.timed_out = true;
    spdlog::warn("analysis of job {} exceeded {} s; killing it", it->second->request.job_id,
                 it->second->request.timeout_ms / 1000);
    ::kill(-it->second->pid, SIGKILL);
    ::kill(it->second->pid, SIGKILL);
  });
  runs_[id] = std::move(run);
}

void AnalysisRunner::poll_exit(uint64_t id) {
  // Kernels without pidfd_open: look every 100 ms.
  on_exit(id);
  auto it = runs_.find(id);
  if (it != runs_.end()) it->second->poll_timer = loop_.after(100, [this, id] { poll_exit(id); });
}

void AnalysisRunner::on_stdin(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  const std::string& data = r.request.stdin_data;
  while (r.in_written < data.size()) {
    const ssize_t n = ::write(r.in.get(), data.data() + r.in_written, data.size() - r.in_written);
    if (n > 0) {
      r.in_written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // EPIPE: the program does not want the rest
  }
  loop_.remove(r.in.get());
  r.in.reset();  // EOF for the program
}

void AnalysisRunner::on_output(uint64_t id, int fd, bool is_stdout) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  bool truncated = false;
  std::string& into = is_stdout ? r.outcome.out : r.outcome.err;
  const size_t cap = is_stdout ? r.request.output_max : size_t{64} * 1024;
  if (!read_available(fd, into, cap, truncated)) {
    loop_.remove(fd);
    (is_stdout ? r.out : r.err).reset();
  }
  if (is_stdout && truncated) r.outcome.out_truncated = true;
}

void AnalysisRunner::on_exit(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  int status = 0;
  const pid_t got = ::waitpid(r.pid, &status, WNOHANG);
  if (got != r.pid) return;
  r.exited = true;
  r.outcome.wait_status = status;
  // Whatever the program left running in its group goes with it.
  ::kill(-r.pid, SIGKILL);
  finish(id);
}

void AnalysisRunner::finish(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  std::unique_ptr<Run> r = std::move(it->second);
  runs_.erase(it);
  bool truncated = false;
  if (r->out) {
    read_available(r->out.get(), r->outcome.out, r->request.output_max, truncated);
    if (truncated) r->outcome.out_truncated = true;
    loop_.remove(r->out.get());
  }
  if (r->err) {
    read_available(r->err.get(), r->outcome.err, size_t{64} * 1024, truncated);
    loop_.remove(r->err.get());
  }
  if (r->in) loop_.remove(r->in.get());
  if (r->pidfd) loop_.remove(r->pidfd.get());
  if (r->timeout_timer != 0) loop_.cancel(r->timeout_timer);
  if (r->poll_timer != 0) loop_.cancel(r->poll_timer);
  std::string exec_error;
  bool unused = false;
  read_available(r->status.get(), exec_error, 4096, unused);
  r->outcome.started = exec_error.empty();
  if (!exec_error.empty()) r->outcome.err = exec_error;
  r->outcome.duration_ms = (monotonic_usec() - r->started_usec) / 1000;
  Done done = std::move(r->done);
  AnalysisOutcome outcome = std::move(r->outcome);
  r.reset();
  done(std::move(outcome));
}

void AnalysisRunner::kill_all() {
  for (auto& [id, r] : runs_) {
    ::kill(-r->pid, SIGKILL);
    ::kill(r->pid, SIGKILL);
    int status = 0;
    (void)::waitpid(r->pid, &status, 0);
    for (int fd : {r->out.get(), r->err.get(), r->in.get(), r->pidfd.get()}) {
      if (fd >= 0) loop_.remove(fd);
    }
    if (r->timeout_timer != 0) loop_.cancel(r->timeout_timer);
    if (r->poll_timer != 0) loop_.cancel(r->poll_timer);
  }
  runs_.clear();
}

}  // namespace triage::agent
