// Counts tasks in uninterruptible sleep (D state) from /proc, groups them by wchan and by Slurm
// job, and remembers which ones stay in D from one sample to the next. The amdgpu CPER bug in the
// seed leaves about six unkillable processes per hour sleeping in amdgpu_cper_ring_write; only a
// reboot clears them, and this is how the agent sees them pile up.
//
// Reading /proc/<pid>/stat or wchan can itself hang in the kernel, so every read goes through a
// GuardedReader: a sample reports what it could read and which pids it had to skip.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collector/io/guarded_reader.h"
#include "common/model.h"

namespace triage::collector {

struct DStateTask {
  int64_t pid = 0;
  uint64_t start_ticks = 0;  // /proc/<pid>/stat field 22: tells a reused pid apart
  std::string comm;
  std::string wchan;  // "" when the kernel did not say
  std::optional<uint64_t> job_id;
  int64_t first_seen_usec = 0;  // first sample that saw it in D (this agent run)
  uint64_t samples = 1;         // consecutive samples in D
  bool persistent = false;      // in D for at least `persistent_after`
};

struct DStateSample {
  int64_t time_usec = 0;
  uint64_t processes = 0;         // processes whose state could be read
  std::vector<DStateTask> tasks;  // tasks in D, by pid
  uint64_t persistent = 0;
  std::map<std::string, uint64_t> by_wchan;  // all D tasks
  std::map<uint64_t, uint64_t> by_job;       // D tasks that belong to a job
  std::vector<int64_t> skipped_pids;  // not read: a reader is stuck on them or no reader was free
  std::vector<int64_t> stuck_pids;    // a read hung during this sample
  std::optional<uint64_t> procs_blocked;  // /proc/stat
  std::optional<uint64_t> procs_running;
  std::string error;  // why the sample is empty, when it is

  DStateSummary summary() const;
};

class DStateSampler {
 public:
  struct Options {
    std::string proc_root = "/proc";
    std::chrono::milliseconds read_timeout{2000};
    std::chrono::seconds persistent_after{60};
    size_t max_stuck = 8;
  };

  explicit DStateSampler(Options options);

  // One pass over the process table. `registered_pids` (pid -> job id, from the SPANK plugin's
  // task_start) attributes tasks whose cgroup does not name a job.
  DStateSample sample(const std::map<int64_t, uint64_t>& registered_pids = {});

  const GuardedReader& reader() const { return reader_; }

 private:
  struct Seen {
    int64_t first_seen_usec = 0;
    uint64_t samples = 0;
  };

  Options options_;
  GuardedReader reader_;
  std::map<std::pair<int64_t, uint64_t>, Seen> seen_;  // (pid, start ticks) -> history
};

// Helpers exposed for tests and for the kernel side (a job id out of a cgroup path).
struct ProcStat {
  int64_t pid = 0;
  std::string comm;
  char state = '?';
  uint64_t start_ticks = 0;
};
std::optional<ProcStat> parse_proc_stat(std::string_view text);
// The Slurm job id in a /proc/<pid>/cgroup file or a cgroup path: ".../job_<id>/..." (cgroup v1
// and v2 layouts of Slurm's cgroup plugins).
std::optional<uint64_t> job_id_from_cgroup(std::string_view text);

}  // namespace triage::collector
