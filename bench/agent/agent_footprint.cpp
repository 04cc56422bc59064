// The agent's CPU and memory while it works the way a busy GPU node makes it work: a kernel log
// of 10,000 lines a second (mostly a flood that the classifier folds, plus a steady trickle of
// distinct events), a process table of 5,000 entries sampled every 5 s, 64 running jobs whose
// tasks (11 each: two slurmstepd, the extern step's sleep, 8 ranks) sit in their Slurm cgroups
// (cgroup v2 layout) while the rest are daemons and kernel threads, 10 tasks stuck in D in the
// amdgpu CPER path (8 ranks, 2 outside any job), 8 GPUs' RAS and AER counters read every 30 s,
// and Prometheus scraping /metrics every 15 s. Targets (issues 3 and 16): under 1% of a core and
// 32 MiB RSS.
//
// The /proc and cgroup trees are fixtures on tmpfs: their reads cost about what procfs and
// cgroupfs reads cost, without their kernel-side work (formatting a task's stat line).
// --whole-node-interval 0 makes the D-state sampler walk the whole process table at every sample,
// as it did before issue 16: run it beside the default to see what sampling the jobs' tasks saves.
//
// For scale, the same number of lines is run through `grep -c amdgpu` in this process, and its CPU
// time per second of log is printed beside the agent's.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/offline_slurm_client.h"
#include "common/logging.h"
#include "common/text.h"
#include "common/time_util.h"

namespace {

using namespace triage;
using namespace triage::agent;

double cpu_seconds(const rusage& r) {
  return static_cast<double>(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         static_cast<double>(r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e6;
}

long status_kib(const char* key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) == 0) return std::strtol(line.c_str() + std::strlen(key), nullptr, 10);
  }
  return -1;
}

void write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

constexpr int kTasksPerJob = 11;

// `procs` processes from pid 1000 on: the tasks of `jobs` Slurm jobs first (in their cgroups under
// `cgroup_root`), then daemons and kernel threads. Ten are stuck in D: eight ranks, two outside
// any job.
void make_proc(const std::string& root, const std::string& cgroup_root, int procs, int jobs) {
  write(root + "/stat", "cpu 1 2 3 4\nprocs_running 12\nprocs_blocked 10\n");
  const int job_tasks = std::min(procs, jobs * kTasksPerJob);
  std::map<std::string, std::string> cgroup_procs;  // cgroup -> its cgroup.procs
  for (int pid = 1000; pid < 1000 + procs; ++pid) {
    const int n = pid - 1000;
    const bool in_job = n < job_tasks;
    const bool stuck = in_job ? n % kTasksPerJob == 3 && n / kTasksPerJob < 8
                              : n == job_tasks || n == job_tasks + 1;
    std::string cgroup = "/system.slice/daemon" + std::to_string(n % 40) + ".service";
    if (in_job) {
      static const char* const kPlaces[kTasksPerJob] = {
          "step_extern/slurm",  "step_extern/user/task_special",
          "step_0/slurm",       "step_0/user/task_0",
          "step_0/user/task_1", "step_0/user/task_2",
          "step_0/user/task_3", "step_0/user/task_4",
          "step_0/user/task_5", "step_0/user/task_6",
          "step_0/user/task_7"};
      cgroup = "/system.slice/slurmstepd.scope/job_" + std::to_string(5000 + n / kTasksPerJob) +
               "/" + kPlaces[n % kTasksPerJob];
      cgroup_procs[cgroup] += std::to_string(pid) + "\n";
    }
    const std::string dir = root + "/" + std::to_string(pid);
    std::ostringstream stat;
    stat << pid << " (" << (stuck ? "cat" : "python3") << ") " << (stuck ? 'D' : 'S')
         << " 1 1 1 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 " << 100000 + pid << " 1234 567 0\n";
    write(dir + "/stat", stat.str());
    write(dir + "/wchan", stuck ? "amdgpu_cper_ring_write" : "do_epoll_wait");
    write(dir + "/cgroup", "0::" + cgroup + "\n");
  }
  for (const auto& [cgroup, pids] : cgroup_procs)
    write(cgroup_root + cgroup + "/cgroup.procs", pids);
}

