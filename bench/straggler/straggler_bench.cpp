// straggler_bench: what reading each rank's pace costs (issue 28: at most 15% of the analysis time
// of a 1 GiB log with 64 labelled ranks).
//
//   straggler_bench [--size BYTES[K|M|G]] [--ranks N] [--dir DIR] [--runs N] [--cpu N] [--keep]
//
// It writes a training log under `srun -l` labels: every rank prints every step line with its own
// TFLOP/s (every rank's line reaches the per-rank reader), NCCL INFO and Python logging
// chatter between steps, Megatron's per-rank timers (--timing-log-option all) every 10 steps and a
// straggler report every 100 steps; one rank slows from the middle on and the step time rises by a
// fifth, so the verdicts have work to do. Then, pinned to one CPU, best of N runs after a warm-up
// read: the scan with the per-rank reading off and on (in this process, the same plan), the
// verdicts (find_stragglers, find_slowdown), `slurm-triage analyze` on the whole log, and rg and
// grep counting the step lines, for scale. Every figure is CPU time (user + system), the least of
// the runs, so that other work on the machine does not move the ratio. The figure that matters:
// (scan on - scan off + verdicts) / slurm-triage analyze. The log is not kept unless --keep.
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/straggler_verdict.h"
#include "bench/support/child_run.h"
#include "common/error.h"

namespace {

using triage::bench::best_of;
using triage::bench::Measure;
using triage::bench::parse_size;
using triage::bench::pin_to_cpu;
using triage::bench::run;

using triage::ScanOptions;
using triage::ScanPlan;
using triage::ScanResult;

struct Options {
  uint64_t size = uint64_t{1} << 30;
  int ranks = 64;
  std::string dir = "/tmp";
  int runs = 3;
  int cpu = 0;
  bool keep = false;
};

// This process's CPU time so far (user + system); the scans run on this one thread.
double cpu_now() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// --- the log ------------------------------------------------------------------------------------

bool write_log(const std::string& path, uint64_t size, int ranks) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  std::mt19937_64 rng(20261128);
  std::uniform_real_distribution<double> jitter(-1, 1);
  uint64_t written = 0;
  double t = 1795255200;
  char line[512];
  auto put = [&](int n) {
    if (n > 0) {
      (void)std::fwrite(line, 1, static_cast<size_t>(n), f);
      written += static_cast<uint64_t>(n);
    }
  };
  const int slow_rank = ranks / 3;
  for (int64_t step = 0; written < size; ++step) {
    // The slow rank and the job's step time from the middle of the file on.
    const bool late = written > size / 2;
    const double sec = (late ? 12.0 : 10.0) + 0.2 * jitter(rng);
    t += sec;
    const auto ts = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&ts, &tm);
    char stamp[32];
    (void)std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    for (int r = 0; r < ranks; ++r) {
      const double tflops = (late && r == slow_rank ? 118.0 : 171.0) + jitter(rng);
      put(std::snprintf(line, sizeof line,
                        "%d: [%s] completed step: %lld, seconds: %.3f, TFLOP/s/device: %.3f, "
                        "Tokens/s/device: 3403.064, total_weights: 1048576, loss: %.3f\n",
                        r, stamp, static_cast<long long>(step), sec, tflops,
                        2.5 - 1e-6 * static_cast<double>(step)));
      put(std::snprintf(line, sizeof line,
                        "%d: gpu-%03d:%d:%d [%d] NCCL INFO Channel %02d/0 : %d[%d] -> %d[%d] via "
                        "P2P/CUMEM/read\n",
                        r, r / 8, 1000 + r, 2000 + r, r % 8, r % 32, r, r % 8, (r + 1) % ranks,
                        (r + 1) % 8));
      put(std::snprintf(line, sizeof line,
                        "%d: [%s] INFO [data_loader.py:118] prefetched batch %lld shard %d of "
                        "/lustre/datasets/tokens/train-%05d.bin (1048576 tokens)\n",
                        r, stamp, static_cast<long long>(step), r, r));
    }
    if (step % 10 == 0) {
      put(std::snprintf(line, sizeof line, "%d: times across ranks (ms):\n", ranks - 1));
      for (const char* timer : {"forward-compute", "backward-compute", "optimizer"}) {
        put(std::snprintf(line, sizeof line, "%d:   %s:\n", ranks - 1, timer));
        for (int r = 0; r < ranks; ++r) {
          const double ms = (late && r == slow_rank ? 4300.0 : 3000.0) + 20 * jitter(rng);
          put(std::snprintf(line, sizeof line, "%d:      rank %2d: %.2f\n", ranks - 1, r, ms));
        }
      }
    }
    if (step % 100 == 0) {
      put(std::snprintf(line, sizeof line, "0: GPU relative performance:\n"));
      put(std::snprintf(line, sizeof line, "0:  Worst performing 1/%d ranks:\n", ranks));
      put(std::snprintf(line, sizeof line, "0:   Rank=%d Node=gpu-%03d Score=%.2f\n", slow_rank,
                        slow_rank / 8, late ? 0.69 : 0.97));
    }
  }
  return std::fclose(f) == 0;
}

// --- the measures -------------------------------------------------------------------------------

struct ScanTimes {
  double seconds = 0;
  ScanResult result;
};

