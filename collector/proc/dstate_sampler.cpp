#include "collector/proc/dstate_sampler.h"

#include <fcntl.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <system_error>

#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::collector {

std::optional<ProcStat> parse_proc_stat(std::string_view text) {
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so the last ')' ends it.
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  ProcStat st;
  const auto pid = parse_int(trim(text.substr(0, open)));
  if (!pid) return std::nullopt;
  st.pid = *pid;
  st.comm = std::string(text.substr(open + 1, close - open - 1));
  std::vector<std::string_view> fields;
  for (std::string_view f : split(text.substr(close + 1), ' ')) {
    if (!f.empty()) fields.push_back(trim(f));
  }
  if (fields.empty() || fields[0].size() != 1) return std::nullopt;
  st.state = fields[0][0];
  // Field 22 of the file (starttime) is the 20th after the comm.
  if (fields.size() > 19) st.start_ticks = parse_uint(fields[19]).value_or(0);
  return st;
}

std::optional<uint64_t> job_id_from_cgroup(std::string_view text) {
  size_t pos = 0;
  while ((pos = text.find("job_", pos)) != std::string_view::npos) {
    const bool at_component = pos == 0 || text[pos - 1] == '/';
    size_t end = pos + 4;
    while (end < text.size() && text[end] >= '0' && text[end] <= '9')
      ++end;
    const bool whole = end == text.size() || text[end] == '/' || text[end] == '\n';
    if (at_component && whole && end > pos + 4) {
      if (auto id = parse_uint(text.substr(pos + 4, end - pos - 4))) return id;
    }
    pos = end;
  }
  return std::nullopt;
}

bool whole_node_walk_due(std::optional<int64_t> last_walk_usec, int64_t now_usec,
                         int64_t every_usec) {
  return !last_walk_usec || every_usec <= 0 || now_usec - *last_walk_usec >= every_usec;
}

std::vector<int64_t> pids_between_walks(const std::map<int64_t, uint64_t>& job_pids,
                                        const std::vector<int64_t>& last_in_d) {
  std::vector<int64_t> pids;
  pids.reserve(job_pids.size() + last_in_d.size());
  for (const auto& [pid, job] : job_pids)
    pids.push_back(pid);
  pids.insert(pids.end(), last_in_d.begin(), last_in_d.end());
  std::sort(pids.begin(), pids.end());
  pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
  return pids;
}

std::vector<int64_t> list_proc_pids(int dirfd) {
  std::vector<int64_t> pids;
  std::vector<DirEntry> entries;
  try {
    entries = list_dir_at(dirfd);
  } catch (const std::system_error&) {
    return pids;
  }
  for (const DirEntry& e : entries) {
    if (e.name[0] < '1' || e.name[0] > '9') continue;
    if (auto pid = parse_int(e.name)) pids.push_back(*pid);
  }
  std::sort(pids.begin(), pids.end());
  return pids;
}

DStateSummary DStateSample::summary() const {
  DStateSummary s;
  s.time_usec = time_usec;
  s.count = tasks.size();
  s.persistent = persistent;
  s.by_wchan = by_wchan;
  return s;
}

DStateSampler::DStateSampler(Options options)
    : options_(std::move(options)),
      reader_(GuardedReader::Options{options_.read_timeout, options_.max_stuck}),
      job_cgroups_(options_.cgroup_root) {}

namespace {

// What the worker collects; shared with it because it may outlive a sample (see GuardedReader).
struct Collected {
  std::mutex mu;
  uint64_t processes = 0;
  std::vector<DStateTask> tasks;
  std::vector<int64_t> skipped;
};

std::optional<uint64_t> stat_line_value(std::string_view text, std::string_view key) {
  for (std::string_view line : split(text, '\n')) {
    if (line.size() > key.size() && line.substr(0, key.size()) == key && line[key.size()] == ' ') {
      return parse_uint(trim(line.substr(key.size())));
    }
  }
  return std::nullopt;
}

}  // namespace

std::vector<int64_t> DStateSampler::pids_to_read(int proc_dirfd, bool whole_node,
                                                 std::map<int64_t, uint64_t>& job_pids) {
  if (whole_node) {
    rescan_cgroups_ = true;
    return list_proc_pids(proc_dirfd);
  }
  job_pids.merge(job_cgroups_.read(rescan_cgroups_).pids);  // a registered pid keeps its job
  rescan_cgroups_ = false;
  std::vector<int64_t> last_in_d;
  for (const auto& [key, seen] : seen_)
    last_in_d.push_back(key.first);
  return pids_between_walks(job_pids, last_in_d);
}

