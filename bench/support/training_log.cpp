#include "bench/support/training_log.h"

#include <fcntl.h>
#include <grp.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

namespace triage::bench {

timespec add_ns(timespec t, long ns) {
  t.tv_nsec += ns;
  while (t.tv_nsec >= 1000000000L) {
    t.tv_nsec -= 1000000000L;
    ++t.tv_sec;
  }
  return t;
}

void sleep_until(const timespec& t) {
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, nullptr) == EINTR) {
  }
}

namespace {

[[noreturn]] void write_forever(const std::vector<std::string>& logs, int rate) {
  std::vector<int> fds;
  fds.reserve(logs.size());
  for (const auto& p : logs)
    fds.push_back(::open(p.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
  timespec next{};
  ::clock_gettime(CLOCK_MONOTONIC, &next);
  std::array<char, 160> line{};
  for (long step = 0;; ++step) {
    const int n = std::snprintf(line.data(), line.size(),
                                "[rank0]: iteration %8ld/ 1000000 | consumed samples: %10ld | "
                                "lm loss: 2.%06ld | grad norm: 0.812 | tokens/s: 412345\n",
                                step, step * 512, step % 1000000);
    for (const int fd : fds)
      (void)!::write(fd, line.data(), static_cast<size_t>(n));
    next = add_ns(next, 1000000000L / rate);
    sleep_until(next);
  }
}

}  // namespace

pid_t start_training_log_writer(const std::vector<std::string>& logs, int rate,
                                std::optional<uid_t> as_uid, std::optional<gid_t> as_gid) {
  const pid_t pid = ::fork();
  if (pid < 0) throw std::runtime_error("fork failed");
  if (pid > 0) return pid;
  if (as_gid && (::setgroups(0, nullptr) != 0 || ::setgid(*as_gid) != 0)) ::_exit(127);
  if (as_uid && ::setuid(*as_uid) != 0) ::_exit(127);
  write_forever(logs, rate);
}

}  // namespace triage::bench