ScanTimes best_scan(const std::string& log, const ScanPlan& plan, bool rhythm, int runs) {
  ScanTimes best;
  for (int i = 0; i < runs; ++i) {
    const int fd = ::open(log.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) std::exit(1);
    ScanOptions o;
    o.rank_rhythm = rhythm;
    const double t0 = cpu_now();
    ScanResult r = triage::scan_log(fd, plan, o);
    const double s = cpu_now() - t0;
    ::close(fd);
    if (i == 0 || s < best.seconds) {
      best.seconds = s;
      best.result = std::move(r);
    }
  }
  return best;
}

// A child's least CPU time of `runs`, or -1 when it could not run (not found, killed).
double best_child(const std::vector<std::string>& args, int cpu, int runs) {
  const Measure m = best_of(args, cpu, runs);
  return m.status == 127 || m.status >= 128 ? -1 : m.cpu_seconds;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--size" && i + 1 < argc) {
      o.size = parse_size(argv[++i]);
    } else if (a == "--ranks" && i + 1 < argc) {
      o.ranks = std::clamp(static_cast<int>(std::strtol(argv[++i], nullptr, 10)), 2, 4096);
    } else if (a == "--dir" && i + 1 < argc) {
      o.dir = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      o.runs = std::max(1, static_cast<int>(std::strtol(argv[++i], nullptr, 10)));
    } else if (a == "--cpu" && i + 1 < argc) {
      o.cpu = static_cast<int>(std::strtol(argv[++i], nullptr, 10));
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      (void)std::fprintf(stderr,
                         "usage: straggler_bench [--size BYTES[K|M|G]] [--ranks N] [--dir DIR] "
                         "[--runs N] [--cpu N] [--keep]\n");
      return 2;
    }
  }
  const std::string log =
      o.dir + "/straggler_bench-" + std::to_string(o.ranks) + "-" + std::to_string(o.size) + ".log";
  struct stat st {};
  if (::stat(log.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) < o.size) {
    (void)std::printf("writing a %.2f GiB log of %d labelled ranks to %s ...\n",
                      static_cast<double>(o.size) / (1 << 30), o.ranks, log.c_str());
    (void)std::fflush(stdout);
    if (!write_log(log, o.size, o.ranks) || ::stat(log.c_str(), &st) != 0) {
      (void)std::fprintf(stderr, "cannot write %s\n", log.c_str());
      return 1;
    }
  }
  const double gib = static_cast<double>(st.st_size) / (1 << 30);
  pin_to_cpu(o.cpu);
  (void)run({"cat", log}, o.cpu);  // warm the page cache

  std::vector<triage::InputError> errors;
  const triage::SignatureCatalog cat = triage::SignatureCatalog::load({}, errors);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "rules: %s\n", e.what());
  const ScanPlan plan(cat);

  const ScanTimes off = best_scan(log, plan, false, o.runs);
  const ScanTimes on = best_scan(log, plan, true, o.runs);
  const double t0 = cpu_now();
  const auto st_list = triage::find_stragglers(on.result.facts.rhythm, {});
  const auto sd = triage::find_slowdown(on.result.facts.step_times, st_list, {});
  const double verdicts = cpu_now() - t0;
  const double whole =
      best_child({SLURM_TRIAGE_BIN, "analyze", "--slurm-state", "none", "--format", "json", log},
                 o.cpu, o.runs);
  const double rg = best_child({"rg", "-j1", "-c", "completed step:", log}, o.cpu, o.runs);
  const double grep = best_child({"grep", "-c", "completed step:", log}, o.cpu, 1);

  (void)std::printf("log: %s (%.2f GiB, %d ranks), CPU seconds, best of %d, pinned to CPU %d\n",
                    log.c_str(), gib, o.ranks, o.runs, o.cpu);
  (void)std::printf("%-44s %7.3f s  %5.2f GiB/s\n", "scan, per-rank reading off", off.seconds,
                    gib / off.seconds);
  (void)std::printf("%-44s %7.3f s  %5.2f GiB/s  (%zu step times, %zu+%zu+%zu windows)\n",
                    "scan, per-rank reading on", on.seconds, gib / on.seconds,
                    on.result.facts.step_times.size(), on.result.facts.rhythm.scores.windows.size(),
                    on.result.facts.rhythm.compute.windows.size(),
                    on.result.facts.rhythm.tflops.windows.size());
  (void)std::printf("%-44s %7.3f s  (%zu stragglers, slowdown %s)\n",
                    "find_stragglers + find_slowdown", verdicts, st_list.size(),
                    sd.found ? "found" : "none");
  if (whole > 0)
    (void)std::printf("%-44s %7.3f s  %5.2f GiB/s\n", "slurm-triage analyze (whole analysis)",
                      whole, gib / whole);
  if (rg > 0)
    (void)std::printf("%-44s %7.3f s  %5.2f GiB/s\n", "rg -j1 -c 'completed step:'", rg, gib / rg);
  if (grep > 0)
    (void)std::printf("%-44s %7.3f s  %5.2f GiB/s\n", "grep -c 'completed step:'", grep,
                      gib / grep);
  const double added = std::max(0.0, on.seconds - off.seconds) + verdicts;
  const double base = whole > 0 ? whole : on.seconds;
  (void)std::printf("per-rank analysis adds %.3f s = %.1f%% of the analysis (target <= 15%%)\n",
                    added, 100 * added / base);
  if (whole > 0 && rg > 0) (void)std::printf("slurm-triage analyze vs rg: %.2fx\n", rg / whole);
  if (!o.keep) ::unlink(log.c_str());
  return 0;
}
