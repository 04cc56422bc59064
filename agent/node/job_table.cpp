#include "agent/node/job_table.h"

#include <climits>

#include "common/error.h"
#include "common/hostlist.h"
#include "common/json_read.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxMsgId = 256;
// The plugin's own bound on --triage-requeue=N (spank/plugin_config.h, kMaxRequeues).
constexpr int64_t kMaxRequeueMax = 10;

std::string step_string(const JsonObjectReader& r) {
  const nlohmann::json* s = r.member("step");
  if (s == nullptr || s->is_null()) return "";
  if (s->is_string()) return s->get<std::string>();
  if (s->is_number_integer() && s->get<int64_t>() >= 0) return std::to_string(s->get<int64_t>());
  r.fail("step", "expected a string such as \"0\" or \"batch\"");
}

void require(const JsonObjectReader& r, const char* key) {
  if (r.member(key) == nullptr) r.fail(key, "missing");
}

}  // namespace

bool is_lifecycle_op(const std::string& op) {
  return op == "job_start" || op == "task_start" || op == "task_exit" || op == "job_end";
}

LifecycleMessage parse_lifecycle(const nlohmann::json& request) {
  const JsonObjectReader top(request, "request", "");
  LifecycleMessage m;
  m.op = top.str("op").value_or("");
  if (!is_lifecycle_op(m.op)) top.fail("op", "not a lifecycle message");
  const JsonObjectReader r(request, "request", m.op);
  m.msg_id = r.str("msg_id").value_or("");
  if (m.msg_id.empty()) r.fail("msg_id", "missing");
  if (m.msg_id.size() > kMaxMsgId) r.fail("msg_id", "longer than 256 bytes");
  m.job_id = r.u64("job_id").value_or(0);
  if (m.job_id == 0) r.fail("job_id", "missing or zero");
  (void)r.str("host");
  (void)r.i64("time_usec");
  if (const auto mode = r.str("mode")) {
    if (*mode != "off" && *mode != "basic" && *mode != "full") {
      r.fail("mode", "expected off, basic or full");
    }
  }
  for (const char* k : {"uid", "gid", "array_job_id", "array_task_id", "het_job_id"}) {
    if (const auto v = r.u64(k); v && *v > UINT32_MAX) r.fail(k, "out of range");
  }
  if (m.op == "task_start" || m.op == "task_exit") {
    require(r, "pid");
    (void)r.i64("pid");
    (void)r.i64("task");
    (void)r.i64("rank");
    (void)step_string(r);
    if (m.op == "task_exit") {
      require(r, "wait_status");
      const auto ws = r.i64("wait_status");
      if (ws && (*ws < INT32_MIN || *ws > INT32_MAX)) r.fail("wait_status", "out of range");
    }
  } else {
    if (const auto nl = r.str("nodelist")) (void)expand_hostlist(*nl, m.op + ".nodelist");
    for (const char* k : {"work_dir", "stdout_pattern", "stderr_pattern", "job_name", "user",
                          "batch_host", "state", "partition"}) {
      (void)r.str(k);
    }
    if (const auto v = r.str("on_hang"); v && !parse_hang_choice(*v)) {
      r.fail("on_hang", "expected notify, cancel or requeue");
    }
    if (const auto v = r.str("hang_action"); v && *v != "allow" && *v != "notify") {
      r.fail("hang_action", "expected allow or notify");
    }
    if (const auto v = r.i64("requeue_max"); v && (*v < 0 || *v > kMaxRequeueMax)) {
      r.fail("requeue_max", "expected 0 to " + std::to_string(kMaxRequeueMax));
    }
    if (const auto v = r.str("requeue"); v && *v != "allow" && *v != "refuse") {
      r.fail("requeue", "expected allow or refuse");
    }
    for (const char* k : {"wait_status", "derived_wait_status"}) {
      const auto v = r.i64(k);
      if (v && (*v < INT32_MIN || *v > INT32_MAX)) r.fail(k, "out of range");
    }
    if (const auto v = r.i64("restart_count"); v && (*v < 0 || *v > INT32_MAX)) {
      r.fail("restart_count", "out of range");
    }
  }
  m.raw = request;
  return m;
}

bool JobTable::has_message(uint64_t job_id, const std::string& msg_id) const {
  const JobRecord* j = find(job_id);
  return j != nullptr && j->msg_ids.count(msg_id) != 0;
}

