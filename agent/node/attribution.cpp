#include "agent/node/attribution.h"

#include <algorithm>

namespace triage::agent {

namespace {

// Events about one process; without a job or registered pid they are not every job's business.
bool is_process_scoped(const std::string& kind) {
  return kind == "oom-kill";
}

bool overlaps(int64_t a_start, int64_t a_end, int64_t b_start, int64_t b_end) {
  return a_start <= b_end && b_start <= a_end;
}

// Where node-wide events stop counting for the job: its end plus the grace, or now if it runs.
int64_t window_end(const AttributionWindow& window, const AttributionOptions& options) {
  return window.end_usec == 0 ? std::max(options.now_usec, window.start_usec)
                              : window.end_usec + options.grace_usec;
}

void sort_by_time(std::vector<KernelEvent>& events) {
  std::sort(events.begin(), events.end(), [](const KernelEvent& a, const KernelEvent& b) {
    return a.time_usec != b.time_usec ? a.time_usec < b.time_usec : a.id < b.id;
  });
}

}  // namespace

AttributionWindow job_window(const JobRecord& job, const AttributionWindow& hint) {
  AttributionWindow w;
  w.start_usec = job.start_usec;
  if (hint.start_usec != 0 && (w.start_usec == 0 || hint.start_usec < w.start_usec)) {
    w.start_usec = hint.start_usec;
  }
  w.end_usec = job.ended ? job.end_usec : 0;
  if (hint.end_usec != 0) w.end_usec = std::max(w.end_usec, hint.end_usec);
  return w;
}

AttributionWindow owner_window(const JobRecord& job, const AttributionWindow& asked,
                               int64_t margin_usec, int64_t now_usec) {
  if (job.start_usec == 0) return {};
  const int64_t lo = job.start_usec - margin_usec;
  const int64_t hi = std::max(lo, (job.ended ? job.end_usec : now_usec) + margin_usec);
  AttributionWindow w;
  w.start_usec = asked.start_usec == 0 ? 0 : std::clamp(asked.start_usec, lo, hi);
  w.end_usec = asked.end_usec == 0 ? 0 : std::clamp(asked.end_usec, lo, hi);
  return w;
}

std::optional<uint64_t> job_of_pid(const JobTable& jobs, int64_t pid, int64_t time_usec,
                                   int64_t grace_usec, AttributionStats* stats) {
  for (const uint64_t id : jobs.jobs_with_pid(pid)) {
    const JobRecord* found = jobs.find(id);
    if (found == nullptr) continue;
    const JobRecord& job = *found;
    for (const auto& [key, task] : job.tasks) {
      if (stats != nullptr) ++stats->tasks_examined;
      if (task.pid != pid) continue;
      const int64_t start = task.start_usec != 0 ? task.start_usec : job.start_usec;
      const int64_t end = task.end_usec != 0 ? task.end_usec + grace_usec : INT64_MAX;
      if (time_usec == 0 || (time_usec >= start - grace_usec && time_usec <= end)) return id;
    }
  }
  return std::nullopt;
}

bool belongs_to_job(const KernelEvent& e, const JobRecord& job, const AttributionWindow& window,
                    const JobTable& jobs, const AttributionOptions& options) {
  if (e.job_id) return *e.job_id == job.job_id;
  if (e.pid && *e.pid > 0) {
    if (auto owner = job_of_pid(jobs, *e.pid, e.time_usec, options.grace_usec, options.stats)) {
      return *owner == job.job_id;
    }
  }
  if (is_process_scoped(e.kind)) return false;
  if (window.start_usec == 0 || e.time_usec == 0) return false;
  const int64_t end = window_end(window, options);
  const int64_t ev_end = std::max(e.last_usec, e.time_usec);
  return overlaps(e.time_usec, ev_end, window.start_usec, end);
}

std::vector<KernelEvent> events_for_job(const std::vector<KernelEvent>& events,
                                        const JobRecord& job, const AttributionWindow& window,
                                        const JobTable& jobs, const AttributionOptions& options) {
  std::vector<KernelEvent> out;
  for (const KernelEvent& e : events) {
    if (options.stats != nullptr) ++options.stats->events_examined;
    if (belongs_to_job(e, job, window, jobs, options)) out.push_back(e);
  }
  sort_by_time(out);
  return out;
}

std::vector<KernelEvent> events_for_job(const EventStore& store, const JobRecord& job,
                                        const AttributionWindow& window, const JobTable& jobs,
                                        const AttributionOptions& options) {
  std::vector<int64_t> pids;
  for (const auto& [key, task] : job.tasks) {
    if (task.pid > 0) pids.push_back(task.pid);
  }
  // Without a start the window claims nothing node-wide (see belongs_to_job): an empty range.
  const int64_t from = window.start_usec == 0 ? 1 : window.start_usec;
  const int64_t to =
      window.start_usec == 0 ? 0 : std::max(window_end(window, options), window.start_usec);
  std::vector<KernelEvent> out;
  for (const size_t pos : store.candidates(job.job_id, pids, from, to)) {
    const KernelEvent& e = store.events()[pos];
    if (options.stats != nullptr) ++options.stats->events_examined;
    if (belongs_to_job(e, job, window, jobs, options)) out.push_back(e);
  }
  sort_by_time(out);
  return out;
}

}  // namespace triage::agent
