#include "analyzer/slurm_state_probe.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "common/text.h"
#include "common/time_util.h"

namespace triage {

namespace {

std::string find_in_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  for (const auto dir : split(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = std::string(dir) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

SlurmStateAnswer query_squeue_state(uint64_t job_id, int timeout_ms,
                                    const std::string& squeue_path) {
  SlurmStateAnswer a;
  const std::string exe = squeue_path.empty() ? find_in_path("squeue") : squeue_path;
  if (exe.empty()) {
    a.detail = "squeue not found in PATH";
    return a;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    a.detail = std::string("pipe: ") + std::strerror(errno);
    return a;
  }
  const std::string id = std::to_string(job_id);
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    a.detail = std::string("fork: ") + std::strerror(errno);
    return a;
  }
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(out[1], STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execl(exe.c_str(), "squeue", "-h", "-j", id.c_str(), "-o", "%T", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(out[1]);
  std::string text;
  const int64_t deadline = monotonic_usec() + static_cast<int64_t>(timeout_ms) * 1000;
  bool timed_out = false;
  char buf[4096];
  while (text.size() < 65536) {
    const int64_t left_ms = (deadline - monotonic_usec()) / 1000;
    if (left_ms <= 0) {
      timed_out = true;
      break;
    }
    struct pollfd pfd {
      out[0], POLLIN, 0
    };
    const int r = ::poll(&pfd, 1, static_cast<int>(left_ms));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      timed_out = r == 0;
      break;
    }
    const ssize_t n = ::read(out[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  ::close(out[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) {
    a.detail = "squeue did not answer within " + std::to_string(timeout_ms) + " ms";
    return a;
  }
  const std::string_view t = trim(text);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    a.available = true;
    // Several lines for job arrays or heterogeneous jobs: the first names the state well enough.
    const std::string_view first = trim(t.substr(0, t.find('\n')));
    a.state = first.empty() ? "ENDED" : std::string(first);
    return a;
  }
  if (t.find("Invalid job id") != std::string_view::npos) {
    a.available = true;
    a.state = "ENDED";
    return a;
  }
  a.detail = "squeue failed: " + printable(truncate_utf8(t, 200));
  return a;
}

}  // namespace triage