JobRecord& JobTable::apply(const LifecycleMessage& msg, int64_t now_usec) {
  JobRecord& j = jobs_[msg.job_id];
  j.job_id = msg.job_id;
  j.msg_ids.insert(msg.msg_id);
  const JsonObjectReader r(msg.raw, "spool", msg.op);
  const int64_t t = r.i64("time_usec").value_or(now_usec);
  j.touched_usec = std::max(j.touched_usec, t);
  // The attempt's restart count as its prolog saw it (the launch credential's). Not the epilog's:
  // slurmctld counts a requeue before it kills the job, so a requeued attempt's epilog already
  // sees the next attempt's count. -1: not said (parse_lifecycle refuses a negative count).
  // A plain value, not an optional: GCC 12 at -O3 warns (maybe-uninitialized) on the optional.
  const int64_t restarts =
      msg.op == "job_start" ? r.i64("restart_count").value_or(-1) : int64_t{-1};
  // A requeued job comes back under the same id: after its job_end, or with a higher restart
  // count when the earlier attempt's job_end never reached this node. Slurm does not always run
  // the prolog again for a job it requeued onto the same node (slurmd may still hold the job's
  // credential), so a task that started after the job ended begins the next attempt as well.
  const bool next_attempt =
      (msg.op == "job_start" &&
       (j.ended || (restarts >= 0 && j.restart_count && restarts > *j.restart_count))) ||
      (msg.op == "task_start" && j.ended && t > j.end_usec);
  if (next_attempt) begin_new_attempt(j);
  if (restarts >= 0) j.restart_count = static_cast<int>(restarts);
  if (msg.op == "job_start" || msg.op == "job_end") {
    if (const auto v = r.u64("uid")) j.uid = static_cast<uint32_t>(*v);
    if (const auto v = r.u64("gid")) j.gid = static_cast<uint32_t>(*v);
    if (const auto v = r.str("mode"); v && !v->empty()) j.mode = *v;
    if (const auto v = r.str("on_hang")) j.on_hang = parse_hang_choice(*v).value_or(j.on_hang);
    if (const auto v = r.str("hang_action")) j.hang_action_allowed = *v == "allow";
    if (const auto v = r.i64("requeue_max")) j.requeue_max = static_cast<int>(*v);
    if (const auto v = r.str("requeue")) j.requeue_allowed = *v == "allow";
    if (const auto v = r.str("nodelist"); v && !v->empty()) {
      j.nodes = expand_hostlist(*v, msg.op + ".nodelist");
    }
    if (const auto v = r.u64("het_job_id")) j.het_job_id = static_cast<uint32_t>(*v);
  }
  // An srun step's array ids are the user's environment's (slurmstepd_job.c); the batch step's
  // and the prolog's and epilog's are slurmctld's and slurmd's.
  const bool array_from_slurm =
      msg.op == "job_start" || msg.op == "job_end" || step_string(r) == "batch";
  const auto array_id = r.u64("array_job_id");
  const auto index = r.u64("array_task_id");
  if (array_from_slurm && array_id && index) {
    j.array_job_id = static_cast<uint32_t>(*array_id);
    j.array_task_id = static_cast<uint32_t>(*index);
  }
  if (msg.op == "job_start" || msg.op == "task_start") {
    if (j.start_usec == 0 || t < j.start_usec) j.start_usec = t;
  }
  if (msg.op == "task_start" || msg.op == "task_exit") {
    const std::string step = step_string(r);
    const int64_t task_id = r.i64("task").value_or(-1);
    TaskExit& task = j.tasks[step + "/" + std::to_string(task_id)];
    task.job_id = msg.job_id;
    task.step = step;
    task.task = task_id;
    task.rank = r.i64("rank").value_or(task.rank);
    const int64_t old_pid = task.pid;
    task.pid = r.i64("pid").value_or(task.pid);
    if (task.pid != old_pid) {
      pid_jobs_[task.pid].insert(j.job_id);
      forget_pid(j, old_pid);
    }
    task.host = r.str("host").value_or(task.host);
    if (step == "batch") j.batch_here = true;
    // The plugin's task messages carry the job owner too (a missed job_start loses nothing).
    if (const auto v = r.u64("uid"); v && !j.uid && *v <= UINT32_MAX)
      j.uid = static_cast<uint32_t>(*v);
    if (const auto v = r.str("mode"); v && !v->empty() && j.mode.empty()) j.mode = *v;
    if (msg.op == "task_start") {
      task.start_usec = t;
    } else {
      task.end_usec = t;
      task.wait_status = static_cast<int>(r.i64("wait_status").value_or(0));
      task.decode();
    }
  }
  if (msg.op == "job_end") {
    j.ended = true;
    j.end_usec = t;
    j.job_end = msg.raw;
  }
  if (j.ended) {
    running_.erase(j.job_id);
  } else {
    running_.insert(j.job_id);
  }
  return j;
}

