#include "bench/support/child_run.h"

#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "bench/support/process_usage.h"

namespace triage::bench {

void pin_to_cpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(static_cast<size_t>(cpu), &set);
  (void)::sched_setaffinity(0, sizeof set, &set);
}

Measure run(const std::vector<std::string>& args, int cpu) {
  int p[2];
  if (::pipe(p) != 0) std::exit(1);
  const auto t0 = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    pin_to_cpu(cpu);
    ::dup2(p[1], 1);
    const int devnull = ::open("/dev/null", O_WRONLY);
    ::dup2(devnull, 2);
    ::close(p[0]);
    std::vector<char*> argv;
    std::vector<std::string> copy = args;
    argv.reserve(copy.size() + 1);
    for (auto& a : copy)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(p[1]);
  Measure m;
  char buf[65536];
  ssize_t n = 0;
  while ((n = ::read(p[0], buf, sizeof buf)) > 0) {
    if (m.out.size() < 4096) m.out.append(buf, static_cast<size_t>(std::min<ssize_t>(n, 4096)));
  }
  ::close(p[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  m.max_rss_kb = ru.ru_maxrss;
  m.cpu_seconds = cpu_seconds(ru);
  m.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return m;
}

Measure best_of(const std::vector<std::string>& args, int cpu, int runs) {
  Measure best;
  double least_cpu = 0;
  for (int i = 0; i < runs; ++i) {
    Measure m = run(args, cpu);
    least_cpu = i == 0 ? m.cpu_seconds : std::min(least_cpu, m.cpu_seconds);
    if (i == 0 || m.seconds < best.seconds) {
      const long rss = std::max(best.max_rss_kb, m.max_rss_kb);
      best = m;
      best.max_rss_kb = rss;
    } else {
      best.max_rss_kb = std::max(best.max_rss_kb, m.max_rss_kb);
    }
  }
  best.cpu_seconds = least_cpu;
  return best;
}

uint64_t parse_size(const char* s) {
  char* end = nullptr;
  const double v = std::strtod(s, &end);
  double mult = 1;
  if (*end == 'K' || *end == 'k') mult = 1024;
  if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024;
  if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024;
  return static_cast<uint64_t>(v * mult);
}

}  // namespace triage::bench
