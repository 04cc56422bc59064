#include "collector/proc/job_cgroups.h"

#include <dirent.h>
#include <fcntl.h>

#include <functional>
#include <optional>
#include <string_view>
#include <system_error>
#include <utility>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage::collector {

namespace {

// job_<id>/step_<n>/user/task_<n> (v2) is three levels below the job; one more for slack.
constexpr int kMaxDepth = 4;
// A bound on a runaway tree: far more cgroups than any node's jobs make.
constexpr size_t kMaxCgroupsPerJob = 4096;
constexpr size_t kMaxProcsBytes = size_t{1} << 20;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "a/b"
std::string join(std::string_view dir, std::string_view name) {
  std::string path(dir);
  path += '/';
  path += name;
  return path;
}

// The subdirectories of `dirfd` whose names pass `keep` (none when it cannot be listed).
std::vector<std::string> subdirs(int dirfd, const std::function<bool(std::string_view)>& keep) {
  std::vector<std::string> out;
  try {
    for (DirEntry& e : list_dir_at(dirfd)) {
      if ((e.type == DT_DIR || e.type == DT_UNKNOWN) && keep(e.name)) out.push_back(e.name);
    }
  } catch (const std::system_error&) {
  }
  return out;
}

bool any_name(std::string_view) {
  return true;
}

// `name` inside `dirfd` opened as a directory; an empty fd when it is gone or is not one.
UniqueFd try_open_dir(int dirfd, const std::string& name) {
  try {
    return open_dir_at(dirfd, name, true);
  } catch (const std::system_error&) {
    return UniqueFd();
  }
}

// Adds the processes of the cgroup `dir` (below `dirfd`; "." for itself) to `out`; how many, or
// nothing when the cgroup is gone.
std::optional<size_t> read_procs(int dirfd, const std::string& dir, uint64_t job, JobTasks& out) {
  std::string text;
  try {
    const UniqueFd f = open_regular_file_at(dirfd, dir + "/cgroup.procs", true);
    text = read_fd_limited(f.get(), kMaxProcsBytes);
  } catch (const std::system_error&) {
    return std::nullopt;
  }
  ++out.cgroups;
  size_t n = 0;
  for (std::string_view line : split(text, '\n')) {
    if (auto pid = parse_int(trim(line)); pid && *pid > 0) {
      out.pids[*pid] = job;
      ++n;
    }
  }
  return n;
}

// Reads the cgroup `dir` below the job's directory `jobfd` and the cgroups below it, and notes in
// `found` those that may hold processes: the ones that do, and the leaves.
void walk(int jobfd, const std::string& dir, int depth, uint64_t job, JobTasks& out,
          std::vector<std::string>& found) {
  if (found.size() >= kMaxCgroupsPerJob) return;
  const UniqueFd d = try_open_dir(jobfd, dir);
  if (!d) return;  // gone
  const size_t procs = read_procs(jobfd, dir, job, out).value_or(0);
  const std::vector<std::string> children =
      depth < kMaxDepth ? subdirs(d.get(), any_name) : std::vector<std::string>{};
  if (procs > 0 || children.empty()) found.push_back(dir);
  for (const std::string& child : children)
    walk(jobfd, dir == "." ? child : join(dir, child), depth + 1, job, out, found);
}

// The job_<id> directories directly in `dir` (below `rootfd`): path below the root -> job id.
void jobs_in(int rootfd, const std::string& dir, std::map<std::string, uint64_t>& jobs) {
  const UniqueFd d = try_open_dir(rootfd, dir);
  if (!d) return;
  for (const std::string& name :
       subdirs(d.get(), [](std::string_view n) { return starts_with(n, "job_"); })) {
    if (const auto id = parse_uint(std::string_view(name).substr(4))) jobs[join(dir, name)] = *id;
  }
}

// Every job directory in the v2 layout (system.slice/[<node>_]slurmstepd.scope/job_<id>) and the
// v1 layout (freezer/slurm[_<node>]/uid_<uid>/job_<id>).
std::map<std::string, uint64_t> job_dirs(int rootfd) {
  std::map<std::string, uint64_t> jobs;
  if (const UniqueFd slice = try_open_dir(rootfd, "system.slice")) {
    for (const std::string& scope : subdirs(
             slice.get(), [](std::string_view n) { return ends_with(n, "slurmstepd.scope"); })) {
      jobs_in(rootfd, "system.slice/" + scope, jobs);
    }
  }
  if (const UniqueFd freezer = try_open_dir(rootfd, "freezer")) {
    for (const std::string& slurm :
         subdirs(freezer.get(), [](std::string_view n) { return starts_with(n, "slurm"); })) {
      const UniqueFd s = try_open_dir(freezer.get(), slurm);
      if (!s) continue;
      for (const std::string& uid :
           subdirs(s.get(), [](std::string_view n) { return starts_with(n, "uid_"); })) {
        jobs_in(rootfd, join(join("freezer", slurm), uid), jobs);
      }
    }
  }
  return jobs;
}

}  // namespace

JobTasks JobCgroups::read(bool rescan) {
  JobTasks out;
  std::map<std::string, Job> next;
  UniqueFd root;
  if (!root_.empty()) root = try_open_dir(AT_FDCWD, root_);
  if (!root) {
    jobs_.clear();
    return out;
  }
  for (const auto& [dir, id] : job_dirs(root.get())) {
    const UniqueFd jobfd = try_open_dir(root.get(), dir);
    if (!jobfd) continue;
    ++out.jobs;
    Job job{id, {}};
    JobTasks mine;
    const auto known = jobs_.find(dir);
    bool walk_it = rescan || known == jobs_.end() || known->second.id != id;
    if (!walk_it) {
      job.cgroups = known->second.cgroups;
      for (const std::string& cgroup : job.cgroups) {
        if (!read_procs(jobfd.get(), cgroup, id, mine)) {
          walk_it = true;  // a step ended: what else changed is seen by walking the job again
          break;
        }
      }
    }
    if (walk_it) {
      mine = JobTasks{};
      job.cgroups.clear();
      walk(jobfd.get(), ".", 0, id, mine, job.cgroups);
    }
    out.cgroups += mine.cgroups;
    out.pids.merge(mine.pids);
    next.emplace(dir, std::move(job));
  }
  jobs_ = std::move(next);
  return out;
}

JobTasks read_job_tasks(const std::string& cgroup_root) {
  return JobCgroups(cgroup_root).read(true);
}

}  // namespace triage::collector
