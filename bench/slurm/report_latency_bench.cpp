// Time from a job's end to its triage.md on disk, on a real single-node Slurm with the plugin, the
// agent and the analyzer: a job writes a large log in the harness layout (default 1 GiB of
// training-step lines with an NCCL failure near the end) and fails; the clock runs from the job
// end the epilog reported (job_end.time_usec in the agent's spool) to the report's mtime. For
// scale, `grep -c` and `rg -c` over the same log run in this process. The agent runs with the
// shipped defaults and a live kernel reader (a kernel log file, as the e2e tests use), so the
// figure includes its wait for late kernel lines: EvidenceSettleDelay (2 s) before issue 16, the
// reader catching up (milliseconds) since.
//
//   report_latency_bench [MiB] [MODE]     (default 1024, basic; target: < 5 s in basic)
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>

#include "tests/e2e/slurm_cluster.h"

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using triage::testing::SlurmCluster;

double seconds_of(const std::function<void()>& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void run_quiet(const std::string& cmd) {
  if (std::system((cmd + " >/dev/null").c_str()) < 0) std::perror(cmd.c_str());
}

int64_t job_end_usec(const SlurmCluster& c, uint32_t id) {
  std::ifstream in(c.state_dir() + "/triage/spool/jobs/" + std::to_string(id) + ".jsonl");
  std::string line;
  while (std::getline(in, line)) {
    const auto j = json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("m")) continue;
    if (j["m"].value("op", "") == "job_end") return j["m"].value("time_usec", int64_t{0});
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (geteuid() != 0) {
    (void)std::fprintf(stderr, "report_latency_bench: needs root (it starts Slurm daemons)\n");
    return 2;
  }
  const long mib = argc > 1 ? std::strtol(argv[1], nullptr, 10) : 1024;
  const std::string mode = argc > 2 ? argv[2] : "basic";
  triage::testing::ClusterOptions options;
  options.plugin = SPANK_TRIAGE_SO;
  options.agent = SLURM_TRIAGE_AGENT;
  options.analyzer = SLURM_TRIAGE_CLI;
  options.agent_settings = {"KernelSource=file", "KernelPath=@STATE@/kernel.log"};
  SlurmCluster c(options);
  const std::string dir = c.make_job_dir("big-log");
  fs::create_directories(dir + "/outputs");
  chown((dir + "/outputs").c_str(), c.user_uid(), c.user_gid());

  // The log is written by the job itself (as the user), quickly: one line repeated by `yes`.
  std::ofstream(dir + "/job.sh")
      << "#!/bin/bash\n"
      << "d=outputs/${SLURM_JOB_ID}-${SLURM_JOB_NAME}\n"
      << "mkdir -p $d && ln -sfn ../${SLURM_JOB_ID}-${SLURM_JOB_NAME}.log $d/log\n"
      << "echo PASSTHROUGH_ARGS=steps=100000000\n"
      << "yes '0: [2026-11-21 10:00:00] completed step: 1234, seconds: 11.385, TFLOP/s/device: "
         "401.967, Tokens/s/device: 3431.735, total_weights: 1048576, loss: 9.477' | head -c "
      << mib << "M\necho\n"
      << "echo 'vm:1:1 [1] NCCL WARN Timeout waiting for all-reduce after 600000 ms'\n"
      << "exit 1\n";
  const uint32_t id =
      c.sbatch(dir, {"-J", "big", "-o", "outputs/%j-%x.log", "--triage=" + mode, "job.sh"});
  c.wait_job(id, std::chrono::minutes(30));
  const fs::path report = fs::path(dir) / "outputs" / (std::to_string(id) + "-big") / "triage.md";
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  while (!fs::exists(report) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!fs::exists(report)) {
    (void)std::fprintf(stderr, "no report after 10 minutes\n%s\n", c.logs().c_str());
    return 1;
  }
  struct stat st {};
  stat(report.c_str(), &st);
  const int64_t written_usec =
      static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000 + st.st_mtim.tv_nsec / 1000;
  const double latency = static_cast<double>(written_usec - job_end_usec(c, id)) / 1e6;

  const std::string log = dir + "/outputs/" + std::to_string(id) + "-big.log";
  const double grep_s = seconds_of([&] { run_quiet("grep -c 'NCCL WARN' '" + log + "'"); });
  const double rg_s = seconds_of([&] { run_quiet("rg -c 'NCCL WARN' '" + log + "'"); });
  (void)std::printf(
      "job end -> triage.md (%ld MiB log, --triage=%s): %.2f s   "
      "(grep -c: %.2f s = %.1fx, rg -c: %.2f s = %.1fx)\n",
      mib, mode.c_str(), latency, grep_s, latency / grep_s, rg_s, latency / rg_s);
  (void)std::printf("target < 5 s in basic: %s\n", latency < 5.0 ? "met" : "NOT MET");
  return 0;
}
