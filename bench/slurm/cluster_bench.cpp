// spank_triage.so in a real single-node Slurm (scripts/slurm-cluster): how long slurmd's spank
// epilog takes with the plugin (agent down, stuck, acknowledging) against the same epilog with an
// empty plugstack, and how much the plugin adds to launching a step (`srun -n 2 true`, timed
// inside a batch job, with and without the plugin, interleaved).
//
//   cluster_bench [JOBS_PER_CASE] [SRUNS_PER_JOB]      (defaults 20 and 25; needs root)
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "tests/e2e/slurm_cluster.h"
#include "tests/spank/fake_agent.h"

namespace {

using triage::testing::FakeAgent;
using triage::testing::SlurmCluster;

struct Stats {
  double p50 = 0;
  double p99 = 0;
  double mean = 0;
};

Stats summarize(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())))];
  };
  s.p50 = at(0.5);
  s.p99 = at(0.99);
  for (const double x : v)
    s.mean += x;
  s.mean /= static_cast<double>(v.size());
  return s;
}

void set_plugstack(const SlurmCluster& c, const std::string& line) {
  std::ofstream(c.state_dir() + "/etc/plugstack.conf") << line << "\n";
}

// Epilog durations (ms) of `jobs` trivial jobs.
std::vector<double> epilogs(const SlurmCluster& c, const std::string& dir, int jobs) {
  std::vector<uint32_t> ids;
  ids.reserve(static_cast<size_t>(std::max(jobs, 0)));
  for (int i = 0; i < jobs; ++i)
    ids.push_back(c.sbatch(dir, {"-o", "/dev/null", "--wrap", "true"}));
  std::vector<double> ms;
  for (const uint32_t id : ids) {
    c.wait_job(id);
    if (const auto e = c.epilog_ms(id)) ms.push_back(*e);
  }
  return ms;
}

// Wall time (ms) of each `srun -n 2 true` in one batch job.
std::vector<double> sruns(const SlurmCluster& c, const std::string& dir, int count) {
  const std::string out = dir + "/srun-times.txt";
  (void)std::remove(out.c_str());  // usually absent
  const std::string script = "for i in $(seq " + std::to_string(count) +
                             "); do s=$(date +%s%N); srun -n 2 true; e=$(date +%s%N); "
                             "echo $(( (e - s) / 1000 )); done";
  const uint32_t id = c.sbatch(dir, {"-n", "2", "-o", out, "--wrap", script});
  c.wait_job(id, std::chrono::minutes(10));
  std::vector<double> ms;
  std::ifstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && std::isdigit(static_cast<unsigned char>(line[0])) != 0) {
      ms.push_back(std::stod(line) / 1000.0);
    }
  }
  return ms;
}

void print(const char* what, const Stats& s, const Stats& base) {
  (void)std::printf("  %-40s p50 %7.1f ms  p99 %7.1f ms  mean %7.1f ms  (mean %.2fx)\n", what,
                    s.p50, s.p99, s.mean, base.mean > 0 ? s.mean / base.mean : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    (void)std::fprintf(stderr, "cluster_bench: needs root (it starts Slurm daemons)\n");
    return 2;
  }
  const int jobs = argc > 1 ? static_cast<int>(std::strtol(argv[1], nullptr, 10)) : 20;
  const int per_job = argc > 2 ? static_cast<int>(std::strtol(argv[2], nullptr, 10)) : 25;
  triage::testing::ClusterOptions options;
  options.plugin = SPANK_TRIAGE_SO;
  SlurmCluster c(options);
  std::string with_plugin;
  {
    std::ifstream in(c.state_dir() + "/etc/plugstack.conf");
    std::getline(in, with_plugin);
  }
  const std::string dir = c.make_job_dir("bench");

  (void)std::printf(
      "slurmd spank epilog per job (slurmd.log timestamps, ms resolution), %d jobs each\n", jobs);
  set_plugstack(c, "");
  const Stats base = summarize(epilogs(c, dir, jobs));
  print("no plugin (empty plugstack)", base, base);
  set_plugstack(c, with_plugin);
  print("plugin, agent down", summarize(epilogs(c, dir, jobs)), base);
  {
    FakeAgent agent(c.socket_path(), FakeAgent::Behaviour::kSilent);
    print("plugin, agent stuck", summarize(epilogs(c, dir, jobs)), base);
  }
  {
    FakeAgent agent(c.socket_path(), FakeAgent::Behaviour::kAck);
    agent.set_journal(c.state_dir() + "/bench-journal");
    print("plugin, agent up", summarize(epilogs(c, dir, jobs)), base);
  }

  (void)std::printf(
      "step launch: srun -n 2 true inside a batch job, %d per job, 2 jobs each, "
      "interleaved\n",
      per_job);
  std::vector<double> without;
  std::vector<double> with;
  for (int round = 0; round < 2; ++round) {
    set_plugstack(c, "");
    auto a = sruns(c, dir, per_job);
    without.insert(without.end(), a.begin(), a.end());
    set_plugstack(c, with_plugin);
    auto b = sruns(c, dir, per_job);
    with.insert(with.end(), b.begin(), b.end());
  }
  const Stats w0 = summarize(without);
  print("without the plugin", w0, w0);
  print("with the plugin (agent down)", summarize(with), w0);
  return 0;
}
