#include "agent/live/busy_wait_probe.h"

#include <algorithm>

#include "agent/base/config.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/text.h"

namespace triage::agent {

namespace {

// A summary goes into the live record's corroboration list, whose lines are bounded.
constexpr size_t kMaxLineBytes = 512;

double seconds(int64_t usec) {
  return static_cast<double>(usec) / 1e6;
}

const tsdb::PlaybookResult* hang_playbook(const tsdb::TsdbResult& result) {
  for (const auto& p : result.playbooks) {
    if (p.number == 1) return &p;
  }
  return nullptr;
}

// The spin of playbook 1: GPUs at idle-level power reporting high utilisation, with or without a
// network event before it.
bool spinning(const std::string& verdict) {
  return verdict == "busy-wait-hang" || verdict == "network-triggered-hang";
}

std::string why_no_verdict(const tsdb::TsdbResult& result) {
  if (result.notes.empty()) return "playbook 1 gave no verdict";
  return printable(truncate_utf8(result.notes.front(), kMaxLineBytes));
}

}  // namespace

BusyWaitSettings busy_wait_settings(const AgentConfig& config) {
  BusyWaitSettings s;
  s.prometheus_url = config.prometheus_url;
  s.host_label = config.prometheus_host_label;
  s.query_timeout_sec = std::min(config.tsdb_query_timeout_sec, kBusyWaitQueryTimeoutMaxSec);
  s.rule_layers = agent_rule_layers(config);
  return s;
}

tsdb::TsdbRequest busy_wait_request(const BusyWaitSettings& settings, const StalledJob& job,
                                    int64_t now_usec) {
  // job_dir stays empty: root never reads the job's own TSDB, so the cluster is the only source.
  tsdb::TsdbRequest req;
  req.cluster_url = settings.prometheus_url;
  req.host_label = settings.host_label;
  req.hosts = job.nodes;
  req.job_start = seconds(job.start_usec);
  req.job_end = seconds(now_usec);
  req.last_step_time = seconds(job.stall_start_usec);
  req.triage_class = "hang";
  req.class_playbooks = {"hang"};  // no catalog lookup: the question is playbook 1's
  req.playbooks = {1};
  req.full = false;
  req.gpu_model = job.gpu_model;
  req.liveness = tsdb::JobLiveness::kLive;
  req.query_timeout_s = static_cast<double>(settings.query_timeout_sec);
  req.rule_layers = settings.rule_layers;
  return req;
}

BusyWaitReading read_busy_wait(const tsdb::TsdbResult& result) {
  BusyWaitReading r;
  r.asked = true;
  const tsdb::PlaybookResult* p = result.available ? hang_playbook(result) : nullptr;
  if (p == nullptr || p->verdict.empty()) {
    r.error = why_no_verdict(result);
    return r;
  }
  r.verdict = p->verdict;
  r.busy_wait = spinning(p->verdict);
  r.line = printable(
      truncate_utf8("cluster Prometheus (" + p->verdict + "): " + p->summary, kMaxLineBytes));
  return r;
}

BusyWaitReading probe_busy_wait(const BusyWaitSettings& settings, const StalledJob& job,
                                int64_t now_usec) {
  if (settings.prometheus_url.empty()) {
    BusyWaitReading r;
    r.error = "no cluster Prometheus (PrometheusURL) configured";
    return r;
  }
  return read_busy_wait(tsdb::run_tsdb_analysis(busy_wait_request(settings, job, now_usec)));
}

}  // namespace triage::agent
