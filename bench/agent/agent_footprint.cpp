// The agent's CPU and memory while it works the way a busy GPU node makes it work: a kernel log
// of 10,000 lines a second (mostly a flood that the classifier folds, plus a steady trickle of
// distinct events), a process table of 5,000 entries sampled every 5 s, 64 running jobs whose
// tasks (11 each: two slurmstepd, the extern step's sleep, 8 ranks) sit in their Slurm cgroups
// (cgroup v2 layout) while the rest are daemons and kernel threads, 10 tasks stuck in D in the
// amdgpu CPER path (8 ranks, 2 outside any job), 8 GPUs' RAS and AER counters read every 30 s,
// Prometheus scraping /metrics every 15 s, and (issue 15) the live loop following the 64 jobs'
// logs: each job has triage on (basic), its batch step on this node, its owner `nobody` (when run
// as root: the logs are opened as the owner, as on a real node) and a log its writer appends a
// training step line to 100 times a second. slurmctld's answers for the jobs (StdOut path,
// RUNNING, start time) come from a SlurmClient that knows them; everything else it refuses, as the
// offline client does. Targets (issues 3, 15 and 16): under 1% of a core and 32 MiB RSS.
//
// The /proc and cgroup trees are fixtures on tmpfs: their reads cost about what procfs and
// cgroupfs reads cost, without their kernel-side work (formatting a task's stat line).
// --whole-node-interval 0 makes the D-state sampler walk the whole process table at every sample,
// as it did before issue 16: run it beside the default to see what sampling the jobs' tasks saves.
// --live 0 registers no job for the live loop (the agent as it was before issue 15), to compare.
// Measuring starts once the live loop follows every job and has scanned bytes of each; the bytes
// it scanned in the window are printed, so the figure is never that of an idle loop. The writer
// is a process of its own and its CPU is not counted; the owner-open children are.
//
// For scale, the same number of lines is run through `grep -c amdgpu` in this process, and its CPU
// time per second of log is printed beside the agent's.
//
// Figures (commit a4089d1, RelWithDebInfo, 60 s, 2 cores shared with other work, as root): with the
// live loop following the 64 jobs (46 MiB scanned in the window, no poll failure) 0.47-0.52% of a
// core (0.0074-0.0081% per job), VmRSS 17.4 MiB, VmHWM 17.6 MiB; `--live 0` 0.47%, 14.6 MiB and
// 14.8 MiB. More in docs/agent.md, "Footprint".
#include <sys/resource.h>
#include <sys/stat.h>
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

#include <signal.h>

#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/server/callers.h"
#include "agent/slurm/offline_slurm_client.h"
#include "bench/support/process_usage.h"
#include "bench/support/training_log.h"
#include "bench/support/unix_request.h"
#include "common/logging.h"
#include "common/privilege.h"
#include "common/text.h"
#include "common/time_util.h"

namespace {

using namespace triage;
using namespace triage::agent;
using bench::cpu_seconds;
using bench::status_kib;

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

constexpr uint64_t kFirstJob = 5000;  // the fixture's cgroups hold jobs 5000 on

// slurmctld as the live loop asks it: the running jobs' facts. The facts are fixed before the agent
// starts (its workers ask at once); anything else is refused as the offline client refuses it.
class RunningJobs : public SlurmClient {
 public:
  explicit RunningJobs(std::map<uint64_t, JobFacts> jobs)
      : jobs_(std::move(jobs)), offline_(make_offline_slurm_client("bench: no slurmctld")) {}

  std::optional<JobFacts> load_job(uint64_t job_id, std::string& error) override {
    const auto it = jobs_.find(job_id);
    if (it != jobs_.end()) return it->second;
    return offline_->load_job(job_id, error);
  }
  std::optional<SlurmNodeState> load_node(const std::string& node, std::string& error) override {
    return offline_->load_node(node, error);
  }
  std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes,
                                                    std::string& error) override {
    return offline_->node_addresses(nodes, error);
  }
  bool drain_node(const std::string& node, const std::string& why, std::string& error) override {
    return offline_->drain_node(node, why, error);
  }
  bool undrain_node(const std::string& node, const std::string& expected_reason,
                    std::string& error) override {
    return offline_->undrain_node(node, expected_reason, error);
  }

 private:
  const std::map<uint64_t, JobFacts> jobs_;
  std::unique_ptr<SlurmClient> offline_;
};

// The jobs' owner: `nobody` when run as root (the agent then opens the logs as that user, as on a
// real node), else this user.
Identity job_owner() {
  const std::optional<uid_t> nobody = ::geteuid() == 0 ? lookup_user("nobody") : std::nullopt;
  return identity_for_uid(nobody.value_or(::geteuid()));
}