void make_sysfs(const std::string& root) {
  for (int card = 0; card < 8; ++card) {
    char addr[32];
    (void)std::snprintf(addr, sizeof addr, "0000:%02x:00.0", 0xc1 + card);
    const std::string dev = root + "/devices/pci0000:00/" + addr;
    for (const char* block : {"umc", "xgmi_wafl", "gfx", "mmhub", "sdma", "hdp", "pcie_bif"}) {
      write(dev + "/ras/" + block + "_err_count", "ue: 0\nce: 0\n");
    }
    for (const char* sev : {"correctable", "nonfatal", "fatal"})
      write(dev + "/aer_dev_" + sev, "RxErr 0\nTOTAL_ERR_COR 0\n");
    const std::string card_dir = root + "/class/drm/card" + std::to_string(card);
    std::filesystem::create_directories(card_dir);
    std::error_code ec;
    std::filesystem::create_symlink(std::string("../../../devices/pci0000:00/") + addr,
                                    card_dir + "/device", ec);
  }
}

// CPU time `grep -c amdgpu` spends on `lines` lines of kernel text, measured on the child.
double grep_cpu_seconds(const std::string& dir, long lines) {
  const std::string file = dir + "/dmesg.txt";
  {
    std::ofstream out(file);
    for (long i = 0; i < lines; ++i) {
      out << "[" << 1000 + i / 10000 << "." << i % 10000
          << "] amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=" << i
          << ", emitted seq=" << i + 1 << "\n";
    }
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (std::freopen("/dev/null", "w", stdout) == nullptr) ::_exit(127);
    ::execlp("grep", "grep", "-c", "amdgpu", file.c_str(), nullptr);
    ::_exit(127);
  }
  int status = 0;
  rusage ru{};
  ::wait4(pid, &status, 0, &ru);
  return cpu_seconds(ru);
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 30, procs = 5000, jobs = 64, lines_per_sec = 10000;
  std::string whole_node_interval;  // the agent's default unless given
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = static_cast<int>(parse_int(argv[i + 1]).value_or(0));
    if (a == "--seconds") seconds = v;
    if (a == "--procs") procs = v;
    if (a == "--lines") lines_per_sec = v;
    if (a == "--jobs") jobs = v;
    if (a == "--whole-node-interval") whole_node_interval = argv[i + 1];
  }
  init_logging("agent-bench", "warn");
  // tmpfs when there is one: the fixture /proc then costs about what procfs costs (no disk).
  std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm/agent-bench-XXXXXX"
                                                               : "/tmp/agent-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl.data());
  make_proc(dir + "/proc", dir + "/cgroup", procs, jobs);
  make_sysfs(dir + "/sys");

  ConfigLoad load = load_agent_config_text(
      "NodeName=bench001\nSpoolDir=" + dir + "/spool\nSocketPath=" + dir +
          "/agent.sock\nHttpAddress=127.0.0.1\nHttpPort=0\nKernelSource=none\n"
          "ProcRoot=" +
          dir + "/proc\nSysfsRoot=" + dir + "/sys\nCgroupRoot=" + dir + "/cgroup\n" +
          (whole_node_interval.empty() ? ""
                                       : "DStateWholeNodeInterval=" + whole_node_interval + "\n"),
      "bench.conf");
  if (!load.errors.empty()) {
    (void)std::fprintf(stderr, "%s\n", load.errors.front().what());
    return 1;
  }
  AgentOptions options;
  options.boot_id = "bench-boot";
  Agent agent(load.config, make_offline_slurm_client("bench"), options);
  agent.start();
  agent.run_in_background();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // first samples, warm caches
  (void)std::fprintf(stderr, "measuring (pid %d)\n", static_cast<int>(::getpid()));

  // What the kernel pipeline hands the agent for this stream, batch by batch (the glue reads
  // about every 100 ms): the flood folded into one event whose count grows, one distinct event
  // a second, and the position after the batch.
  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const auto t0 = std::chrono::steady_clock::now();
  const int batches_per_sec = 10;
  const int lines_per_batch = lines_per_sec / batches_per_sec;
  KernelEvent flood;
  flood.id = "bench-boot:1";
  flood.kind = "gpu-ring-timeout";
  flood.severity = Severity::kError;
  flood.rule = "amdgpu-ring-timeout";
  flood.device = "0000:c1:00.0";
  flood.time_usec = now_usec();
  flood.lines = {
      "amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1, emitted seq=2"};
  flood.count = 0;
  uint64_t line_no = 0;
  int scrapes = 0;
  for (int b = 0; b < seconds * batches_per_sec; ++b) {
    std::vector<KernelEvent> batch;
    flood.count += static_cast<uint64_t>(lines_per_batch);
    flood.last_usec = now_usec();
    batch.push_back(flood);
    if (b % batches_per_sec == 0) {
      KernelEvent e;
      e.id = "bench-boot:" + std::to_string(1000000 + b);
      e.kind = "hung-task";
      e.severity = Severity::kError;
      e.time_usec = e.last_usec = now_usec();
      e.pid = 1000 + b % std::max(procs, 1);
      e.lines = {"INFO: task python3:" + std::to_string(*e.pid) +
                 " blocked for more than 120 seconds."};
      batch.push_back(std::move(e));
    }
    line_no += static_cast<uint64_t>(lines_per_batch);
    agent.ingest(std::move(batch), "kmsg:bench-boot:" + std::to_string(line_no));
    if (b % (15 * batches_per_sec) == 0) {
      (void)agent.metrics();
      ++scrapes;
    }
    std::this_thread::sleep_until(t0 + std::chrono::milliseconds(100 * (b + 1)));
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const double cpu = cpu_seconds(after) - cpu_seconds(before);
  const long rss = status_kib("VmRSS:");
  const long hwm = status_kib("VmHWM:");
  agent.stop();

  const double grep_cpu = grep_cpu_seconds(dir, static_cast<long>(lines_per_sec) * seconds);
  std::printf(
      "agent footprint over %.1f s: %d kernel lines/s (%d batches/s), %d processes (%d in %d "
      "jobs) sampled every %llds with the whole table walked every %llds, 8 GPUs' counters every "
      "%llds, %d scrapes\n",
      wall, lines_per_sec, batches_per_sec, procs, std::min(procs, jobs * kTasksPerJob), jobs,
      static_cast<long long>(load.config.dstate_interval_ms / 1000),
      static_cast<long long>(load.config.dstate_whole_node_interval_sec),
      static_cast<long long>(load.config.sysfs_interval_ms / 1000), scrapes);
  std::printf("  agent CPU: %.3f s = %.2f%% of one core (target < 1%%)\n", cpu, 100.0 * cpu / wall);
  std::printf("  agent RSS: %ld KiB now, %ld KiB peak (target < 32768 KiB)\n", rss, hwm);
  std::printf(
      "  grep -c amdgpu over the same %ld lines: %.3f s CPU = %.2f%% of one core for this stream; "
      "agent/grep = %.2f\n",
      static_cast<long>(lines_per_sec) * seconds, grep_cpu, 100.0 * grep_cpu / wall,
      grep_cpu > 0 ? cpu / grep_cpu : 0.0);
  std::printf(
      "  note: events are fed as the kernel pipeline would hand them to the agent (folded flood + "
      "distinct events); line classification itself is benchmarked in bench/collector\n");
  std::filesystem::remove_all(dir);
  return 0;
}
