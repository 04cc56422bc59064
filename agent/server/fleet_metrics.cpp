#include "agent/server/fleet_metrics.h"

#include <cctype>
#include <cmath>

#include "agent/history/suspect_nodes.h"
#include "common/error.h"

namespace triage::agent {

namespace {

constexpr int64_t kHistoryMemoUsec = 60LL * 1000000;

using Labels = MetricsText::Labels;

bool label_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_' || c == '.' || c == ':' ||
         c == '-';
}

// Whether a job's failure counts against `host`, by the suspect test's own rule.
bool counts_against(const OutcomeRecord& r, const std::string& host) {
  JobOutcome j;
  j.status = r.status;
  j.blame = r.blame;
  for (const ImplicatedNode& i : r.implicated)
    j.implicated.push_back({i.node, i.why, i.trusted});
  return counts_against_node(j, host);
}

// `key` when the family has room for it (or has it already), else the overflow set.
template <typename Map, typename Key>
Key admit(const Map& family, Key key, const Key& overflow) {
  if (family.count(key) != 0 || family.size() < kMaxLabelSets) return key;
  return overflow;
}

void outcomes(MetricsText& m, const std::string& host, const FleetMetrics& f) {
  m.family("triage_job_outcomes_total", "counter",
           "Jobs analysed by this node (it led their analysis), by status, class and blame.");
  for (const auto& [key, n] : f.outcomes()) {
    m.sample("triage_job_outcomes_total",
             Labels{{"host", host}, {"status", key[0]}, {"class", key[1]}, {"blame", key[2]}}, n);
  }
  m.family("triage_job_lost_gpu_seconds_total", "counter",
           "GPU time lost since the last checkpoint by the jobs this node analysed, by class and "
           "blame (jobs of unknown cost add 0).");
  for (const auto& [key, seconds] : f.lost_gpu_seconds()) {
    m.sample("triage_job_lost_gpu_seconds_total",
             Labels{{"host", host}, {"class", key.first}, {"blame", key.second}}, seconds);
  }
}

void requeues(MetricsText& m, const std::string& host, const FleetMetrics& f) {
  m.family("triage_requeues_total", "counter",
           "Requeues around suspect nodes: done, or refused (by the policy or by Slurm).");
  for (const auto& [result, n] : f.requeues())
    m.sample("triage_requeues_total", Labels{{"host", host}, {"result", result}}, n);
  m.family("triage_requeue_reasons_total", "counter", "Requeues by result and reason.");
  for (const auto& [key, n] : f.requeue_reasons()) {
    m.sample("triage_requeue_reasons_total",
             Labels{{"host", host}, {"result", key.first}, {"reason", key.second}}, n);
  }
}

void history_gauges(MetricsText& m, const std::string& host, const HistoryBySize& h) {
  m.family("triage_history_multinode_jobs", "gauge",
           "Multi-node jobs in this node's outcome history window, by job size (nodes).");
  m.family("triage_history_multinode_failures", "gauge",
           "Of those, the failures that count against the node (blame platform, on evidence "
           "trusted on the node).");
  for (size_t b = 0; b < kSizeBuckets.size(); ++b) {
    const Labels l{{"host", host}, {"size", kSizeBuckets[b]}};
    m.sample("triage_history_multinode_jobs", l, h.jobs[b]);
    m.sample("triage_history_multinode_failures", l, h.failures[b]);
  }
}

}  // namespace

void render_drain_metrics(MetricsText& m, const std::string& host, const NodeVerdict& v,
                          DrainOwner whose, const DrainActionCounts& actions) {
  m.family("triage_drain_recommendation", "gauge",
           "1 while the node is drain-recommended, labelled with the leading reason's action.");
  if (v.verdict == "drain-recommended") {
    const std::string action = v.reasons.empty() ? "drain" : bounded_label(v.reasons[0].action);
    m.sample("triage_drain_recommendation", Labels{{"host", host}, {"action", action}},
             uint64_t{1});
  }
  m.family("triage_drain_owner", "gauge",
           "1 for whose drain the node carries in Slurm: none, ours (the agent's), admin, or "
           "unknown (Slurm not asked yet or unreachable).");
  const std::string owner = drain_owner_name(whose);
  for (const char* o : {"none", "ours", "admin", "unknown"}) {
    m.sample("triage_drain_owner", Labels{{"host", host}, {"owner", o}},
             static_cast<uint64_t>(owner == o ? 1 : 0));
  }
  m.family("triage_auto_drain_actions_total", "counter",
           "DrainPolicy=auto actions on this node: drain, lift, reboot, needs-hands and resume, by "
           "result (done, refused, failed, limited, dry-run).");
  for (const auto& [key, n] : actions) {
    m.sample("triage_auto_drain_actions_total",
             Labels{{"host", host}, {"action", key.first}, {"result", key.second}}, n);
  }
}