// `jobs` running jobs of `owner`, each with an empty log in `dir` that the owner writes, as
// slurmctld describes them.
std::map<uint64_t, JobFacts> make_running_jobs(const std::string& dir, int jobs,
                                               const Identity& owner) {
  std::filesystem::create_directories(dir);
  (void)::chown(dir.c_str(), owner.uid, owner.gid);
  std::map<uint64_t, JobFacts> out;
  for (int n = 0; n < jobs; ++n) {
    JobFacts f;
    f.job_id = kFirstJob + static_cast<uint64_t>(n);
    f.name = "pretrain";
    f.user = owner.user;
    f.uid = owner.uid;
    f.gid = owner.gid;
    f.state = "RUNNING";
    f.work_dir = dir;
    f.stdout_path = dir + "/slurm-" + std::to_string(f.job_id) + ".out";
    f.nodes = {"bench001"};
    f.batch_host = "bench001";
    f.start_time = now_usec() / 1000000;
    f.time_limit_sec = 24 * 3600;
    f.gpus = 8;
    f.mode = "basic";
    f.source = "slurmctld";
    std::ofstream(f.stdout_path).flush();
    (void)::chown(f.stdout_path.c_str(), owner.uid, owner.gid);
    out.emplace(f.job_id, std::move(f));
  }
  return out;
}

// What the SPANK plugin tells the agent when each job starts: triage on (basic), the owner, and
// the batch step's task on this node. Returns how many messages the agent acknowledged.
int register_jobs(const std::string& socket, const std::map<uint64_t, JobFacts>& jobs) {
  int acknowledged = 0;
  for (const auto& [id, f] : jobs) {
    const std::string key = "bench001:" + std::to_string(id);
    const nlohmann::json start = {
        {"op", "job_start"}, {"msg_id", key + ":s"},   {"job_id", id},
        {"uid", *f.uid},     {"gid", *f.gid},          {"host", "bench001"},
        {"mode", f.mode},    {"nodelist", "bench001"}, {"time_usec", f.start_time * 1000000}};
    const nlohmann::json task = {{"op", "task_start"}, {"msg_id", key + ":t0"},
                                 {"job_id", id},       {"step", "batch"},
                                 {"task", 0},          {"pid", 1000 + (id - kFirstJob) * 11},
                                 {"uid", *f.uid},      {"mode", f.mode}};
    for (const nlohmann::json& m : {start, task}) {
      const auto answer =
          nlohmann::json::parse(bench::unix_request(socket, m.dump()), nullptr, false);
      if (answer.is_object() && answer.value("ok", false)) ++acknowledged;
    }
  }
  return acknowledged;
}

// The value of one of the agent's own /metrics series (labelled with the host only), or -1.
double metric(const std::string& page, std::string_view name) {
  for (const std::string_view line : split(page, '\n')) {
    if (line.size() <= name.size() || line.substr(0, name.size()) != name) continue;
    if (line[name.size()] != '{' && line[name.size()] != ' ') continue;
    return parse_double(line.substr(line.rfind(' ') + 1)).value_or(-1);
  }
  return -1;
}

// What the live loop says it did, from /metrics as Prometheus would see it.
struct LiveCounters {
  double followed = 0, bytes = 0, poll_failures = 0, early_warnings = 0;
};

LiveCounters live_counters(Agent& agent) {
  const std::string page = agent.metrics();
  return {metric(page, "triage_live_jobs_followed"), metric(page, "triage_live_log_bytes_total"),
          metric(page, "triage_live_poll_failures_total"),
          metric(page, "triage_live_early_warnings_total")};
}