void JobTable::restore(uint64_t job_id, const std::vector<nlohmann::json>& records,
                       int64_t fallback_usec) {
  for (const nlohmann::json& rec : records) {
    const auto r = rec.find("r");
    if (r == rec.end() || !r->is_string()) continue;
    const auto& kind = r->get_ref<const std::string&>();
    if (kind == "msg" && rec.contains("m")) {
      try {
        LifecycleMessage m = parse_lifecycle(rec.at("m"));
        if (m.job_id != job_id) continue;
        const auto t = rec.find("t");
        apply(m, t != rec.end() && t->is_number_integer() ? t->get<int64_t>() : fallback_usec);
      } catch (const std::exception&) {
        // A record that no longer validates is skipped; the rest of the job still counts.
      }
    } else if (kind == "analysis") {
      set_analysis(job_id, rec);
    }
  }
}

void JobTable::set_analysis(uint64_t job_id, const nlohmann::json& summary) {
  JobRecord& j = jobs_[job_id];
  j.job_id = job_id;
  // An earlier attempt's summary that lands after the next attempt started (its analysis was slow)
  // stays in the spool and the history; it must not mark the running attempt analysed.
  const auto rc = summary.find("restart_count");
  if (rc != summary.end() && rc->is_number_integer() && j.restart_count &&
      rc->get<int64_t>() != *j.restart_count) {
    return;
  }
  j.analysis = summary;
}

JobRecord* JobTable::find(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

const JobRecord* JobTable::find(uint64_t job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

void JobTable::erase(uint64_t job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return;
  const JobRecord gone = std::move(it->second);
  jobs_.erase(it);
  running_.erase(job_id);
  for (const auto& [key, t] : gone.tasks)
    forget_pid(gone, t.pid);
}

// A requeued job comes back with the same id. What this node knew of the earlier attempt (its
// tasks, end and analysis) belongs to that attempt, whose report and outcome are written; the new
// one is analysed afresh when it ends. A spool replayed after a restart takes the same steps.
void JobTable::begin_new_attempt(JobRecord& j) {
  const std::map<std::string, TaskExit> old = std::move(j.tasks);
  j.tasks.clear();
  for (const auto& [key, t] : old)
    forget_pid(j, t.pid);
  j.ended = false;
  j.end_usec = 0;
  j.start_usec = 0;
  j.restart_count.reset();
  ++j.attempt_seq;
  j.batch_here = false;
  j.job_end = nlohmann::json();
  j.analysis.reset();
}

// Drops `j` from the pid's entry unless one of its (remaining) tasks still has that pid.
void JobTable::forget_pid(const JobRecord& j, int64_t pid) {
  auto it = pid_jobs_.find(pid);
  if (it == pid_jobs_.end()) return;
  const auto live = jobs_.find(j.job_id);
  if (live != jobs_.end()) {
    for (const auto& [key, t] : live->second.tasks) {
      if (t.pid == pid) return;
    }
  }
  it->second.erase(j.job_id);
  if (it->second.empty()) pid_jobs_.erase(it);
}

const std::set<uint64_t>& JobTable::jobs_with_pid(int64_t pid) const {
  static const std::set<uint64_t> kNone;
  auto it = pid_jobs_.find(pid);
  return it == pid_jobs_.end() ? kNone : it->second;
}

std::map<int64_t, uint64_t> JobTable::running_pids() const {
  std::map<int64_t, uint64_t> out;
  for (const uint64_t id : running_) {
    const JobRecord& j = jobs_.at(id);
    for (const auto& [k, t] : j.tasks) {
      if (t.pid > 0 && !t.wait_status) out[t.pid] = id;
    }
  }
  return out;
}

}  // namespace triage::agent
