#include "analyzer/tsdb_handoff.h"

#include <algorithm>
#include <utility>

#include "analyzer/triage_report.h"
#include "common/kv_config.h"
#include "common/tsdb_config_keys.h"

namespace triage {

namespace {

std::optional<double> seconds(int64_t usec) {
  if (usec <= 0) return std::nullopt;
  return static_cast<double>(usec) / 1e6;
}

void add_unique(std::vector<std::string>& v, const std::string& s) {
  if (!s.empty() && std::find(v.begin(), v.end(), s) == v.end()) v.push_back(s);
}

const NodeRow* node_of_rank(const Triage& t, int64_t rank) {
  for (const auto& n : t.nodes) {
    if (std::find(n.ranks.begin(), n.ranks.end(), rank) != n.ranks.end()) return &n;
  }
  return nullptr;
}

// When the job failed, by the log: the primary failure's first line. A stall's (the hang's)
// evidence is its last completed step, which is where the hang began, not where the job ended: its
// end is the summary's "Finished:" time (cancel or time limit).
std::optional<double> failure_time(const Triage& t, const SignatureCatalog& catalog) {
  const SignatureClass* c = catalog.find(t.primary_failure);
  if (c == nullptr || c->derived != Derivation::kStall) {
    for (const auto& f : t.evidence) {
      if (f.time_usec > 0) return seconds(f.time_usec);
    }
  }
  return seconds(t.summary.finished_usec);
}

}  // namespace

tsdb::TsdbRequest tsdb_request_for(const Triage& t, const SignatureCatalog& catalog,
                                   const Evidence* evidence, const TsdbHandoffOptions& options) {
  tsdb::TsdbRequest r;
  r.job_dir = t.job_dir;
  if (t.job_id) r.job_id = std::to_string(*t.job_id);
  r.triage_class = t.primary_failure;
  r.class_playbooks = catalog.playbooks_for(t.primary_failure);
  r.full = true;

  // The job's window and nodes are trusted facts only from Slurm (the agent's evidence). Without
  // them the TSDB's own range and hosts are analysed: a log names only the nodes that printed
  // something, and a partial list would make healthy nodes look missing.
  if (evidence != nullptr) {
    if (evidence->job.start_time > 0) r.job_start = static_cast<double>(evidence->job.start_time);
    if (evidence->job.end_time > 0) r.job_end = static_cast<double>(evidence->job.end_time);
    r.hosts = evidence->job.nodes;
  }
  if (!r.job_end) r.job_end = seconds(t.summary.finished_usec);
  if (r.hosts.empty() && !options.cluster_url.empty()) {
    // A cluster Prometheus holds every node of the cluster: the log's nodes are a better scope
    // than none.
    for (const auto& n : t.nodes)
      add_unique(r.hosts, n.host);
  }

  r.failure_time = failure_time(t, catalog);
  const auto& p = t.progress;
  if (p.has_steps && p.last_step >= 0) {
    r.last_step = p.last_step;
    if (p.first_step >= 0) r.first_step = p.first_step;
    // An upper bound from the log's mtime is not when the last step completed.
    if (p.last_step_time_basis == "timestamp" || p.last_step_time_basis == "estimated")
      r.last_step_time = seconds(p.last_step_time_usec);
  }
  r.checkpoint_period = p.checkpoint_period;
  r.step_time_s = p.step_seconds;
  r.last_loss = p.last_loss;  // checks that the TSDB is this job's (tb_learning_loss at that step)
  r.async_checkpointing = p.async_checkpointing.value_or(false);
  r.heartbeat_timeout_s = t.heartbeat.timeout_s;

  if (t.heartbeat.present) {
    for (int64_t task : t.heartbeat.accused) {
      r.accused_tasks.push_back(task);
      if (const NodeRow* n = node_of_rank(t, task)) add_unique(r.accused_hosts, n->host);
    }
  }
  if (const NodeRow* n = node_of_rank(t, 0)) r.coordinator_host = n->host;

  if (t.ray.live) {
    r.liveness = tsdb::JobLiveness::kLive;
    if (!t.ray.head_host.empty() && t.ray.prometheus_port && *t.ray.prometheus_port > 0 &&
        *t.ray.prometheus_port <= 65535) {
      r.head_host = t.ray.head_host;
      r.head_port = static_cast<uint16_t>(*t.ray.prometheus_port);
    }
  } else if (t.status != kStatusRunning && t.status != kStatusHanging &&
             t.status != kStatusUnknown) {
    r.liveness = tsdb::JobLiveness::kFinished;
  }

  r.cluster_url = options.cluster_url;
  r.host_label = options.host_label.empty() ? "host" : options.host_label;
  if (!options.prometheus_binary.empty()) r.prometheus_binary = options.prometheus_binary;
  r.rule_layers = options.rule_layers;
  r.query_timeout_s = options.query_timeout_s;
  if (!options.scratch_dir.empty()) r.scratch_dir = options.scratch_dir;
  return r;
}

std::vector<InputError> apply_site_tsdb_config(const std::string& path, bool cli_url,
                                               bool cli_binary, TsdbHandoffOptions& options) {
  KvConfig conf(tsdb_config_keys());
  auto errors = conf.parse_file(path, KvConfig::UnknownKeys::kIgnore);
  if (!errors.empty()) return errors;
  const std::string url = conf.get("PrometheusURL");
  if (!url.empty() && url.rfind("http://", 0) != 0 && url.rfind("https://", 0) != 0) {
    return {InputError(conf.origin("PrometheusURL"), 0,
                       "PrometheusURL expects an http:// or https:// URL")};
  }
  if (!cli_url) options.cluster_url = url;
  if (!cli_binary && conf.origin("PrometheusBinary") != "default")
    options.prometheus_binary = conf.get("PrometheusBinary");
  options.host_label = conf.get("PrometheusHostLabel");
  options.scratch_dir = conf.get("TsdbScratchDir");
  options.query_timeout_s = static_cast<double>(conf.get_seconds("TsdbQueryTimeout"));
  return {};
}

void attach_tsdb_result(Triage& t, tsdb::TsdbResult result) {
  const tsdb::TsdbResult& r = t.tsdb.emplace(std::move(result));
  if (!r.available) {
    std::string why = r.notes.empty() ? "no metrics source answered" : r.notes.front();
    add_unique(t.notes, "Full mode: the TSDB playbooks could not read this job's metrics (" + why +
                            "); the report rests on the log and the nodes' kernels.");
    return;
  }
  // Hardware verdicts from counters: from an admin-run cluster Prometheus they justify a drain;
  // from the job's own (user-writable) TSDB they are a lead to confirm with the node's kernel log.
  for (const auto& v : r.hardware) {
    if (v.action != "drain") continue;
    std::string rec = v.source_trusted
                          ? "Drain " + v.host + " (" + v.component + ": " + v.reason +
                                ", from the cluster Prometheus)."
                          : "Check " + v.host + " (" + v.component + "): the job's " +
                                "metrics show " + v.reason +
                                "; confirm with the node's kernel log before draining.";
    add_unique(t.recommendations, rec);
  }
  attribute_slowdown_to_clocks(t);
  add_node_stragglers(t);
}

std::vector<NodeClockSeries> node_clocks_of(const tsdb::Timeline& tl) {
  std::vector<NodeClockSeries> out;
  for (const auto& s : tl.clock) {
    NodeClockSeries n{s.name, {}};
    n.samples.reserve(s.points.size());
    for (const auto& p : s.points)
      n.samples.emplace_back(static_cast<int64_t>(p.t * 1e6), p.v);
    out.push_back(std::move(n));
  }
  return out;
}

void attribute_slowdown_to_clocks(Triage& t) {
  if (!t.slowdown.found || !t.tsdb || t.tsdb->timeline.clock.empty()) return;
  // The log alone judged the slowdown; the clocks now may name its node (they win over the
  // stragglers' node: the hardware said so).
  const Slowdown with_clocks =
      find_slowdown(t.step_times, t.stragglers, node_clocks_of(t.tsdb->timeline));
  if (with_clocks.found && !with_clocks.node.empty()) t.slowdown = with_clocks;
}

void add_node_stragglers(Triage& t) {
  if (!t.tsdb || t.tsdb->timeline.clock.size() < 2) return;
  add_stragglers(t.stragglers,
                 find_node_stragglers(node_clocks_of(t.tsdb->timeline), t.stragglers));
}

std::string timeline_name_for(const std::string& report_md_name) {
  std::string stem = report_md_name;
  if (stem.size() > 3 && stem.compare(stem.size() - 3, 3, ".md") == 0) stem.resize(stem.size() - 3);
  return stem + "-timeline.svg";
}

}  // namespace triage