DStateSample DStateSampler::sample(const std::map<int64_t, uint64_t>& registered_pids) {
  DStateSample out;
  out.time_usec = now_usec();
  std::shared_ptr<UniqueFd> proc;
  try {
    proc = std::make_shared<UniqueFd>(open_dir(options_.proc_root, false));
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  std::map<int64_t, uint64_t> job_pids = registered_pids;
  const int64_t mono = monotonic_usec();
  out.whole_node = whole_node_walk_due(
      last_walk_usec_, mono, static_cast<int64_t>(options_.whole_node_every.count()) * 1000000);
  if (out.whole_node) last_walk_usec_ = mono;
  const std::vector<int64_t> pids = pids_to_read(proc->get(), out.whole_node, job_pids);
  auto collected = std::make_shared<Collected>();
  const std::string root = options_.proc_root;
  auto pid_list = std::make_shared<const std::vector<int64_t>>(pids);

  const GuardedReader::EachReport report = reader_.run_each(
      pids.size(), [proc, collected, root, pid_list](GuardedReader::Reads& reads, size_t i) {
        using Status = GuardedReader::Reads::Status;
        const int64_t pid = (*pid_list)[i];
        const std::string dir = std::to_string(pid);
        const auto stat =
            reads.read_at(proc->get(), dir + "/stat", root + "/" + dir + "/stat", 4096);
        if (stat.status == Status::kAbandoned) return;
        if (stat.status == Status::kSkipped) {
          std::lock_guard<std::mutex> l(collected->mu);
          collected->skipped.push_back(pid);
          return;
        }
        if (stat.status != Status::kOk) return;  // the process exited between listing and reading
        const auto st = parse_proc_stat(stat.data);
        if (!st) return;
        DStateTask task;
        if (st->state == 'D') {
          task.pid = pid;
          task.start_ticks = st->start_ticks;
          task.comm = st->comm;
          const auto wchan =
              reads.read_at(proc->get(), dir + "/wchan", root + "/" + dir + "/wchan", 256);
          if (wchan.status == Status::kAbandoned) return;
          bool partial = wchan.status == Status::kSkipped;
          if (wchan.status == Status::kOk) {
            task.wchan = std::string(trim(wchan.data));
            if (task.wchan == "0") task.wchan.clear();
          }
          const auto cgroup =
              reads.read_at(proc->get(), dir + "/cgroup", root + "/" + dir + "/cgroup", 8192);
          if (cgroup.status == Status::kAbandoned) return;
          partial = partial || cgroup.status == Status::kSkipped;
          if (cgroup.status == Status::kOk) task.job_id = job_id_from_cgroup(cgroup.data);
          if (partial) {
            // In D for sure (stat said so), but part of it is behind a hung reader.
            std::lock_guard<std::mutex> l(collected->mu);
            collected->skipped.push_back(pid);
          }
        }
        std::lock_guard<std::mutex> l(collected->mu);
        ++collected->processes;
        if (task.pid != 0) collected->tasks.push_back(std::move(task));
      });

  // /proc/stat's procs_blocked is the kernel's own count (it includes threads).
  struct StatCounts {
    std::mutex mu;
    std::optional<uint64_t> blocked;
    std::optional<uint64_t> running;
  };
  auto counts = std::make_shared<StatCounts>();
  reader_.run_each(1, [proc, counts, root](GuardedReader::Reads& reads, size_t) {
    const auto r = reads.read_at(proc->get(), "stat", root + "/stat", size_t{64} * 1024);
    if (r.status != GuardedReader::Reads::Status::kOk) return;
    std::lock_guard<std::mutex> l(counts->mu);
    counts->blocked = stat_line_value(r.data, "procs_blocked");
    counts->running = stat_line_value(r.data, "procs_running");
  });
  {
    std::lock_guard<std::mutex> l(counts->mu);
    out.procs_blocked = counts->blocked;
    out.procs_running = counts->running;
  }

  {
    std::lock_guard<std::mutex> l(collected->mu);
    out.processes = collected->processes;
    out.tasks = collected->tasks;
    out.skipped_pids = collected->skipped;
  }
  for (size_t i : report.stuck)
    out.stuck_pids.push_back(pids[i]);
  for (size_t i : report.not_reached)
    out.skipped_pids.push_back(pids[i]);
  std::sort(out.skipped_pids.begin(), out.skipped_pids.end());

  // History: a task keeps its first-seen time while it stays in D; tasks we could not read this
  // time keep theirs too (we do not know that they left D).
  std::set<int64_t> unknown(out.skipped_pids.begin(), out.skipped_pids.end());
  unknown.insert(out.stuck_pids.begin(), out.stuck_pids.end());
  std::map<std::pair<int64_t, uint64_t>, Seen> next;
  const int64_t persist_usec = static_cast<int64_t>(options_.persistent_after.count()) * 1000000;
  for (DStateTask& t : out.tasks) {
    const auto key = std::make_pair(t.pid, t.start_ticks);
    Seen s{out.time_usec, 0};
    if (auto it = seen_.find(key); it != seen_.end()) s = it->second;
    ++s.samples;
    t.first_seen_usec = s.first_seen_usec;
    t.samples = s.samples;
    t.persistent = s.samples > 1 && out.time_usec - s.first_seen_usec >= persist_usec;
    next[key] = s;
    if (!t.job_id) {
      if (auto it = job_pids.find(t.pid); it != job_pids.end()) t.job_id = it->second;
    }
    if (t.persistent) ++out.persistent;
    ++out.by_wchan[t.wchan.empty() ? "?" : t.wchan];
    if (t.job_id) ++out.by_job[*t.job_id];
  }
  for (const auto& [key, s] : seen_) {
    if (unknown.count(key.first) != 0) next.emplace(key, s);
  }
  seen_ = std::move(next);
  std::sort(out.tasks.begin(), out.tasks.end(),
            [](const DStateTask& a, const DStateTask& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace triage::collector
