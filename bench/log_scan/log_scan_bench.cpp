// log_scan_bench: how fast `slurm-triage analyze` reads a large training log, beside ripgrep and
// GNU grep given the catalog's own patterns, in one run on one core.
//
//   log_scan_bench [--size BYTES[K|M|G]] [--log quiet|noisy|both] [--dir DIR] [--runs N] [--keep]
//                  [--cpu N]
//
// It writes two realistic logs (JAX/XLA, RCCL/NCCL, PyTorch and Slurm noise under `srun -l` labels,
// `completed step:` lines, the harmless start-up lines, and a rare real failure every few hundred
// megabytes): a quiet one, where 0.6% of lines match a catalog pattern, and a noisy one, a job run
// with NCCL_DEBUG=WARN on a partition with CPU-only nodes, where about half the lines are
// harmless-but-alarming chatter or step lines (NCCL and RCCL WARN and INFO chatter, CUDA init
// failures, tokenizer warnings, TF/XLA device lines, Ray connection lines, checkpoint saves, extra
// step lines) and config dumps of hundreds of kilobytes sit on one line. It writes the catalog's
// patterns (read through the analyzer's own catalog loader) for rg as RE2 and for grep -E those
// already valid as POSIX ERE, then times each tool on each log pinned to one CPU, best of N runs
// after a warm-up read, with CPU time and peak RSS from wait4(). The analysis run is the whole
// thing: scan, decisions, report.
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "bench/support/child_run.h"

namespace {

using triage::bench::best_of;
using triage::bench::Measure;
using triage::bench::parse_size;
using triage::bench::run;

// --- the log ------------------------------------------------------------------------------------

struct Gen {
  std::mt19937_64 rng{20261121};
  int tasks = 32;
  long step = 0;
  double t = 1795255200;  // 2026-11-21 10:00:00 UTC

