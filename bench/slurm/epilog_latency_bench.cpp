// How long spank_triage.so's job epilog callback keeps a node in COMPLETING: the built plugin,
// dlopen()ed like slurmstepd does, its slurm_spank_job_epilog called N times with slurmd's epilog
// environment, against an agent that acknowledges after an fdatasync (like the real one), no agent
// at all (inbox fallback), and an agent that never answers (timeout, then inbox). For scale, the
// same process also times fork+exec of /bin/true, the least an epilog script costs.
//
//   epilog_latency_bench [N]     (default 200; target: p99 < 20 ms in every case)
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tests/spank/fake_agent.h"
#include "tests/spank/fake_spank.h"
#include "tests/spank/plugin_loader.h"
#include "tests/spank/temp_dir.h"

namespace {

using triage::testing::fake_handle;
using triage::testing::fake_spank;
using triage::testing::FakeAgent;
namespace fs = std::filesystem;

struct Stats {
  double p50 = 0;
  double p99 = 0;
  double max = 0;
};

Stats summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    const size_t i =
        std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())));
    return ms[i];
  };
  return {at(0.50), at(0.99), ms.back()};
}

std::vector<double> time_n(int n, const std::function<void()>& fn) {
  std::vector<double> ms;
  ms.reserve(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const auto t1 = std::chrono::steady_clock::now();
    ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  return ms;
}

void print(const char* what, const Stats& s, double baseline_p50) {
  (void)std::printf("%-44s p50 %7.3f ms  p99 %7.3f ms  max %7.3f ms  (p50 = %5.2fx fork+exec)\n",
                    what, s.p50, s.p99, s.max, s.p50 / baseline_p50);
}

}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? static_cast<int>(std::strtol(argv[1], nullptr, 10)) : 200;
  if (n <= 0) {
    (void)std::fprintf(stderr, "usage: epilog_latency_bench [N]\n");
    return 2;
  }
  triage::testing::TempDir dir("triage-epilog-bench");
  const std::string socket = dir / "agent.sock";
  const std::string inbox = dir / "inbox";
  std::vector<std::string> args = {"socket=" + socket, "inbox=" + inbox, "default=basic"};
  std::vector<char*> argv_plugin;
  argv_plugin.reserve(args.size());
  for (auto& a : args)
    argv_plugin.push_back(a.data());

  // slurmd's epilog environment for a typical job.
  setenv("SLURMD_NODENAME", "node001", 1);
  setenv("SLURM_NODELIST", "node[001-004]", 1);
  setenv("SLURM_JOB_USER", "alice", 1);
  setenv("SLURM_JOB_PARTITION", "gpu", 1);
  setenv("SLURM_JOB_WORK_DIR", "/home/alice/runs/llama-70b", 1);
  setenv("SLURM_JOB_EXIT_CODE", "35072", 1);
  setenv("SLURM_JOB_DERIVED_EC", "0", 1);
  setenv("SLURM_JOB_STDOUT", "/home/alice/runs/llama-70b/outputs/%j-%x.log", 1);
  setenv("SLURM_JOB_RESTART_COUNT", "0", 1);
  fake_spank().context = S_CTX_JOB_SCRIPT;
  fake_spank().items = {{S_JOB_ID, 4242}, {S_JOB_UID, 1000}, {S_JOB_GID, 1000}};

  const auto baseline = summarize(time_n(n, [] {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/true", "true", static_cast<char*>(nullptr));
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
  }));
  (void)std::printf("spank_triage.so job epilog callback, %d calls each\n", n);
  print("baseline: fork+exec /bin/true", baseline, baseline.p50);

  auto epilog = [&] {
    triage::testing::LoadedPlugin plugin(SPANK_TRIAGE_SO);
    return time_n(n, [&] {
      plugin.call("job_epilog", fake_handle(), static_cast<int>(argv_plugin.size()),
                  argv_plugin.data());
    });
  };

  bool ok = true;
  {
    FakeAgent agent(socket, FakeAgent::Behaviour::kAck);
    agent.set_journal(dir / "journal");
    const Stats s = summarize(epilog());
    print("agent up (acks after fdatasync)", s, baseline.p50);
    ok = ok && s.p99 < 20 && agent.lines().size() == static_cast<size_t>(n);
  }
  fs::remove_all(inbox);
  {
    const Stats s = summarize(epilog());
    print("agent down (inbox file)", s, baseline.p50);
    ok = ok && s.p99 < 20;
  }
  const auto inbox_files = static_cast<size_t>(std::distance(fs::directory_iterator(inbox), {}));
  fs::remove_all(inbox);
  {
    FakeAgent agent(socket, FakeAgent::Behaviour::kSilent);
    const Stats s = summarize(epilog());
    print("agent stuck (10 ms timeout, then inbox)", s, baseline.p50);
    ok = ok && s.p99 < 20;
  }
  fs::remove_all(inbox);
  {
    FakeAgent agent(socket, FakeAgent::Behaviour::kBacklogFull);
    const Stats s = summarize(epilog());
    print("agent backlog full (inbox)", s, baseline.p50);
    ok = ok && s.p99 < 20;
  }
  if (inbox_files != static_cast<size_t>(n)) {
    (void)std::printf("unexpected: %zu inbox files for %d calls with the agent down\n", inbox_files,
                      n);
    ok = false;
  }
  (void)std::printf("target p99 < 20 ms in every case: %s\n", ok ? "met" : "NOT MET");
  return ok ? 0 : 1;
}
