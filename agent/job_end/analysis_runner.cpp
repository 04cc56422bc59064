#include "agent/job_end/analysis_runner.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/child_process.h"
#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::agent {

struct AnalysisRunner::Run {
  AnalysisRequest request;
  Done done;
  std::optional<ChildProcess> child;
  size_t in_written = 0;
  uint64_t timeout_timer = 0;
  uint64_t poll_timer = 0;
  int64_t started_usec = 0;
  AnalysisOutcome outcome;
};

namespace {

constexpr size_t kStderrMax = size_t{64} * 1024;

void set_nonblocking(int fd) {
  const int fl = ::fcntl(fd, F_GETFL);
  if (fl >= 0) (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
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

  ChildSpec spec;
  spec.argv = req.argv;
  spec.env = std::vector<std::string>{
      "PATH=/usr/local/bin:/usr/bin:/bin",
      "LANG=C.UTF-8",
      "USER=" + req.who.user,
      "LOGNAME=" + req.who.user,
      "HOME=" + (req.home.empty() ? std::string("/") : req.home),
      "SLURM_JOB_ID=" + std::to_string(req.job_id),
      "SLURM_TRIAGE_AGENT=1",
  };
  spec.run_as = req.who;
  spec.working_dir = "/";
  if (!req.stdin_data.empty()) spec.stdin_data = req.stdin_data;
  spec.own_process_group = true;  // a timeout kill takes whatever the analysis started with it
  run->started_usec = monotonic_usec();
  try {
    run->child.emplace(ChildProcess::spawn(spec));
  } catch (const std::exception& e) {
    AnalysisOutcome o;
    o.job_id = req.job_id;
    o.err = e.what();
    o.duration_ms = (monotonic_usec() - run->started_usec) / 1000;
    loop_.post([d = run->done, o] { d(o); });
    return;
  }
  ChildProcess& child = *run->child;

  const uint64_t id = next_id_++;
  for (UniqueFd* fd : {&child.in(), &child.out(), &child.err()}) {
    if (*fd) set_nonblocking(fd->get());
  }
  loop_.add(child.out().get(), EPOLLIN,
            [this, id, fd = child.out().get()](uint32_t) { on_output(id, fd, true); });
  loop_.add(child.err().get(), EPOLLIN,
            [this, id, fd = child.err().get()](uint32_t) { on_output(id, fd, false); });
  if (child.in()) loop_.add(child.in().get(), EPOLLOUT, [this, id](uint32_t) { on_stdin(id); });
  if (child.exit_fd() >= 0) {
    loop_.add(child.exit_fd(), EPOLLIN, [this, id](uint32_t) { on_exit(id); });
  } else {
    run->poll_timer = loop_.after(100, [this, id] { poll_exit(id); });
  }
  run->timeout_timer = loop_.after(req.timeout_ms, [this, id] {
    auto it = runs_.find(id);
    if (it == runs_.end()) return;
    it->second->outcome.timed_out = true;
    spdlog::warn("analysis of job {} exceeded {} s; killing it", it->second->request.job_id,
                 it->second->request.timeout_ms / 1000);
    it->second->child->kill(SIGKILL);
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
    const ssize_t n =
        ::write(r.child->in().get(), data.data() + r.in_written, data.size() - r.in_written);
    if (n > 0) {
      r.in_written += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
    break;  // EPIPE: the program does not want the rest
  }
  loop_.remove(r.child->in().get());
  r.child->in().reset();  // EOF for the program
}

void AnalysisRunner::on_output(uint64_t id, int fd, bool is_stdout) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  bool truncated = false;
  std::string& into = is_stdout ? r.outcome.out : r.outcome.err;
  const size_t cap = is_stdout ? r.request.output_max : kStderrMax;
  if (!read_available(fd, into, cap, truncated)) {
    loop_.remove(fd);
    (is_stdout ? r.child->out() : r.child->err()).reset();
  }
  if (is_stdout && truncated) r.outcome.out_truncated = true;
}

void AnalysisRunner::on_exit(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  const std::optional<int> status = r.child->try_wait();
  if (!status) return;
  r.outcome.started = true;
  r.outcome.wait_status = *status;
  // Whatever the program left running in its group goes with it.
  r.child->kill(SIGKILL);
  finish(id);
}

void AnalysisRunner::finish(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  std::unique_ptr<Run> r = std::move(it->second);
  runs_.erase(it);
  ChildProcess& c = *r->child;
  bool truncated = false;
  if (c.out()) {
    read_available(c.out().get(), r->outcome.out, r->request.output_max, truncated);
    if (truncated) r->outcome.out_truncated = true;
  }
  if (c.err()) read_available(c.err().get(), r->outcome.err, kStderrMax, truncated);
  stop_watching(*r);
  r->outcome.duration_ms = (monotonic_usec() - r->started_usec) / 1000;
  Done done = std::move(r->done);
  AnalysisOutcome outcome = std::move(r->outcome);
  r.reset();
  done(std::move(outcome));
}

void AnalysisRunner::stop_watching(Run& r) {
  ChildProcess& c = *r.child;
  for (int fd : {c.out().get(), c.err().get(), c.in().get(), c.exit_fd()}) {
    if (fd >= 0) loop_.remove(fd);
  }
  if (r.timeout_timer != 0) loop_.cancel(r.timeout_timer);
  if (r.poll_timer != 0) loop_.cancel(r.poll_timer);
}

void AnalysisRunner::kill_all() {
  (void)kill_if([](const Run&) { return true; });
}

size_t AnalysisRunner::kill_job(uint64_t job_id) {
  return kill_if([job_id](const Run& r) { return r.request.job_id == job_id; });
}

size_t AnalysisRunner::kill_if(const std::function<bool(const Run&)>& which) {
  size_t killed = 0;
  for (auto it = runs_.begin(); it != runs_.end();) {
    Run& r = *it->second;
    if (!which(r)) {
      ++it;
      continue;
    }
    r.child->kill(SIGKILL);
    (void)r.child->wait();
    stop_watching(r);
    it = runs_.erase(it);
    ++killed;
  }
  return killed;
}

}  // namespace triage::agent