  std::string stamp() {
    const auto secs = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&secs, &tm);
    char b[48];
    (void)std::snprintf(b, sizeof b, "%04d-%02d-%02d %02d:%02d:%02d,%03d", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                        static_cast<int>((t - static_cast<double>(secs)) * 1000));
    return b;
  }
  std::string glog(char sev) {
    const auto secs = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&secs, &tm);
    char b[48];
    (void)std::snprintf(b, sizeof b, "%c%02d%02d %02d:%02d:%02d.%06d", sev, tm.tm_mon + 1,
                        tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                        static_cast<int>((t - static_cast<double>(secs)) * 1e6));
    return b;
  }
  int r(int n) { return static_cast<int>(rng() % static_cast<uint64_t>(n)); }

  std::string step_line(int rank) {
    if (rank == 0) ++step;
    char b[512];
    (void)std::snprintf(b, sizeof b,
                        "%2d: [%s] completed step: %ld, seconds: %.3f, TFLOP/s/device: %.3f, "
                        "Tokens/s/device: %.3f, "
                        "total_weights: 1048576, loss: %.3f",
                        rank, stamp().c_str(), step, 9.5 + r(100) / 500.0, 400 + r(1000) / 100.0,
                        3400 + r(5000) / 100.0, 9.0 - static_cast<double>(step % 5000) / 1000.0);
    return b;
  }

  // One line of ordinary output.
  std::string noise() {
    const int rank = r(tasks);
    char b[512];
    const int kind = r(1000);
    t += 0.002;
    if (kind < 55) {
      return step_line(rank);
    }
    if (kind < 300) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: gpu-a%03d:%d:%d [%d] NCCL INFO Channel %02d/%d : %d[%d] -> %d[%d] [send] "
          "via NET/IB/%d/GDRDMA",
          rank, 17 + rank / 8, 2231 + rank, 2240 + rank, rank % 8, r(32), r(2), rank * 8 + r(8),
          r(8), (rank * 8 + 11) % 256, r(8), r(4));
    } else if (kind < 450) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: %s %d gpu_transfer_manager.cc:244] ROCm buffer pool: %d of 64 blocks in "
          "use, %d bytes pinned",
          rank, glog('I').c_str(), 2231 + rank, r(64), r(1 << 30));
    } else if (kind < 560) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: [rank%d]:[W%s ProcessGroupNCCL.cpp:%d] [PG ID 0 PG GUID 0 Rank %d] "
                          "collective %d took %d us",
                          rank, rank, glog('I').c_str() + 1, 1000 + r(3000), rank, r(100000),
                          r(100000));
    } else if (kind < 660) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s - INFO - jax._src.dispatch - Finished tracing + transforming "
                          "jit(train_step) in %.4f sec",
                          rank, stamp().c_str(), r(1000) / 10000.0);
    } else if (kind < 740) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: (MaxTextTrainer pid=%d, ip=10.1.0.%d) Memstats: After step %ld: Using "
          "(GB) %d.%02d / 191.5 (%d.%02d%%) on rocm:%d",
          rank, 48000 + rank, 17 + rank / 8, step, 100 + r(80), r(100), 50 + r(40), r(100),
          rank % 8);
    } else if (kind < 820) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: %s %d xla_bridge.cc:%d] Compiled module jit_train_step in %d ms; %d HLO "
          "instructions; buffer assignment %d MiB",
          rank, glog('I').c_str(), 2231 + rank, 100 + r(900), r(5000), 10000 + r(90000), r(100000));
    } else if (kind < 880) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: Per train step:  Total TFLOPs: %d.%02d  split as %d.%02d%% learnable "
          "weight flops and %d.%02d%% attention flops",
          rank, 2000 + r(500), r(100), 90 + r(9), r(100), r(9), r(100));
    } else if (kind < 930) {
      (void)std::snprintf(
          b, sizeof b,
          "%2d: W%s %d orbax/checkpoint/async_checkpointer.py:%d] Waiting for previous "
          "save to finish (step %ld), %d ms",
          rank, glog('I').c_str() + 1, 2231 + rank, 100 + r(300), step, r(10000));
    } else if (kind < 960) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s INFO tensorboard: wrote %d events to "
                          "/shared/home/alice/maxtext/outputs/ckpt-llama3-70b/tensorboard",
                          rank, stamp().c_str(), r(100));
    } else if (kind < 990) {
      (void)std::snprintf(
          b, sizeof b, "%2d: %s %d gcs_rpc_client.h:%d] Heartbeat OK from node %016lx after %d ms",
          rank, glog('I').c_str(), 2231 + rank, 100 + r(500), static_cast<unsigned long>(rng()),
          r(100));
    } else if (kind < 996) {
      // The known-harmless lines, at the rate a long job prints them.
      static const char* harmless[] = {
          "E1121 10:00:00.000000 2231 cuda_driver.cc:152] Failed call to cuInit: UNKNOWN ERROR "
          "(303)",
          "gpu-a017:2231:2231 [0] NCCL WARN MSCCL++: Feature not enabled",
          "Token indices sequence length is longer than the specified maximum sequence length for "
          "this model (9182 > 8192)",
          "Cannot read CPU core 97 (topology.cc:71)",
          "I1121 10:00:00.000000 2231 tpu_initializer_helper.cc:269] No hardware is found. Using "
          "default TPU version: jellyfish",
      };
      (void)std::snprintf(b, sizeof b, "%2d: %s", rank, harmless[r(5)]);
    } else {
      (void)std::snprintf(b, sizeof b, "%2d: ", rank);
      std::string s = b;
      const int len = 200 + r(3000);  // a long progress/config dump line
      for (int i = 0; i < len; ++i)
        s += static_cast<char>("abcdefghijklmnopqrstuvwxyz_=,. 0123456789"[r(41)]);
      return s;
    }
    return b;
  }

  // One line of the noisy log's harmless-but-alarming chatter: what NCCL_DEBUG=WARN prints all run
  // long, XLA's CUDA probe failing on a CPU-only node (each start-up printing it again), and the
  // warnings and notices a long run repeats (tokenizer truncation, TF/XLA device set-up, Ray's
  // connection lines, checkpoint saves). The NCCL WARN, cuInit and tokenizer lines match a catalog
  // pattern (a finding or a harmless entry); the rest are what no pattern should take for a
  // failure.
  std::string chatter() {
    const int rank = r(tasks);
    char b[512];
    const int kind = r(100);
    t += 0.002;
    const int node = 17 + rank / 8;
    if (kind < 25) {
      static const char* warn[] = {
          "NET/IB : Got async event : GID table change on mlx5_",
          "NET/IB : Got async event : port active on mlx5_",
          "Call to ibv_reg_mr_iova2 failed with error Cannot allocate memory, retrying; device ",
          "Could not find real path of /sys/class/net/ib",
          "NET/Socket : peer shutdown, reconnecting to 10.1.0.",
          "Cuda failure 'peer access is not supported between these two devices', peer ",
      };
      // RCCL prints its warnings under NCCL's name too.
      (void)std::snprintf(b, sizeof b, "%2d: gpu-a%03d:%d:%d [%d] NCCL WARN %s%d", rank, node,
                          2231 + rank, 2240 + rank, rank % 8, warn[r(6)], r(8) + 1);
    } else if (kind < 30) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: gpu-a%03d:%d:%d [%d] NCCL WARN MSCCL++: Feature not enabled", rank,
                          node, 2231 + rank, 2231 + rank, rank % 8);
    } else if (kind < 45) {
      (void)std::snprintf(
          b, sizeof b, "%2d: %s %d cuda_driver.cc:152] Failed call to cuInit: UNKNOWN ERROR (303)",
          rank, glog('E').c_str(), 2231 + rank);
    } else if (kind < 52) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s %d xla_bridge.cc:%d] Unable to initialize backend 'cuda': "
                          "INTERNAL: CUDA error: Failed call to cuInit: UNKNOWN ERROR (303)",
                          rank, glog('W').c_str(), 2231 + rank, 900 + r(100));
    } else if (kind < 62) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: Token indices sequence length is longer than the specified maximum "
                          "sequence length for this model (%d > 8192). Running this sequence "
                          "through the model will result in indexing errors",
                          rank, 8193 + r(4000));
    } else if (kind < 70) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: gpu-a%03d:%d:%d [%d] NCCL INFO NET/IB : No device found, falling "
                          "back to NET/Socket; %d retries left",
                          rank, node, 2231 + rank, 2240 + rank, rank % 8, r(4));
    } else if (kind < 78) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s %d gpu_device.cc:%d] Created device "
                          "/job:localhost/replica:0/task:0/device:GPU:%d with %d MB memory:  -> "
                          "device: %d, name: AMD Instinct MI300X, pci bus id: 0000:%02x:00.0",
                          rank, glog('I').c_str(), 2231 + rank, 1800 + r(200), rank % 8,
                          180000 + r(10000), rank % 8, 0x0c + rank % 8);
    } else if (kind < 86) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s\tINFO worker.py:%d -- Connecting to existing Ray cluster at "
                          "address: 10.1.0.17:6379...",
                          rank, stamp().c_str(), 1500 + r(300));
    } else if (kind < 93) {
      (void)std::snprintf(b, sizeof b,
                          "%2d: %s - INFO - Saving checkpoint at step %ld to "
                          "/shared/home/alice/maxtext/outputs/ckpt-llama3-70b/%ld (async, "
                          "previous save took %d ms)",
                          rank, stamp().c_str(), step, step, r(60000));
    } else {
      (void)std::snprintf(b, sizeof b,
                          "%2d: /usr/lib/python3/dist-packages/torch/_utils.py:%d: UserWarning: "
                          "TypedStorage is deprecated. It will be removed in the future and "
                          "UntypedStorage will be the only storage class.",
                          rank, 800 + r(100));
    }
    return b;
  }

  // A run's whole config, dumped on one line of a few hundred kilobytes (XLA flags, a JSON model
  // config): longer than the analyzer matches a pattern against at once.
  std::string config_dump() {
    std::string s = std::to_string(r(tasks)) + ": config: {";
    const int len = (128 << 10) + r(256 << 10);
    while (s.size() < static_cast<size_t>(len)) {
      s += "\"xla_gpu_flag_";
      s += std::to_string(r(100000));
      s += "\": ";
      s += std::to_string(r(1 << 20));
      s += ", ";
    }
    s += "}";
    return s;
  }

  // One line of the log: in the noisy log about half the lines are chatter or step lines (one in
  // three chatter, one in six an extra step line, besides those of ordinary output).
  std::string line(bool noisy) {
    if (!noisy) return noise();
    const int kind = r(6);
    if (kind < 2) return chatter();
    if (kind == 2) {
      t += 0.002;
      return step_line(r(tasks));
    }
    return noise();
  }
};