// Waits (up to `limit_sec`) until the live loop follows all `jobs` and has scanned at least one
// poll's worth of each one's log.
LiveCounters wait_until_following(Agent& agent, int jobs, int rate, int limit_sec) {
  const double first_polls = static_cast<double>(jobs) * rate * 5 * 100;  // ~100-byte lines
  LiveCounters c;
  for (int s = 0; s < limit_sec; ++s) {
    c = live_counters(agent);
    if (c.followed >= jobs && c.bytes >= first_polls) break;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
  return c;
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

// What the kernel pipeline hands the agent for a stream of `lines_per_sec` lines, batch by batch
// (the glue reads about every 100 ms) for `seconds`: the flood folded into one event whose count
// grows, one distinct event a second, and the position after the batch; /metrics is scraped every
// 15 s. Returns the number of scrapes.
int feed_kernel_log(Agent& agent, int seconds, int lines_per_sec, int procs) {
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
  return scrapes;
}

}  // namespace

int main(int argc, char** argv) {
  int seconds = 30, procs = 5000, jobs = 64, lines_per_sec = 10000, live = 1, rate = 100;
  std::string whole_node_interval;  // the agent's default unless given
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    const int v = static_cast<int>(parse_int(argv[i + 1]).value_or(0));
    if (a == "--seconds") seconds = v;
    if (a == "--procs") procs = v;
    if (a == "--lines") lines_per_sec = v;
    if (a == "--jobs") jobs = v;
    if (a == "--live") live = v;
    if (a == "--rate") rate = std::max(v, 1);
    if (a == "--whole-node-interval") whole_node_interval = argv[i + 1];
  }
  init_logging("agent-bench", "warn");
  // tmpfs when there is one: the fixture /proc then costs about what procfs costs (no disk).
  std::string tmpl = std::filesystem::is_directory("/dev/shm") ? "/dev/shm/agent-bench-XXXXXX"
                                                               : "/tmp/agent-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl.data());
  ::chmod(dir.c_str(), 0755);  // the jobs' owner reaches its logs under it
  make_proc(dir + "/proc", dir + "/cgroup", procs, jobs);
  make_sysfs(dir + "/sys");
  const Identity owner = job_owner();
  const std::map<uint64_t, JobFacts> running =
      live != 0 ? make_running_jobs(dir + "/jobs", jobs, owner) : std::map<uint64_t, JobFacts>{};

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
  Agent agent(load.config, std::make_unique<RunningJobs>(running), options);
  agent.start();
  agent.run_in_background();
  std::this_thread::sleep_for(std::chrono::seconds(1));  // first samples, warm caches
  const long rss_idle = status_kib("VmRSS:");

  std::vector<std::string> logs;
  logs.reserve(running.size());
  for (const auto& [id, f] : running)
    logs.push_back(f.stdout_path);
  const pid_t writer =
      logs.empty() ? -1 : bench::start_training_log_writer(logs, rate, owner.uid, owner.gid);
  const int acknowledged = register_jobs(load.config.socket_path, running);
  const LiveCounters c0 =
      logs.empty() ? LiveCounters{} : wait_until_following(agent, jobs, rate, 60);
  const long rss_following = status_kib("VmRSS:");
  (void)std::fprintf(stderr, "measuring (pid %d)\n", static_cast<int>(::getpid()));

  rusage before{};
  ::getrusage(RUSAGE_SELF, &before);
  const double children0 = bench::children_cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  const int scrapes = feed_kernel_log(agent, seconds, lines_per_sec, procs);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage after{};
  ::getrusage(RUSAGE_SELF, &after);
  const LiveCounters c1 = live_counters(agent);
  const long rss = status_kib("VmRSS:");
  const long hwm = status_kib("VmHWM:");
  double writer_cpu = 0;
  if (writer > 0) {
    ::kill(writer, SIGKILL);
    int status = 0;
    rusage ru{};
    (void)::wait4(writer, &status, 0, &ru);
    writer_cpu = cpu_seconds(ru);
  }
  // The owner-open children the follower forked and reaped in the window are the agent's work.
  const double owner_opens = std::max(0.0, bench::children_cpu_seconds() - children0 - writer_cpu);
  const double cpu = cpu_seconds(after) - cpu_seconds(before) + owner_opens;
  agent.stop();

  const double grep_cpu = grep_cpu_seconds(dir, static_cast<long>(lines_per_sec) * seconds);
  std::printf(
      "agent footprint over %.1f s: %d kernel lines/s (10 batches/s), %d processes (%d in %d "
      "jobs) sampled every %llds with the whole table walked every %llds, 8 GPUs' counters every "
      "%llds, %d scrapes\n",
      wall, lines_per_sec, procs, std::min(procs, jobs * kTasksPerJob), jobs,
      static_cast<long long>(load.config.dstate_interval_ms / 1000),
      static_cast<long long>(load.config.dstate_whole_node_interval_sec),
      static_cast<long long>(load.config.sysfs_interval_ms / 1000), scrapes);
  if (logs.empty()) {
    std::printf("  live loop: off (--live 0): no job registered for it\n");
  } else {
    std::printf(
        "  live loop: %zu jobs registered (%d/%zu messages acknowledged), each writing %d lines/s "
        "as %s; %.0f followed, %.0f KiB scanned in the window (%.0f KiB/s, %.1f KiB per job per "
        "poll), %.0f poll failures, %.0f early warnings\n",
        logs.size(), acknowledged, 2 * logs.size(), rate, owner.user.c_str(), c1.followed,
        (c1.bytes - c0.bytes) / 1024, (c1.bytes - c0.bytes) / 1024 / wall,
        (c1.bytes - c0.bytes) / 1024 / (wall / (kLivePollMs / 1000.0)) /
            static_cast<double>(logs.size()),
        c1.poll_failures, c1.early_warnings);
  }
  std::printf(
      "  agent CPU: %.3f s = %.2f%% of one core (target < 1%%; the whole agent / %d jobs = "
      "%.4f%%), "
      "of which owner-open children %.3f s\n",
      cpu, 100.0 * cpu / wall, jobs, 100.0 * cpu / wall / std::max(jobs, 1), owner_opens);
  std::printf(
      "  agent RSS: VmRSS %ld KiB, VmHWM %ld KiB (target < 32768 KiB); %ld KiB before any job "
      "was followed, %ld KiB once all were\n",
      rss, hwm, rss_idle, rss_following);
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
