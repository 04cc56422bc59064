// The fleet families of the agent's /metrics page (docs/metrics.md): job outcomes and the GPU time
// they lost, by class and blame; requeues by result and reason; this node's side of the
// suspect-node test (the multi-node jobs of its history window, by size, and those that count
// against it); its drain: the recommendation by leading action, whose drain it is, and the
// auto-drain's actions.
//
// Outcomes are counted by the analysis leader only, once per job, so that a sum over the cluster
// counts each job once. Label values that come from an analysis (class, status) or a caller
// (requeue reason) are bounded: anything outside [A-Za-z0-9_.:-]{1,64} is "other", and each family
// keeps at most kMaxLabelSets label sets, later ones folding into "other", so that nothing a job's
// files can steer grows the page without bound.
//
// Loop thread only.
#pragma once

#include <array>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "agent/health/drain_controller.h"
#include "agent/history/outcome_history.h"
#include "agent/history/outcome_record.h"
#include "agent/net/metrics_text.h"

namespace triage::agent {

inline constexpr size_t kMaxLabelSets = 500;
inline constexpr size_t kMaxRequeueReasons = 32;

// `value` when it is a usable label value (1-64 of [A-Za-z0-9_.:-]), else "other".
std::string bounded_label(std::string_view value);

// The size buckets of the suspect-node test (agent/history/suspect_nodes.h size_bucket), as labels.
inline constexpr std::array<const char*, 4> kSizeBuckets = {"2-3", "4-7", "8-15", "16+"};

// A node's history window as the suspect-node test sees it: multi-node jobs by size bucket, and
// of those the ones that count against the node (agent/history/suspect_nodes.h counts_against_node:
// failed, blame platform, the node implicated on trusted evidence).
struct HistoryBySize {
  std::array<uint64_t, 4> jobs{};
  std::array<uint64_t, 4> failures{};
};

// The window `records` of node `host`'s history, bucketed; a record whose node list does not parse
// is left out.
HistoryBySize history_by_size(const std::deque<OutcomeRecord>& records, const std::string& host);

enum class RequeueResult { kDone, kRefused };

class FleetMetrics {
 public:
  // One analysed job's outcome, on the node that led its analysis.
  void count_outcome(const OutcomeRecord& record);
  // A requeue the agent made (kDone) or that the policy or Slurm refused (kRefused), with a short
  // reason ("platform", "suspect-node", "not-requeueable", "limit", ...).
  void count_requeue(RequeueResult result, std::string_view reason);

  using OutcomeKey = std::array<std::string, 3>;  // status, class, blame
  const std::map<OutcomeKey, uint64_t>& outcomes() const { return outcomes_; }
  const std::map<std::pair<std::string, std::string>, double>& lost_gpu_seconds() const {
    return lost_gpu_seconds_;
  }
  const std::map<std::string, uint64_t>& requeues() const { return requeues_; }
  const std::map<std::pair<std::string, std::string>, uint64_t>& requeue_reasons() const {
    return requeue_reasons_;
  }

  // The history's buckets, recomputed when the history changed or a minute has passed (a full
  // history is 10,000 hostlists to expand; a scrape should not pay that every time).
  const HistoryBySize& history(const OutcomeHistory& source, const std::string& host,
                               int64_t now_usec) const;

 private:
  std::map<OutcomeKey, uint64_t> outcomes_;
  std::map<std::pair<std::string, std::string>, double> lost_gpu_seconds_;  // class, blame
  std::map<std::string, uint64_t> requeues_ = {{"done", 0}, {"refused", 0}};
  std::map<std::pair<std::string, std::string>, uint64_t> requeue_reasons_;

  struct HistoryMemo {
    size_t size = 0;
    uint64_t first_job = 0, last_job = 0;
    int64_t first_end = 0, last_end = 0;
    int64_t computed_usec = 0;
    HistoryBySize value;
  };
  mutable std::optional<HistoryMemo> memo_;
};

struct FleetMetricsSources {
  const std::string& host;
  const FleetMetrics& fleet;
  const OutcomeHistory& history;
  const DrainController& drain;
  int64_t now_usec = 0;
};

// Appends the fleet families to `m`, every sample with the host label.
void render_fleet_metrics(MetricsText& m, const FleetMetricsSources& in);

// Its two halves, on plain values: the outcome, requeue and history families...
void render_outcome_metrics(MetricsText& m, const std::string& host, const FleetMetrics& fleet,
                            const HistoryBySize& history);
// ...and the drain families: the recommendation by its leading action, whose drain the node
// carries (every owner, 1 for the current one), the auto-drain's actions.
void render_drain_metrics(MetricsText& m, const std::string& host, const NodeVerdict& verdict,
                          DrainOwner whose, const DrainActionCounts& actions);

// triage_remediation_limited: 1 while the last drain or reboot was held back by
// MaxTriageDrainFraction / MaxTriageDrainNodes (the agent recommends instead; alert on it).
void render_limit_metric(MetricsText& m, const std::string& host, bool limited);

}  // namespace triage::agent