bool write_log(const std::string& path, uint64_t size, bool noisy) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return false;
  Gen g;
  std::string header =
      "SLURM_JOB_ID=90001\nNNODES=4\nRAY=1\nPASSTHROUGH_ARGS=steps=500000 "
      "enable_checkpointing=true "
      "checkpoint_period=500\n  ssh -L 8265:localhost:8265 -L 9190:localhost:9190 -J alice@login "
      "alice@gpu-a017\n";
  (void)std::fputs(header.c_str(), f);
  uint64_t written = header.size();
  uint64_t next_failure = 200ull << 20;
  static const char* failures[] = {
      " 3: Traceback (most recent call last):",
      " 5: gpu-a018:2236:2245 [5] NCCL WARN Timeout waiting for the completion of an all-reduce",
      "slurmstepd: error: Detected 1 oom_kill event in StepId=90001.0. Some of the step tasks have "
      "been OOM Killed.",
      " 7: jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to "
      "allocate 2.00GiB.",
  };
  std::string buf;
  int fi = 0;
  while (written < size) {
    buf.clear();
    while (buf.size() < (1u << 20)) {
      buf += g.line(noisy);
      buf += '\n';
    }
    if (noisy && g.r(8) == 0) {
      buf += g.config_dump();
      buf += '\n';
    }
    if (written + buf.size() >= next_failure) {
      buf += failures[fi++ % 4];
      buf += '\n';
      next_failure += 200ull << 20;
    }
    if (std::fwrite(buf.data(), 1, buf.size(), f) != buf.size())
      throw std::runtime_error("cannot write the generated log");
    written += buf.size();
  }
  return std::fclose(f) == 0;
}

