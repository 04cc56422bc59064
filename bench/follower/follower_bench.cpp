// What following running jobs' logs costs the agent (issue 15, "Cost"): jobs each writing 100 lines
// a second, followed by agent::LogFollower polling every 5 s, for 1 job and for 64. Printed: the
// CPU of the following process (its own CPU time, plus its owner-open children, not the writer's)
// as % of one core, total and per job, and its RSS before and after, beside the targets (0.1% of a
// core per job; 1% of a core and 32 MiB for the whole agent with 64 jobs).
//
// Two modes per job count: "read" hands each chunk's bytes to a plain read loop (the follower and
// the I/O of the new bytes only), "live" runs the agent's own per-job path on every poll
// (agent::LiveJob: the follower, scan_log with the one shared ScanPlan and its uncalibrated
// searcher, a read buffer sized to the chunk, LiveProgress and judge_stall). The writer is a
// separate process and its CPU is not counted. Run as root, the follower opens the logs as
// `nobody`, as the agent would.
//
// Run: build/bench/follower/follower_bench [--seconds 30] [--jobs 1,64] [--rate 100] [--interval 5]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "agent/live/live_job.h"
#include "agent/live/log_follower.h"
#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "bench/support/process_usage.h"
#include "bench/support/training_log.h"
#include "common/privilege.h"
#include "common/time_util.h"

namespace {

using namespace triage;
using namespace triage::agent;
using bench::add_ns;
using bench::children_cpu_seconds;
using bench::process_cpu_seconds;
using bench::sleep_until;
using bench::status_kib;

struct Options {
  int seconds = 30;
  std::vector<int> jobs{1, 64};
  int rate = 100;    // lines per second per job
  int interval = 5;  // seconds between polls
};

// The bytes of a chunk read the way scan_log reads them, without matching anything.
void read_chunk(const LogChunk& c) {
  std::array<char, 65536> buf;
  uint64_t left = c.length;
  while (left > 0) {
    const ssize_t n = ::read(c.fd, buf.data(), std::min<uint64_t>(left, buf.size()));
    if (n <= 0) break;
    left -= static_cast<uint64_t>(n);
  }
}

struct Figures {
  double cpu_pct = 0;
  long rss_before_kib = 0, rss_after_kib = 0, hwm_kib = 0;
  uint64_t polls = 0, chunks = 0, bytes = 0;
};

Figures run(const Options& o, int jobs, const ScanPlan* plan) {
  char tmpl[] = "/tmp/follower-bench-XXXXXX";
  if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0755);  // the owner (nobody) must reach the logs
  std::vector<std::string> logs;
  for (int j = 0; j < jobs; ++j) {
    logs.push_back(dir + "/slurm-" + std::to_string(1000 + j) + ".out");
    std::ofstream(logs.back()).flush();
    ::chmod(logs.back().c_str(), 0644);
  }
  const pid_t writer = bench::start_training_log_writer(logs, o.rate);

  const Identity owner = identity_for_uid(::geteuid() == 0 ? 65534 : ::geteuid());
  Figures f;
  f.rss_before_kib = status_kib("VmRSS:");
  const double cpu0 = process_cpu_seconds(), child0 = children_cpu_seconds();
  timespec start{};
  ::clock_gettime(CLOCK_MONOTONIC, &start);
  std::vector<std::unique_ptr<LogFollower>> followers;
  std::vector<std::unique_ptr<LiveJob>> live;
  for (size_t j = 0; j < logs.size(); ++j) {
    const FollowState state{.path = logs[j]};
    if (plan != nullptr) {
      live.push_back(std::make_unique<LiveJob>(1000 + j, state, owner, *plan));
    } else {
      followers.push_back(std::make_unique<LogFollower>(state, owner));
    }
  }
  const LiveStallPolicy policy;
  timespec next = start;
  for (int t = 0; t < o.seconds; t += o.interval) {
    next = add_ns(next, static_cast<long>(o.interval) * 1000000000L);
    sleep_until(next);
    for (auto& job : live) {
      const LiveObservation obs = job->poll(live_now(), policy);
      ++f.polls;
      f.chunks += obs.bytes > 0 ? 1 : 0;
      f.bytes += obs.bytes;
    }
    for (auto& follower : followers) {
      const PollResult r = follower->poll();
      ++f.polls;
      for (const LogChunk& c : r.chunks) {
        ++f.chunks;
        f.bytes += c.length;
        read_chunk(c);
      }
    }
  }
  const double cpu = process_cpu_seconds() - cpu0;
  f.rss_after_kib = status_kib("VmRSS:");
  f.hwm_kib = status_kib("VmHWM:");
  ::kill(writer, SIGKILL);
  int st = 0;
  rusage writer_usage{};
  (void)::wait4(writer, &st, 0, &writer_usage);
  const double owner_children =
      bench::children_cpu_seconds() - child0 - bench::cpu_seconds(writer_usage);
  f.cpu_pct = 100.0 * (cpu + owner_children) / o.seconds;
  followers.clear();
  live.clear();
  std::filesystem::remove_all(dir);
  return f;
}

int number(const std::string& text) {
  return static_cast<int>(std::strtol(text.c_str(), nullptr, 10));
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i], v = argv[i + 1];
    if (a == "--seconds") o.seconds = number(v);
    if (a == "--rate") o.rate = number(v);
    if (a == "--interval") o.interval = number(v);
    if (a == "--jobs") {
      o.jobs.clear();
      for (size_t at = 0; at < v.size();) {
        const size_t comma = v.find(',', at);
        o.jobs.push_back(number(v.substr(at, comma - at)));
        at = comma == std::string::npos ? v.size() : comma + 1;
      }
    }
  }
  o.seconds = std::max(o.seconds, o.interval);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  std::vector<InputError> errors;
  const long rss_bare = status_kib("VmRSS:");
  const SignatureCatalog catalog = SignatureCatalog::load({}, errors);
  const ScanPlan plan(catalog);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "%s\n", e.what());
  std::printf("follower_bench: %d lines/s per job, a poll every %d s, %d s per run, as %s\n",
              o.rate, o.interval, o.seconds,
              ::geteuid() == 0 ? "root (opens as nobody)" : "this user");
  std::printf("process RSS %ld KiB before loading the catalog, %ld KiB after\n", rss_bare,
              status_kib("VmRSS:"));
  std::printf("%-5s %5s %9s %12s %9s %13s %13s %7s %10s\n", "mode", "jobs", "CPU %", "CPU %/job",
              "target", "RSS before", "RSS after", "chunks", "MiB read");
  for (const bool scanning : {false, true}) {
    for (const int jobs : o.jobs) {
      const Figures f = run(o, jobs, scanning ? &plan : nullptr);
      const double target = jobs == 1 ? 0.1 : 1.0;
      std::printf("%-5s %5d %8.4f%% %11.5f%% %8.2f%% %9ld KiB %9ld KiB %7llu %10.2f\n",
                  scanning ? "live" : "read", jobs, f.cpu_pct, f.cpu_pct / jobs, target,
                  f.rss_before_kib, f.rss_after_kib, static_cast<unsigned long long>(f.chunks),
                  static_cast<double>(f.bytes) / (1 << 20));
      (void)std::fflush(stdout);
    }
  }
  return 0;
}
