// What every playbook works from: the request, the querier, the thresholds for the job's GPU
// model, and what discovery learnt about the TSDB (metric names, hosts, window, scrape interval,
// the step-to-time map, checkpoint windows, ghost-data intervals).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/tsdb/query_scope.h"
#include "analyzer/tsdb/thresholds.h"
#include "analyzer/tsdb/tsdb.h"

namespace triage::tsdb {

struct Interval {
  double start = 0;
  double end = 0;
  bool contains(double t) const { return t >= start && t <= end; }
};

struct StepMark {
  double t = 0;  // first time the step was seen
  int64_t step = 0;
};

struct Discovery {
  std::set<std::string> metrics;
  std::vector<std::string> hosts;
  double start = 0, end = 0;  // the analysed window
  std::optional<double> data_min, data_max;
  double scrape_s = 15;
  double resolution_s = 15;  // step for range queries over the whole window
  std::string tb_host;       // the host whose tb_* series map steps to time
  std::vector<StepMark> steps;
  std::optional<double> last_step_change;  // when tb_step last advanced
  std::vector<std::pair<int64_t, Interval>> checkpoints;
  std::map<std::string, std::vector<Interval>> ghost;  // host -> flat-lined collection intervals

  bool has(const std::string& metric) const { return metrics.count(metric) != 0; }
  bool in_checkpoint(double t) const;
  bool ghost_at(const std::string& host, double t) const;
  std::optional<double> time_of_step(int64_t step) const;
  std::optional<int64_t> step_at(double t) const;
};

struct Context {
  const TsdbRequest& req;
  Querier& q;
  const Scope& scope;
  const Thresholds& th;
  const GpuThresholds& gpu;
  const Discovery& disc;
  bool source_trusted = false;
  // Counter increases over the whole window, shared by the hardware and GPU-health playbooks:
  // metric -> series with a non-zero increase.
  std::map<std::string, std::vector<Sample>> counter_cache;

  // increase(metric[window]) > 0 for the job's hosts at the window end, cached per metric.
  const std::vector<Sample>& nonzero_increase(const std::string& metric,
                                              std::vector<QueryRecord>* sink);
};

// A network event that can trigger an incident: a retransmit burst, ACK timeouts, retry
// exhaustion or a port going down, found in [from, to] against the job's own earlier baseline.
struct NetEvent {
  std::string host;
  std::string device;  // "mlx5_0/1" for RDMA, "" for TCP
  std::string metric;
  std::string what;  // "RDMA retransmits", ...
  double time = 0;
  double amount = 0;    // increase within the window (port: 0)
  double baseline = 0;  // the same counter's rate before, per second
};
std::vector<NetEvent> find_network_events(Context& ctx, double from, double to,
                                          std::vector<QueryRecord>* sink);

// Per-series helpers.
std::map<std::string, double> by_host(const Scope& scope, const std::vector<Sample>& samples);
// `sum by (<host label>) (expr)` / `max by ...` spelled for the scope's host label.
std::string by_host_sum(const Scope& scope, const std::string& expr);
std::string by_host_agg(const Scope& scope, const std::string& agg, const std::string& expr);

// ---- Playbooks (playbook_*.cpp) ----
PlaybookResult run_hang(Context& ctx);
PlaybookResult run_heartbeat(Context& ctx);
PlaybookResult run_oom(Context& ctx);
PlaybookResult run_hardware(Context& ctx, std::vector<HardwareVerdict>& verdicts);
PlaybookResult run_gpu_health(Context& ctx);
PlaybookResult run_network(Context& ctx, std::vector<HardwareVerdict>& verdicts);
PlaybookResult run_training(Context& ctx);

// ---- Small statistics and formatting helpers (playbook_util.cpp) ----
double median(std::vector<double> v);
double quantile(std::vector<double> v, double q);
double mad(const std::vector<double>& v);  // median absolute deviation
double mean(const std::vector<double>& v);
std::string fmt(double v, int decimals = 1);
std::string fmt_watts(double v);
std::string fmt_pct(double v);
std::string fmt_bytes(double v);
std::string fmt_rate(double per_s);
std::string fmt_time(double t);  // UTC, seconds
std::string join(const std::vector<std::string>& v, const std::string& sep = ", ");
// At most `max` names, then "and N more".
std::string list_names(const std::vector<std::string>& names, size_t max = 8);
void add_unique(std::vector<std::string>& v, const std::string& s);
// When `series` (one value per step) first satisfies `pred`.
template <typename Pred>
std::optional<double> first_time(const Series& s, Pred pred) {
  for (const auto& p : s.points) {
    if (pred(p.v)) return p.t;
  }
  return std::nullopt;
}

}  // namespace triage::tsdb