// True when RE2 `p` means the same as POSIX ERE: no RE2-only syntax (\d, \s, \b, (?...),
// lazy quantifiers) and a backslash only before a character ERE treats as special. No translation:
// the benchmark must not grow a second regex dialect of its own.
bool already_posix_ere(const std::string& p) {
  bool in_bracket = false;
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c == '\\') {
      if (in_bracket || i + 1 >= p.size()) return false;
      if (std::strchr(".[]()*+?{}|^$\\", p[++i]) == nullptr) return false;
    } else if (in_bracket) {
      in_bracket = c != ']';
    } else if (c == '[') {
      in_bracket = true;
      if (i + 1 < p.size() && p[i + 1] == '^') ++i;
      if (i + 1 < p.size() && p[i + 1] == ']') ++i;
    } else if (c != '\0' && std::strchr("(*+?}", c) != nullptr && i + 1 < p.size() &&
               p[i + 1] == '?') {
      // "(?" opens an RE2-only group; "*?", "+?", "??", "}?" are lazy quantifiers.
      return false;
    }
  }
  return !in_bracket;
}

struct PatternCounts {
  size_t all = 0;
  size_t ere = 0;
};

// Every signature and harmless pattern of the shipped catalog, one per line: all of them for rg
// (RE2 without group names: rg joins the patterns into one alternation, where repeated names are an
// error), and the ones already valid as POSIX ERE for grep -E.
PatternCounts write_patterns(const std::string& re2_path, const std::string& ere_path) {
  std::vector<triage::InputError> errors;
  const triage::SignatureCatalog cat = triage::SignatureCatalog::load({}, errors);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "%s\n", e.what());
  std::string re2, ere;
  PatternCounts n;
  const auto add = [&](const triage::CompiledPattern& p) {
    std::string s = p.source;
    for (size_t at = s.find("(?P<"); at != std::string::npos; at = s.find("(?P<", at + 1)) {
      const size_t close = s.find('>', at);
      if (close != std::string::npos) s.erase(at + 1, close - at);
    }
    re2 += s + "\n";
    ++n.all;
    if (already_posix_ere(p.source)) {
      ere += p.source + "\n";
      ++n.ere;
    }
  };
  for (const auto& c : cat.classes()) {
    for (const auto& p : c.patterns)
      add(p);
  }
  for (const auto& h : cat.harmless()) {
    for (const auto& p : h.patterns)
      add(p);
  }
  for (const auto& [path, text] : {std::pair{re2_path, re2}, std::pair{ere_path, ere}}) {
    FILE* f = std::fopen(path.c_str(), "we");
    if (f == nullptr || std::fwrite(text.data(), 1, text.size(), f) != text.size() ||
        std::fclose(f) != 0) {
      (void)std::fprintf(stderr, "cannot write %s\n", path.c_str());
      std::exit(1);
    }
  }
  return n;
}

