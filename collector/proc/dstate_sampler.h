// Counts tasks in uninterruptible sleep (D state) from /proc, groups them by wchan and by Slurm
// job, and remembers which ones stay in D from one sample to the next. The amdgpu CPER bug in the
// seed leaves about six unkillable processes per hour sleeping in amdgpu_cper_ring_write; only a
// reboot clears them, and this is how the agent sees them pile up.
//
// Reading /proc/<pid>/stat or wchan can itself hang in the kernel, so every read goes through a
// GuardedReader: a sample reports what it could read and which pids it had to skip.
//
// Walking the whole process table costs about 1% of a core every 5 s on a node of 5,000
// processes (issue 16), so the whole table is walked only now and then (`whole_node_every`);
// the samples in between read the tasks of the Slurm jobs (their cgroups, collector/proc/
// job_cgroups.h, and the pids the SPANK plugin registered) and every task the last sample saw in
// D. A task stuck in D outside any job is thus found by the next walk and followed at every sample
// from then on; only its discovery waits for a walk.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "collector/io/guarded_reader.h"
#include "collector/proc/job_cgroups.h"
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
  bool whole_node = true;         // the whole process table was walked (else: jobs' tasks)
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
    std::string cgroup_root;                   // where the job cgroups are found ("": none)
    std::chrono::seconds whole_node_every{0};  // 0: walk the whole table at every sample
  };

  explicit DStateSampler(Options options);

  // One sample: the whole process table when a walk is due, else the jobs' tasks and the tasks
  // last seen in D. `registered_pids` (pid -> job id, from the SPANK plugin's task_start) are
  // read too and attribute tasks whose cgroup does not name a job.
  DStateSample sample(const std::map<int64_t, uint64_t>& registered_pids = {});

  const GuardedReader& reader() const { return reader_; }

 private:
  struct Seen {
    int64_t first_seen_usec = 0;
    uint64_t samples = 0;
  };

  // The pids a sample reads: the whole table's, or those between walks (adding the job cgroups'
  // tasks to `job_pids`).
  std::vector<int64_t> pids_to_read(int proc_dirfd, bool whole_node,
                                    std::map<int64_t, uint64_t>& job_pids);

  Options options_;
  GuardedReader reader_;
  std::map<std::pair<int64_t, uint64_t>, Seen> seen_;  // (pid, start ticks) -> history
  std::optional<int64_t> last_walk_usec_;              // monotonic
  JobCgroups job_cgroups_;
  bool rescan_cgroups_ = true;  // a walk happened since the job cgroups were last walked
};

// Whether a sample at `now_usec` walks the whole process table: the first sample does, every
// sample does when `every_usec` is 0, and otherwise one does once `every_usec` has passed since
// the last walk.
bool whole_node_walk_due(std::optional<int64_t> last_walk_usec, int64_t now_usec,
                         int64_t every_usec);

// The pids a sample between walks reads, ascending and once each: the jobs' tasks (pid -> job)
// and the pids the last sample saw in D or could not read.
std::vector<int64_t> pids_between_walks(const std::map<int64_t, uint64_t>& job_pids,
                                        const std::vector<int64_t>& last_in_d);

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
// The pids in the /proc directory open as `dirfd`, ascending (none when it cannot be listed).
std::vector<int64_t> list_proc_pids(int dirfd);

}  // namespace triage::collector
