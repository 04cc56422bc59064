#include "agent/job_end/job_end.h"

#include <pwd.h>

#include <algorithm>

#include "common/slurm_pattern.h"
#include "common/text.h"
#include "common/wait_status.h"

namespace triage::agent {

namespace {

std::string str_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

template <typename T>
std::optional<T> int_field(const nlohmann::json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) return std::nullopt;
  return static_cast<T>(it->get<int64_t>());
}

std::string user_name(std::optional<uint32_t> uid) {
  if (!uid) return "";
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwuid_r(*uid, &pw, buf, sizeof buf, &res) != 0 || res == nullptr) return "";
  return pw.pw_name;
}

SlurmPatternContext pattern_context(const JobFacts& f, const nlohmann::json& job_end) {
  SlurmPatternContext ctx;
  ctx.job_id = f.job_id;
  ctx.array_job_id = f.array_job_id ? std::optional<uint64_t>(*f.array_job_id)
                                    : int_field<uint64_t>(job_end, "array_job_id");
  ctx.array_task_id = f.array_task_id ? std::optional<uint64_t>(*f.array_task_id)
                                      : int_field<uint64_t>(job_end, "array_task_id");
  ctx.user = f.user;
  ctx.job_name = f.name;
  ctx.node = !f.batch_host.empty() ? f.batch_host : (f.nodes.empty() ? "" : f.nodes.front());
  ctx.work_dir = f.work_dir;
  return ctx;
}

}  // namespace

bool is_analysis_leader(const JobRecord& job, const std::string& self) {
  if (job.batch_here) return true;
  const std::string batch_host = str_field(job.job_end, "batch_host");
  if (!batch_host.empty()) return batch_host == self;
  if (!job.nodes.empty()) return job.nodes.front() == self;
  // No node list at all: this node is the only one that knows about the job.
  return true;
}

bool evidence_settled(const std::vector<KernelSourceProgress>& sources, int64_t ended_usec,
                      int64_t now_usec, int64_t max_wait_usec) {
  if (now_usec - ended_usec >= max_wait_usec) return true;
  return std::all_of(sources.begin(), sources.end(), [&](const KernelSourceProgress& s) {
    return !s.live || s.caught_up_usec >= ended_usec;
  });
}

JobFacts facts_from_epilog(const JobRecord& job, const std::string& self) {
  const nlohmann::json& m = job.job_end;
  JobFacts f;
  f.job_id = job.job_id;
  f.array_job_id = job.array_job_id;
  f.array_task_id = job.array_task_id;
  f.het_job_id = job.het_job_id;
  f.restart_count = int_field<int>(m, "restart_count").value_or(0);
  f.source = "epilog";
  f.uid = job.uid;
  f.gid = job.gid;
  f.user = str_field(m, "user");
  if (f.user.empty()) f.user = user_name(f.uid);
  f.name = str_field(m, "job_name");
  f.state = str_field(m, "state");
  f.partition = str_field(m, "partition");
  f.wait_status = int_field<int>(m, "wait_status");
  f.derived_wait_status = int_field<int>(m, "derived_wait_status");
  f.work_dir = str_field(m, "work_dir");
  f.stdout_pattern = str_field(m, "stdout_pattern");
  f.nodes = job.nodes.empty() ? std::vector<std::string>{self} : job.nodes;
  f.batch_host = str_field(m, "batch_host");
  if (f.batch_host.empty() && job.batch_here) f.batch_host = self;
  f.start_time = job.start_usec / 1000000;
  f.end_time = job.end_usec / 1000000;
  f.mode = job.mode.empty() ? "basic" : job.mode;
  const bool is_array = f.array_task_id.has_value() || m.contains("array_task_id");
  const std::string pattern =
      f.stdout_pattern.empty() ? default_stdout_pattern(is_array) : f.stdout_pattern;
  // Without a name %x would expand to nothing and point at the wrong file; better no path.
  if (f.name.empty() && pattern.find("%x") != std::string::npos) return f;
  f.stdout_path = expand_slurm_pattern(pattern, pattern_context(f, m));
  if (!f.stdout_path.empty() && f.stdout_path.front() != '/') f.stdout_path.clear();
  return f;
}