bool have(const char* tool) {
  const std::string cmd = std::string("command -v ") + tool + " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

struct Options {
  uint64_t size = 1ull << 30;
  std::string dir = "/tmp";
  int runs = 3;
  int cpu = 0;
  bool keep = false;
  bool quiet = true;
  bool noisy = true;
};

struct Files {
  std::string re2;
  std::string ere;
  PatternCounts patterns;
};

// Writes the log when it is missing (it is kept for the next run), then times the analysis, rg and
// grep on it and prints them with the speed-up.
bool compare(const Options& o, const Files& f, bool noisy) {
  const std::string log =
      o.dir + "/log_scan_bench-" + (noisy ? "noisy2-" : "") + std::to_string(o.size) + ".log";
  struct stat st {};
  if (::stat(log.c_str(), &st) != 0 || static_cast<uint64_t>(st.st_size) < o.size) {
    (void)std::printf("writing a %.2f GiB %s log to %s ...\n",
                      static_cast<double>(o.size) / (1 << 30), noisy ? "noisy" : "quiet",
                      log.c_str());
    (void)std::fflush(stdout);
    if (!write_log(log, o.size, noisy) || ::stat(log.c_str(), &st) != 0) {
      (void)std::fprintf(stderr, "cannot write %s\n", log.c_str());
      return false;
    }
  }
  // Warm the page cache so that every tool reads from memory.
  run({"cat", log}, o.cpu);

  const double gib = static_cast<double>(st.st_size) / (1 << 30);
  (void)std::printf(
      "%s log: %s (%.2f GiB), patterns: %s (%zu; %zu already POSIX ERE for grep), best of %d, "
      "pinned to CPU %d\n",
      noisy ? "noisy" : "quiet", log.c_str(), gib, f.re2.c_str(), f.patterns.all, f.patterns.ere,
      o.runs, o.cpu);
  const Measure ours =
      best_of({SLURM_TRIAGE_BIN, "analyze", "--slurm-state", "none", "--format", "json", log},
              o.cpu, o.runs);
  (void)std::printf("%-40s %7.3f s (CPU %6.3f s)  %5.2f GiB/s  peak RSS %6.1f MiB  (exit %d)\n",
                    "slurm-triage analyze (full analysis)", ours.seconds, ours.cpu_seconds,
                    gib / ours.seconds, static_cast<double>(ours.max_rss_kb) / 1024, ours.status);
  Measure rg;
  Measure grep;
  if (have("rg")) {
    rg = best_of({"rg", "-j1", "-c", "-f", f.re2, log}, o.cpu, o.runs);
    (void)std::printf("%-40s %7.3f s (CPU %6.3f s)  %5.2f GiB/s  peak RSS %6.1f MiB  (%s lines)\n",
                      "rg -j1 -c -f <catalog patterns>", rg.seconds, rg.cpu_seconds,
                      gib / rg.seconds, static_cast<double>(rg.max_rss_kb) / 1024,
                      rg.out.empty() ? "0" : rg.out.substr(0, rg.out.find('\n')).c_str());
  }
  if (have("grep")) {
    grep = best_of({"grep", "-E", "-c", "-f", f.ere, log}, o.cpu, std::min(o.runs, 1));
    (void)std::printf("%-40s %7.3f s (CPU %6.3f s)  %5.2f GiB/s  peak RSS %6.1f MiB  (%s lines)\n",
                      "grep -E -c -f <the ERE-valid patterns>", grep.seconds, grep.cpu_seconds,
                      gib / grep.seconds, static_cast<double>(grep.max_rss_kb) / 1024,
                      grep.out.empty() ? "0" : grep.out.substr(0, grep.out.find('\n')).c_str());
  }
  // CPU time is printed beside wall time because a shared machine stretches wall time unevenly.
  if (rg.seconds > 0) {
    (void)std::printf("speed-up over rg:   %.2fx wall, %.2fx CPU (target >= 2x)\n",
                      rg.seconds / ours.seconds, rg.cpu_seconds / ours.cpu_seconds);
  }
  if (grep.seconds > 0) {
    (void)std::printf("speed-up over grep: %.2fx wall, %.2fx CPU\n", grep.seconds / ours.seconds,
                      grep.cpu_seconds / ours.cpu_seconds);
  }
  (void)std::printf("peak RSS: %.1f MiB (target < 64 MiB)\n\n",
                    static_cast<double>(ours.max_rss_kb) / 1024);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const std::string v = i + 1 < argc ? argv[i + 1] : "";
    if (a == "--size" && i + 1 < argc) {
      o.size = parse_size(argv[++i]);
    } else if (a == "--log" && (v == "quiet" || v == "noisy" || v == "both")) {
      o.quiet = v != "noisy";
      o.noisy = v != "quiet";
      ++i;
    } else if (a == "--dir" && i + 1 < argc) {
      o.dir = argv[++i];
    } else if (a == "--runs" && i + 1 < argc) {
      o.runs = std::max(1, static_cast<int>(std::strtol(argv[++i], nullptr, 10)));
    } else if (a == "--cpu" && i + 1 < argc) {
      o.cpu = static_cast<int>(std::strtol(argv[++i], nullptr, 10));
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      (void)std::fprintf(
          stderr,
          "usage: log_scan_bench [--size BYTES[K|M|G]] [--log quiet|noisy|both] [--dir DIR] "
          "[--runs N] [--cpu N] [--keep]\n");
      return 2;
    }
  }
  Files f;
  f.re2 = o.dir + "/log_scan_bench.re2";
  f.ere = o.dir + "/log_scan_bench.ere";
  f.patterns = write_patterns(f.re2, f.ere);
  bool ok = true;
  if (o.quiet) ok = compare(o, f, false) && ok;
  if (o.noisy) ok = compare(o, f, true) && ok;
  if (!o.keep) {
    ::unlink(f.re2.c_str());
    ::unlink(f.ere.c_str());
  }
  return ok ? 0 : 1;
}
