// The tasks of the running Slurm jobs, read from the jobs' cgroups. A node with 5,000 processes
// runs perhaps a few hundred inside its jobs; reading each job cgroup's `cgroup.procs` finds them
// without opening every /proc/<pid>/stat (issue 16: the D-state sampler's cost was that walk).
//
// The layouts are Slurm's cgroup plugins': cgroup v2 puts jobs under
// <root>/system.slice/[<node>_]slurmstepd.scope/job_<id>/, cgroup v1 under
// <root>/freezer/slurm[_<node>]/uid_<uid>/job_<id>/ (proctrack/cgroup always mounts the freezer).
// A job's processes sit in its step and task cgroups below that, so every cgroup under the job's
// is read. The tree belongs to root (slurmstepd); it is still opened without following symlinks.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace triage::collector {

struct JobTasks {
  std::map<int64_t, uint64_t> pids;  // pid -> Slurm job id
  size_t jobs = 0;                   // job cgroups found
  size_t cgroups = 0;                // cgroup.procs files read
};

// The job cgroups under one root, remembered from sample to sample: walking a job's cgroup tree
// costs a directory listing per cgroup, reading it again costs one read per cgroup that holds
// processes.
class JobCgroups {
 public:
  explicit JobCgroups(std::string cgroup_root) : root_(std::move(cgroup_root)) {}

  // Every process in a Slurm job cgroup ("" or a missing tree: none). The jobs are listed every
  // time; a job's tree is walked when the job is new, when one of its cgroups has gone (a step
  // ended), or with `rescan` (a step that started since is found then; its tasks the SPANK plugin
  // registered are read meanwhile); otherwise the cgroups its last walk found are read again.
  JobTasks read(bool rescan);

 private:
  struct Job {
    uint64_t id = 0;
    std::vector<std::string> cgroups;  // below the job's directory: those that may hold processes
  };
  std::string root_;
  std::map<std::string, Job> jobs_;  // by the job's directory below the root
};

// Every process in a Slurm job cgroup under `cgroup_root`, walking every job's tree.
JobTasks read_job_tasks(const std::string& cgroup_root);

}  // namespace triage::collector