JobFacts merge_facts(JobFacts ctld, const JobFacts& epilog) {
  ctld.mode = epilog.mode;
  if (ctld.stdout_pattern.empty()) ctld.stdout_pattern = epilog.stdout_pattern;
  if (!ctld.uid) ctld.uid = epilog.uid;
  if (!ctld.gid) ctld.gid = epilog.gid;
  if (ctld.user.empty()) ctld.user = epilog.user;
  if (ctld.work_dir.empty()) ctld.work_dir = epilog.work_dir;
  if (ctld.stdout_path.empty()) ctld.stdout_path = epilog.stdout_path;
  if (ctld.nodes.empty()) ctld.nodes = epilog.nodes;
  if (!ctld.wait_status) ctld.wait_status = epilog.wait_status;
  if (!ctld.derived_wait_status) ctld.derived_wait_status = epilog.derived_wait_status;
  if (ctld.start_time == 0) ctld.start_time = epilog.start_time;
  if (ctld.end_time == 0) ctld.end_time = epilog.end_time;
  if (ctld.source.empty()) ctld.source = "slurmctld";
  return ctld;
}

std::string home_of(uid_t uid) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || res == nullptr || pw.pw_dir == nullptr)
    return "";
  return pw.pw_dir;
}

std::string analysis_target(const JobFacts& f) {
  if (!f.stdout_path.empty()) return f.stdout_path;
  if (!f.work_dir.empty()) return f.work_dir;
  return std::to_string(f.job_id);
}

std::string expand_report_path(const std::string& pattern, const JobFacts& facts) {
  if (pattern.empty()) return "";
  return expand_slurm_pattern(pattern, pattern_context(facts, nlohmann::json::object()));
}

std::vector<std::string> analyzer_argv(const std::string& analyzer, const std::string& mode,
                                       int64_t stall_after_sec, const std::string& target) {
  return {analyzer,
          "analyze",
          "--evidence",
          "-",
          "--write",
          "--format",
          "json",
          "--stall-after",
          std::to_string(stall_after_sec),
          "--mode",
          mode,
          target};
}

bool analysis_succeeded(int wait_status) {
  // `slurm-triage analyze` exits 1 when the job it analysed failed (docs/analyze.md): the report
  // was written, so the analysis worked. Its own failures are 2 and up; a signal is a kill.
  constexpr int kAnalysedAFailedJob = 1;
  const DecodedWaitStatus d = decode_wait_status(wait_status);
  return d.exited && (d.exit_code == 0 || d.exit_code == kAnalysedAFailedJob);
}

nlohmann::json analysis_summary(const JobFacts& facts, const std::string& target,
                                const AnalysisOutcome& o,
                                const std::vector<std::string>& unreachable, int64_t now_usec) {
  nlohmann::json s = {{"r", "analysis"},
                      {"job_id", facts.job_id},
                      {"restart_count", facts.restart_count},
                      {"time_usec", now_usec},
                      {"mode", facts.mode},
                      {"target", target},
                      {"facts_source", facts.source},
                      {"duration_ms", o.duration_ms},
                      {"unreachable_nodes", unreachable}};
  if (!o.started) {
    s["result"] = "failed";
    s["error"] = printable(o.err);
    return s;
  }
  if (o.timed_out) {
    s["result"] = "timeout";
  } else {
    s["result"] = analysis_succeeded(o.wait_status) ? "ok" : "failed";
  }
  s["exit"] = describe_wait_status(o.wait_status);
  if (s["result"] != "ok" && !o.err.empty()) {
    s["error"] = printable(truncate_utf8(trim(o.err), 2000));
  }
  // Keep the few headline fields of the analyzer's answer (it owns the shape; missing fields
  // are simply absent here).
  const nlohmann::json out = nlohmann::json::parse(o.out, nullptr, false);
  if (out.is_object()) {
    for (const char* k :
         {"status", "class", "primary_class", "report_path", "json_path", "stage"}) {
      if (auto it = out.find(k); it != out.end() && (it->is_string() || it->is_number()))
        s[k] = *it;
    }
    if (auto p = out.find("primary_failure"); p != out.end() && p->is_object()) {
      for (const char* k : {"class", "stage"}) {
        if (auto it = p->find(k); it != p->end() && it->is_string())
          s[std::string("primary_") + k] = *it;
      }
    }
  } else if (!o.out.empty()) {
    s["output_unparsed"] = true;
  }
  return s;
}

nlohmann::json skipped_summary(uint64_t job_id, const std::string& why, int64_t now_usec) {
  return {{"r", "analysis"},
          {"job_id", job_id},
          {"time_usec", now_usec},
          {"result", "skipped"},
          {"reason", why}};
}

}  // namespace triage::agent
