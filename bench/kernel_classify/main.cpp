// Kernel-line classification throughput, beside grep and ripgrep over the same file with the same
// patterns (the shipped rules' openers and harmless patterns), all in one run. The classifier
// runs on one core: text source, line prefixes, rule matching, record assembly, folding.
//
//   kernel_classify_bench [--lines N] [--keep FILE]
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "collector/kernel_pipeline.h"
#include "collector/kernel_rules.h"
#include "common/safe_io.h"
#include "mixed_kernel_log.h"

namespace {

struct Timing {
  double wall = 0;
  double cpu = 0;
  std::string output;
  bool ok = false;
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double thread_cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// Runs argv with stdout captured; CPU time from the child's rusage.
Timing run(const std::vector<std::string>& argv) {
  Timing t;
  int out[2];
  if (::pipe(out) != 0) return t;
  const double start = now_s();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(out[1], STDOUT_FILENO);
    ::close(out[0]);
    ::close(out[1]);
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const auto& a : argv)
      args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::setenv("LC_ALL", "C", 1);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  ::close(out[1]);
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    t.output.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  int status = 0;
  struct rusage ru {};
  ::wait4(pid, &status, 0, &ru);
  t.wall = now_s() - start;
  t.cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
          static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
  t.ok = WIFEXITED(status) && (WEXITSTATUS(status) == 0 || WEXITSTATUS(status) == 1);
  while (!t.output.empty() && (t.output.back() == '\n'))
    t.output.pop_back();
  return t;
}

// RE2 → what both grep -E (GNU) and rg accept: named groups and non-capturing groups become plain
// groups, \d a bracket, lazy quantifiers greedy, (?i:...) a plain group (grep has no inline flags;
// the one such pattern matches the same lines here).
std::string portable(const std::string& re) {
  std::string out;
  for (size_t i = 0; i < re.size(); ++i) {
    if (re.compare(i, 4, "(?P<") == 0) {
      i = re.find('>', i);
      out += '(';
      continue;
    }
    if (re.compare(i, 3, "(?:") == 0 || re.compare(i, 4, "(?i:") == 0) {
      i += re.compare(i, 3, "(?:") == 0 ? size_t{2} : size_t{3};
      out += '(';
      continue;
    }
    if (re[i] == '\\' && i + 1 < re.size()) {
      if (re[i + 1] == 'd') {
        out += "[0-9]";
        ++i;
        continue;
      }
      out += re.substr(i, 2);
      ++i;
      continue;
    }
    if (re[i] == '?' && i > 0 && (re[i - 1] == '*' || re[i - 1] == '+' || re[i - 1] == '?')) {
      continue;
    }
    out += re[i];
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t lines = 1'000'000;
  std::string keep;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--lines" && i + 1 < argc) lines = std::strtoull(argv[++i], nullptr, 10);
    if (a == "--keep" && i + 1 < argc) keep = argv[++i];
  }
  char dir_tmpl[] = "/tmp/kernel-classify-bench-XXXXXX";
  const std::string dir = keep.empty() ? std::string(::mkdtemp(dir_tmpl)) : "";
  const std::string log = keep.empty() ? dir + "/kernel.log" : keep;
  const uint64_t bytes = triage::bench::write_mixed_kernel_log(log, lines);

  auto load = triage::collector::load_kernel_rules({TRIAGE_SOURCE_RULES_DIR});
  if (!load.rules) {
    for (const auto& e : load.errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }

  // The classifier, on this thread only.
  uint64_t events = 0;
  triage::collector::KernelClassifierStats stats;
  const double w0 = now_s();
  const double c0 = thread_cpu_s();
  {
    triage::UniqueFd fd = triage::open_regular_file(log, true);
    auto source = triage::collector::open_text_source(fd.get(), log);
    triage::collector::KernelClassifier classifier(load.rules, "bench");
    std::vector<triage::collector::KernelRecord> batch;
    std::vector<triage::KernelEvent> out;
    bool more = true;
    while (more) {
      batch.clear();
      more = source->read(batch, 0);
      for (const auto& r : batch)
        classifier.feed(r, out);
      events += out.size();
      out.clear();
    }
    classifier.flush(out);
    events += out.size();
    stats = classifier.stats();
  }
  const double ours_cpu = thread_cpu_s() - c0;
  const double ours_wall = now_s() - w0;

  const std::string patterns = (keep.empty() ? dir : std::string("/tmp")) + "/kernel-patterns.txt";
  {
    FILE* f = std::fopen(patterns.c_str(), "w");
    for (const auto& p : load.rules->opener_patterns())
      (void)std::fprintf(f, "%s\n", portable(p).c_str());
    (void)std::fclose(f);
  }
  const Timing grep = run({"grep", "-E", "-c", "-f", patterns, log});
  const Timing rg = run({"rg", "-c", "-j1", "-f", patterns, log});

  const double n = static_cast<double>(lines);
  std::printf("kernel_classify: %llu lines, %.1f MiB of mixed dmesg, %zu rule patterns\n",
              static_cast<unsigned long long>(lines), static_cast<double>(bytes) / 1048576.0,
              load.rules->opener_patterns().size());
  std::printf("%-34s %9s %9s %14s %10s  %s\n", "tool", "wall s", "cpu s", "lines/s (cpu)",
              "cpu ratio", "result");
  std::printf("%-34s %9.3f %9.3f %14.0f %10s  %llu events (%llu harmless lines)\n",
              "slurm-triage classifier (1 core)", ours_wall, ours_cpu, n / ours_cpu, "1.00",
              static_cast<unsigned long long>(events),
              static_cast<unsigned long long>(stats.harmless));
  for (const auto& [name, t] :
       {std::pair<const char*, const Timing&>{"grep -E -c -f patterns", grep},
        std::pair<const char*, const Timing&>{"rg -c -j1 -f patterns", rg}}) {
    if (!t.ok) {
      std::printf("%-34s %9s %9s %14s %10s  failed or missing: %s\n", name, "-", "-", "-", "-",
                  t.output.c_str());
      continue;
    }
    std::printf("%-34s %9.3f %9.3f %14.0f %10.2f  %s matching lines\n", name, t.wall, t.cpu,
                n / t.cpu, t.cpu / ours_cpu, t.output.c_str());
  }
  std::printf("target: >= 200000 lines/s on one core -> %s\n",
              n / ours_cpu >= 200000 ? "met" : "NOT met");
  if (keep.empty()) {
    (void)std::remove(log.c_str());
    (void)std::remove(patterns.c_str());
    ::rmdir(dir.c_str());
  }
  return 0;
}