void render_limit_metric(MetricsText& m, const std::string& host, bool limited) {
  m.family("triage_remediation_limited", "gauge",
           "1 while the agent's last drain or reboot of this node was held back by the partition "
           "limit (MaxTriageDrainFraction, MaxTriageDrainNodes): it recommends instead of acting.");
  m.sample("triage_remediation_limited", Labels{{"host", host}}, uint64_t{limited ? 1u : 0u});
}

void render_outcome_metrics(MetricsText& m, const std::string& host, const FleetMetrics& fleet,
                            const HistoryBySize& history) {
  outcomes(m, host, fleet);
  requeues(m, host, fleet);
  history_gauges(m, host, history);
}

std::string bounded_label(std::string_view value) {
  if (value.empty() || value.size() > 64) return "other";
  for (const char c : value) {
    if (!label_char(c)) return "other";
  }
  return std::string(value);
}

HistoryBySize history_by_size(const std::deque<OutcomeRecord>& records, const std::string& host) {
  HistoryBySize h;
  for (const OutcomeRecord& r : records) {
    size_t nodes = 0;
    try {
      nodes = r.nodes().size();
    } catch (const InputError&) {
      continue;  // a record the history accepted always parses; nothing to count otherwise
    }
    if (nodes < 2) continue;
    const size_t b = size_bucket(nodes);
    ++h.jobs[b];
    if (counts_against(r, host)) ++h.failures[b];
  }
  return h;
}

void FleetMetrics::count_outcome(const OutcomeRecord& record) {
  const std::string status = bounded_label(record.status);
  const std::string cls = record.cls ? bounded_label(*record.cls) : "none";
  const std::string blame = record.blame ? bounded_label(*record.blame) : "none";
  ++outcomes_[admit(outcomes_, OutcomeKey{status, cls, blame},
                    OutcomeKey{"other", "other", "other"})];
  // A counter never goes down: a cost that is unknown, negative or not finite adds nothing, but
  // the series is there from the first job of its kind.
  double seconds = record.gpu_hours_lost.value_or(0) * 3600;
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  lost_gpu_seconds_[admit(lost_gpu_seconds_, std::pair<std::string, std::string>{cls, blame},
                          std::pair<std::string, std::string>{"other", "other"})] += seconds;
}

void FleetMetrics::count_requeue(RequeueResult result, std::string_view reason) {
  const std::string r = result == RequeueResult::kDone ? "done" : "refused";
  ++requeues_[r];
  std::pair<std::string, std::string> key{r, bounded_label(reason)};
  if (requeue_reasons_.count(key) == 0 && requeue_reasons_.size() >= kMaxRequeueReasons)
    key.second = "other";
  ++requeue_reasons_[key];
}

const HistoryBySize& FleetMetrics::history(const OutcomeHistory& source, const std::string& host,
                                           int64_t now_usec) const {
  const auto& records = source.records();
  HistoryMemo key;
  key.size = records.size();
  if (!records.empty()) {
    key.first_job = records.front().job_id;
    key.first_end = records.front().end_time;
    key.last_job = records.back().job_id;
    key.last_end = records.back().end_time;
  }
  const bool same = memo_ && memo_->size == key.size && memo_->first_job == key.first_job &&
                    memo_->first_end == key.first_end && memo_->last_job == key.last_job &&
                    memo_->last_end == key.last_end &&
                    now_usec - memo_->computed_usec < kHistoryMemoUsec;
  if (!same) {
    key.computed_usec = now_usec;
    key.value = history_by_size(records, host);
    memo_ = key;
  }
  return memo_->value;
}

void render_fleet_metrics(MetricsText& m, const FleetMetricsSources& in) {
  render_outcome_metrics(m, in.host, in.fleet, in.fleet.history(in.history, in.host, in.now_usec));
  render_drain_metrics(m, in.host, in.drain.verdict(), in.drain.owner(), in.drain.actions());
  render_limit_metric(m, in.host, in.drain.limited());
}

}  // namespace triage::agent
