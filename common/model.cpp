#include "common/model.h"

#include <nlohmann/json.hpp>

#include "common/json_read.h"
#include "common/wait_status.h"

namespace triage {

using nlohmann::json;

std::string_view to_string(Severity s) {
  switch (s) {
    case Severity::kInfo:
      return "info";
    case Severity::kWarning:
      return "warning";
    case Severity::kError:
      return "error";
    case Severity::kCritical:
      return "critical";
  }
  return "info";
}

std::optional<Severity> parse_severity(std::string_view s) {
  if (s == "info") return Severity::kInfo;
  if (s == "warning") return Severity::kWarning;
  if (s == "error") return Severity::kError;
  if (s == "critical") return Severity::kCritical;
  return std::nullopt;
}

void TaskExit::decode() {
  exit_code.reset();
  signal.reset();
  core_dumped = false;
  if (!wait_status) return;
  const DecodedWaitStatus d = decode_wait_status(*wait_status);
  if (d.exited) exit_code = d.exit_code;
  if (d.signaled) {
    signal = d.signal;
    core_dumped = d.core_dumped;
  }
}

namespace {

// Empty strings, absent optionals and empty containers are left out: readers treat absent and
// empty alike, and reports stay small.
void put(json& j, const char* k, const std::string& v) {
  if (!v.empty()) j[k] = v;
}
template <typename T>
void put(json& j, const char* k, const std::optional<T>& v) {
  if (v) j[k] = *v;
}

std::vector<std::string> string_list(const JsonObjectReader& r, const char* key) {
  std::vector<std::string> out;
  if (const json* a = r.array(key)) {
    for (size_t i = 0; i < a->size(); ++i) {
      if (!(*a)[i].is_string()) {
        throw InputError(r.origin(), 0, r.item_path(key, i) + ": expected a string");
      }
      out.push_back((*a)[i].get<std::string>());
    }
  }
  return out;
}

template <typename T, typename F>
std::vector<T> object_list(const JsonObjectReader& r, const char* key, F parse_one) {
  std::vector<T> out;
  if (const json* a = r.array(key)) {
    out.reserve(a->size());
    for (size_t i = 0; i < a->size(); ++i)
      out.push_back(parse_one((*a)[i], r.item_path(key, i)));
  }
  return out;
}

std::optional<int> small_int(const JsonObjectReader& r, const char* key) {
  const auto v = r.i64(key);
  if (!v) return std::nullopt;
  if (*v < INT32_MIN || *v > INT32_MAX) r.fail(key, "integer out of range");
  return static_cast<int>(*v);
}

std::optional<uint32_t> id32(const JsonObjectReader& r, const char* key) {
  const auto v = r.u64(key);
  if (!v) return std::nullopt;
  if (*v > UINT32_MAX) r.fail(key, "integer out of range");
  return static_cast<uint32_t>(*v);
}

}  // namespace

void to_json(json& j, const KernelEvent& e) {
  j = json::object();
  put(j, "id", e.id);
  j["kind"] = e.kind;
  j["severity"] = std::string(to_string(e.severity));
  put(j, "host", e.host);
  put(j, "boot_id", e.boot_id);
  j["time_usec"] = e.time_usec;
  j["last_usec"] = e.last_usec;
  j["count"] = e.count;
  put(j, "rule", e.rule);
  put(j, "summary", e.summary);
  put(j, "device", e.device);
  put(j, "pid", e.pid);
  put(j, "task", e.task);
  put(j, "uid", e.uid);
  put(j, "code", e.code);
  put(j, "block", e.block);
  put(j, "job_id", e.job_id);
  put(j, "step", e.step);
  put(j, "cgroup", e.cgroup);
  put(j, "cause", e.cause);
  put(j, "action", e.action);
  j["lines"] = e.lines;
  if (!e.fields.empty()) j["fields"] = e.fields;
}

KernelEvent kernel_event_from_json(const json& j, const std::string& origin,
                                   const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  KernelEvent e;
  e.id = r.str("id").value_or("");
  e.kind = r.str("kind").value_or("");
  if (e.kind.empty()) r.fail("kind", "missing");
  if (const auto s = r.str("severity")) {
    const auto sev = parse_severity(*s);
    if (!sev) r.fail("severity", "expected info, warning, error or critical");
    e.severity = *sev;
  }
  e.host = r.str("host").value_or("");
  e.boot_id = r.str("boot_id").value_or("");
  e.time_usec = r.i64("time_usec").value_or(0);
  e.last_usec = r.i64("last_usec").value_or(e.time_usec);
  e.count = r.u64("count").value_or(1);
  e.rule = r.str("rule").value_or("");
  e.summary = r.str("summary").value_or("");
  e.device = r.str("device").value_or("");
  e.pid = r.i64("pid");
  e.task = r.str("task").value_or("");
  e.uid = r.i64("uid");
  e.code = r.i64("code");
  e.block = r.str("block").value_or("");
  e.job_id = r.u64("job_id");
  e.step = r.str("step").value_or("");
  e.cgroup = r.str("cgroup").value_or("");
  e.cause = r.str("cause").value_or("");
  e.action = r.str("action").value_or("");
  e.lines = string_list(r, "lines");
  if (e.lines.size() > KernelEvent::kMaxEventLines) e.lines.resize(KernelEvent::kMaxEventLines);
  if (const json* f = r.object("fields")) {
    for (const auto& [k, v] : f->items()) {
      if (!v.is_string()) r.fail("fields", "values must be strings");
      e.fields[k] = v.get<std::string>();
    }
  }
  return e;
}

void to_json(json& j, const TaskExit& t) {
  j = json::object();
  put(j, "host", t.host);
  j["job_id"] = t.job_id;
  put(j, "step", t.step);
  j["task"] = t.task;
  j["rank"] = t.rank;
  j["pid"] = t.pid;
  put(j, "wait_status", t.wait_status);
  put(j, "exit_code", t.exit_code);
  if (t.signal) {
    j["signal"] = *t.signal;
    j["signal_name"] = signal_name(*t.signal);
    j["core_dumped"] = t.core_dumped;
  }
  if (t.start_usec != 0) j["start_usec"] = t.start_usec;
  if (t.end_usec != 0) j["end_usec"] = t.end_usec;
}

TaskExit task_exit_from_json(const json& j, const std::string& origin, const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  TaskExit t;
  t.host = r.str("host").value_or("");
  t.job_id = r.u64("job_id").value_or(0);
  t.step = r.str("step").value_or("");
  t.task = r.i64("task").value_or(-1);
  t.rank = r.i64("rank").value_or(-1);
  t.pid = r.i64("pid").value_or(0);
  t.wait_status = small_int(r, "wait_status");
  t.start_usec = r.i64("start_usec").value_or(0);
  t.end_usec = r.i64("end_usec").value_or(0);
  t.decode();
  return t;
}

void to_json(json& j, const VerdictReason& v) {
  j = json::object();
  j["reason"] = v.reason;
  put(j, "action", v.action);
  j["event_ids"] = v.event_ids;
}

void to_json(json& j, const NodeVerdict& v) {
  j = json::object();
  put(j, "host", v.host);
  j["verdict"] = v.verdict;
  j["reasons"] = v.reasons;
  if (v.time_usec != 0) j["time_usec"] = v.time_usec;
}

NodeVerdict node_verdict_from_json(const json& j, const std::string& origin,
                                   const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  NodeVerdict v;
  v.host = r.str("host").value_or("");
  v.verdict = r.str("verdict").value_or("healthy");
  if (v.verdict != "healthy" && v.verdict != "degraded" && v.verdict != "drain-recommended") {
    r.fail("verdict", "expected healthy, degraded or drain-recommended");
  }
  v.time_usec = r.i64("time_usec").value_or(0);
  v.reasons = object_list<VerdictReason>(r, "reasons", [&](const json& item, const std::string& p) {
    const JsonObjectReader rr(item, origin, p);
    VerdictReason reason;
    reason.reason = rr.str("reason").value_or("");
    reason.action = rr.str("action").value_or("");
    reason.event_ids = string_list(rr, "event_ids");
    return reason;
  });
  return v;
}

void to_json(json& j, const DStateSummary& d) {
  j = json::object();
  if (d.time_usec != 0) j["time_usec"] = d.time_usec;
  j["count"] = d.count;
  j["persistent"] = d.persistent;
  j["by_wchan"] = d.by_wchan;
}

void to_json(json& j, const JobFacts& f) {
  j = json::object();
  j["job_id"] = f.job_id;
  put(j, "array_job_id", f.array_job_id);
  put(j, "array_task_id", f.array_task_id);
  put(j, "het_job_id", f.het_job_id);
  put(j, "het_job_offset", f.het_job_offset);
  put(j, "name", f.name);
  put(j, "user", f.user);
  put(j, "uid", f.uid);
  put(j, "gid", f.gid);
  put(j, "state", f.state);
  put(j, "wait_status", f.wait_status);
  put(j, "derived_wait_status", f.derived_wait_status);
  put(j, "work_dir", f.work_dir);
  put(j, "stdout", f.stdout_path);
  put(j, "stdout_pattern", f.stdout_pattern);
  put(j, "stderr", f.stderr_path);
  j["nodes"] = f.nodes;
  put(j, "batch_host", f.batch_host);
  if (f.submit_time != 0) j["submit_time"] = f.submit_time;
  if (f.start_time != 0) j["start_time"] = f.start_time;
  if (f.end_time != 0) j["end_time"] = f.end_time;
  j["restart_count"] = f.restart_count;
  put(j, "gpus", f.gpus);
  put(j, "time_limit", f.time_limit_sec);
  put(j, "partition", f.partition);
  put(j, "mode", f.mode);
  put(j, "source", f.source);
}

JobFacts job_facts_from_json(const json& j, const std::string& origin, const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  JobFacts f;
  f.job_id = r.u64("job_id").value_or(0);
  f.array_job_id = id32(r, "array_job_id");
  f.array_task_id = id32(r, "array_task_id");
  f.het_job_id = id32(r, "het_job_id");
  f.het_job_offset = id32(r, "het_job_offset");
  f.name = r.str("name").value_or("");
  f.user = r.str("user").value_or("");
  f.uid = id32(r, "uid");
  f.gid = id32(r, "gid");
  f.state = r.str("state").value_or("");
  f.wait_status = small_int(r, "wait_status");
  f.derived_wait_status = small_int(r, "derived_wait_status");
  f.work_dir = r.str("work_dir").value_or("");
  f.stdout_path = r.str("stdout").value_or("");
  f.stdout_pattern = r.str("stdout_pattern").value_or("");
  f.stderr_path = r.str("stderr").value_or("");
  f.nodes = string_list(r, "nodes");
  f.batch_host = r.str("batch_host").value_or("");
  f.submit_time = r.i64("submit_time").value_or(0);
  f.start_time = r.i64("start_time").value_or(0);
  f.end_time = r.i64("end_time").value_or(0);
  f.restart_count = small_int(r, "restart_count").value_or(0);
  f.gpus = r.i64("gpus");
  f.time_limit_sec = r.i64("time_limit");
  f.partition = r.str("partition").value_or("");
  f.mode = r.str("mode").value_or("");
  if (!f.mode.empty() && f.mode != "off" && f.mode != "basic" && f.mode != "full") {
    r.fail("mode", "expected off, basic or full");
  }
  f.source = r.str("source").value_or("");
  return f;
}

void to_json(json& j, const NodeEvidence& n) {
  j = json::object();
  j["host"] = n.host;
  j["reachable"] = n.reachable;
  put(j, "error", n.error);
  j["tasks"] = n.tasks;
  j["events"] = n.events;
  if (n.verdict) j["verdict"] = *n.verdict;
  if (n.dstate) j["dstate"] = *n.dstate;
  if (n.job_dstate != 0) j["job_dstate"] = n.job_dstate;
  if (!n.leaf_switch.empty()) j["leaf_switch"] = n.leaf_switch;
}

NodeEvidence node_evidence_from_json(const json& j, const std::string& origin,
                                     const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  NodeEvidence n;
  n.host = r.str("host").value_or("");
  if (n.host.empty()) r.fail("host", "missing");
  n.reachable = r.boolean("reachable").value_or(true);
  n.error = r.str("error").value_or("");
  n.tasks = object_list<TaskExit>(r, "tasks", [&](const json& item, const std::string& p) {
    return task_exit_from_json(item, origin, p);
  });
  n.events = object_list<KernelEvent>(r, "events", [&](const json& item, const std::string& p) {
    return kernel_event_from_json(item, origin, p);
  });
  if (const json* v = r.object("verdict"))
    n.verdict = node_verdict_from_json(*v, origin, r.field_path("verdict"));
  n.job_dstate = r.u64("job_dstate").value_or(0);
  n.leaf_switch = r.str("leaf_switch").value_or("");
  if (const json* d = r.object("dstate")) {
    const JsonObjectReader dr(*d, origin, r.field_path("dstate"));
    DStateSummary s;
    s.time_usec = dr.i64("time_usec").value_or(0);
    s.count = dr.u64("count").value_or(0);
    s.persistent = dr.u64("persistent").value_or(0);
    if (const json* w = dr.object("by_wchan")) {
      for (const auto& [k, v] : w->items()) {
        if (!v.is_number_unsigned()) dr.fail("by_wchan", "values must be non-negative integers");
        s.by_wchan[k] = v.get<uint64_t>();
      }
    }
    n.dstate = s;
  }
  return n;
}

void to_json(json& j, const RequeueNote& n) {
  j = json::object();
  j["outcome"] = n.outcome;
  j["reason"] = n.reason;
  j["excluded"] = n.excluded;
  j["attempt"] = n.attempt;
  j["max"] = n.max;
  j["steps"] = n.steps;
}

RequeueNote requeue_note_from_json(const json& j, const std::string& origin,
                                   const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  RequeueNote n;
  n.outcome = r.str("outcome").value_or("");
  if (n.outcome != "requeued" && n.outcome != "declined" && n.outcome != "refused") {
    r.fail("outcome", "expected requeued, declined or refused");
  }
  n.reason = r.str("reason").value_or("");
  n.excluded = string_list(r, "excluded");
  n.attempt = small_int(r, "attempt").value_or(0);
  n.max = small_int(r, "max").value_or(0);
  n.steps = string_list(r, "steps");
  return n;
}

void to_json(json& j, const MovedNote& n) {
  j = {{"node", n.node}, {"reason", n.reason}};
}

void to_json(json& j, const LiveWarning& w) {
  j = {{"class", w.cls}, {"line", w.line}, {"text", w.text}, {"seen_usec", w.seen_usec}};
}

void to_json(json& j, const LiveStall& st) {
  j = {{"flagged_usec", st.flagged_usec},
       {"step", st.step},
       {"silence_s", st.silence_s},
       {"resumed_usec", st.resumed_usec}};
}

void to_json(json& j, const LiveRecord& r) {
  j = json::object();
  j["followed_since_usec"] = r.followed_since_usec;
  j["warnings"] = r.warnings;
  j["flagged_usec"] = r.flagged_usec;
  j["step"] = r.step;
  j["step_line"] = r.step_line;
  j["last_step_usec"] = r.last_step_usec;
  j["silence_s"] = r.silence_s;
  j["threshold_s"] = r.threshold_s;
  put(j, "basis", r.basis);
  j["corroboration"] = r.corroboration;
  j["resumed_usec"] = r.resumed_usec;
  put(j, "action", r.action);
  put(j, "action_reason", r.action_reason);
  j["action_usec"] = r.action_usec;
  put(j, "action_error", r.action_error);
  put(j, "action_result", r.action_result);
  if (r.action_tries != 0) j["action_tries"] = r.action_tries;
  if (r.stalls != 0) j["stalls"] = r.stalls;
  if (!r.earlier_stalls.empty()) j["earlier_stalls"] = r.earlier_stalls;
  put(j, "pace_warning", r.pace_warning);
  if (r.pace_warning_usec != 0) j["pace_warning_usec"] = r.pace_warning_usec;
}

LiveRecord live_record_from_json(const json& j, const std::string& origin,
                                 const std::string& path) {
  const JsonObjectReader r(j, origin, path);
  LiveRecord l;
  l.followed_since_usec = r.i64("followed_since_usec").value_or(0);
  l.warnings = object_list<LiveWarning>(r, "warnings", [&](const json& item, const std::string& p) {
    const JsonObjectReader w(item, origin, p);
    return LiveWarning{w.str("class").value_or(""), w.i64("line").value_or(0),
                       w.str("text").value_or(""), w.i64("seen_usec").value_or(0)};
  });
  l.flagged_usec = r.i64("flagged_usec").value_or(0);
  l.step = r.i64("step").value_or(-1);
  l.step_line = r.i64("step_line").value_or(0);
  l.last_step_usec = r.i64("last_step_usec").value_or(0);
  l.silence_s = r.num("silence_s").value_or(0);
  l.threshold_s = r.num("threshold_s").value_or(0);
  l.basis = r.str("basis").value_or("");
  l.corroboration = string_list(r, "corroboration");
  l.resumed_usec = r.i64("resumed_usec").value_or(0);
  l.action = r.str("action").value_or("");
  if (!l.action.empty() && l.action != "notify" && l.action != "cancel" && l.action != "requeue")
    r.fail("action", "expected notify, cancel or requeue");
  l.action_reason = r.str("action_reason").value_or("");
  l.action_usec = r.i64("action_usec").value_or(0);
  l.action_error = r.str("action_error").value_or("");
  l.action_result = r.str("action_result").value_or("");
  if (!l.action_result.empty() && l.action_result != "done" && l.action_result != "retry" &&
      l.action_result != "failed" && l.action_result != "not-done")
    r.fail("action_result", "expected done, retry, failed or not-done");
  l.action_tries = r.i64("action_tries").value_or(0);
  // A record written before stalls were counted holds at most the one it flagged.
  l.stalls = r.i64("stalls").value_or(l.flagged_usec != 0 ? 1 : 0);
  l.earlier_stalls =
      object_list<LiveStall>(r, "earlier_stalls", [&](const json& item, const std::string& p) {
        const JsonObjectReader e(item, origin, p);
        return LiveStall{e.i64("flagged_usec").value_or(0), e.i64("step").value_or(-1),
                         e.num("silence_s").value_or(0), e.i64("resumed_usec").value_or(0)};
      });
  l.pace_warning = r.str("pace_warning").value_or("");
  l.pace_warning_usec = r.i64("pace_warning_usec").value_or(0);
  return l;
}

void to_json(json& j, const Evidence& e) {
  j = json::object();
  j["schema_version"] = e.schema_version;
  j["job"] = e.job;
  j["nodes"] = e.nodes;
  put(j, "report_path", e.report_path);
  put(j, "requeue", e.requeue);
  if (e.live) j["live"] = *e.live;
  if (!e.moved.empty()) j["moved"] = e.moved;
}

Evidence evidence_from_json(const json& j, const std::string& origin) {
  const JsonObjectReader r(j, origin, "");
  Evidence e;
  e.schema_version = small_int(r, "schema_version").value_or(0);
  if (e.schema_version < 1 || e.schema_version > kEvidenceSchemaVersion) {
    r.fail("schema_version", "unsupported version " + std::to_string(e.schema_version));
  }
  if (const json* job = r.object("job")) e.job = job_facts_from_json(*job, origin, "job");
  e.nodes = object_list<NodeEvidence>(r, "nodes", [&](const json& item, const std::string& p) {
    return node_evidence_from_json(item, origin, p);
  });
  e.report_path = r.str("report_path").value_or("");
  if (const json* q = r.object("requeue"))
    e.requeue = requeue_note_from_json(*q, origin, "requeue");
  if (const json* live = r.object("live")) e.live = live_record_from_json(*live, origin, "live");
  e.moved = object_list<MovedNote>(r, "moved", [&](const json& item, const std::string& p) {
    const JsonObjectReader m(item, origin, p);
    MovedNote n{m.str("node").value_or(""), m.str("reason").value_or("")};
    if (n.node.empty()) m.fail("node", "missing");
    return n;
  });
  return e;
}

Evidence parse_evidence(std::string_view text, const std::string& origin) {
  if (text.size() > (64u << 20)) throw InputError(origin, 0, "evidence is larger than 64 MiB");
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw InputError(origin, 0, "evidence is not valid JSON (byte " + std::to_string(e.byte) + ")");
  } catch (const json::out_of_range& e) {
    // A number the parser cannot hold (1e999) is as unusable as bad syntax.
    throw InputError(origin, 0, std::string("evidence is not usable JSON: ") + e.what());
  }
  return evidence_from_json(j, origin);
}

}  // namespace triage
