#include "analyzer/tsdb/discovery.h"

#include <algorithm>
#include <cmath>

namespace triage::tsdb {

namespace {

// Metric-name families as the report groups them.
const char* const kFamilies[] = {"hw_gpu_",   "hw_tcp_",   "hw_rdma_", "hw_io_",
                                 "hw_mem_",   "hw_oom_",   "hw_net_",  "hw_procs_",
                                 "hw_dmesg_", "ray_node_", "tb_"};

double scrape_interval(Querier& q, const Scope& scope, const Discovery& d,
                       std::vector<QueryRecord>* sink) {
  for (const char* m :
       {"hw_scrape_duration_seconds", "hw_gpu_power_watts", "tb_step", "ray_node_mem_used", "up"}) {
    if (!d.has(m) || d.hosts.empty()) continue;
    const double window = std::min(d.end - d.start, 1800.0);
    auto raw = q.raw(scope.sel_hosts(m, {d.hosts.front()}), d.end, window, sink);
    std::vector<double> gaps;
    for (const auto& s : raw) {
      for (size_t i = 1; i < s.points.size(); ++i)
        gaps.push_back(s.points[i].t - s.points[i - 1].t);
    }
    if (gaps.size() >= 2) return std::clamp(median(gaps), 1.0, 300.0);
  }
  return 15;
}

void build_steps(Querier& q, const Scope& scope, const TsdbRequest& req, const Thresholds& th,
                 Discovery& d, TsdbResult& res, std::vector<QueryRecord>* sink) {
  if (!d.has("tb_step")) return;
  const double window = d.end - d.start;
  auto counts =
      q.instant("count_over_time(" + scope.sel("tb_step") + "[" + dur(window) + "])", d.end, sink);
  double best = -1;
  for (const auto& s : counts) {
    if (s.point.v > best) {
      best = s.point.v;
      d.tb_host = scope.host_of(s.labels);
    }
  }
  if (d.tb_host.empty()) return;
  std::vector<Series> steps;
  std::vector<Series> losses;
  std::vector<Series> fills;
  const std::string host_sel = scope.sel_hosts("tb_step", {d.tb_host});
  if (window / d.scrape_s <= 60000) {
    steps = q.raw(host_sel, d.end, window, sink);
    if (d.has("tb_learning_loss"))
      losses = q.raw(scope.sel_hosts("tb_learning_loss", {d.tb_host}), d.end, window, sink);
    if (d.has("tb_metrics_plugin_staleness_fill")) {
      fills = q.raw(scope.sel_hosts("tb_metrics_plugin_staleness_fill", {d.tb_host}), d.end, window,
                    sink);
    }
  } else {
    // Weeks of data: sample at the window resolution instead of reading every point.
    steps = q.range("max(" + host_sel + ")", d.start, d.end, d.resolution_s, sink);
  }
  if (steps.empty()) return;
  // Several series for one host (a restarted exporter with new labels): merge by time.
  std::vector<Point> pts;
  for (const auto& s : steps)
    pts.insert(pts.end(), s.points.begin(), s.points.end());
  std::sort(pts.begin(), pts.end(), [](const Point& a, const Point& b) { return a.t < b.t; });
  std::optional<int64_t> top;
  for (const auto& p : pts) {
    if (!std::isfinite(p.v)) continue;
    const auto step = static_cast<int64_t>(std::llround(p.v));
    if (!top || step > *top) {
      d.steps.push_back({p.t, step});
      top = step;
    }
  }
  if (!d.steps.empty()) d.last_step_change = d.steps.back().t;

  // Real-sample losses at the step marks (a sample is real when staleness_fill is 0 at its time).
  std::map<double, double> fill_at;
  for (const auto& s : fills) {
    for (const auto& p : s.points)
      fill_at[p.t] = p.v;
  }
  std::map<double, double> loss_at;
  for (const auto& s : losses) {
    for (const auto& p : s.points) {
      auto f = fill_at.find(p.t);
      if (f != fill_at.end() && f->second != 0) continue;
      loss_at[p.t] = p.v;
    }
  }
  std::vector<std::pair<int64_t, double>> step_losses;
  for (const auto& p : pts) {
    auto l = loss_at.find(p.t);
    if (l != loss_at.end())
      step_losses.emplace_back(static_cast<int64_t>(std::llround(p.v)), l->second);
  }
  check_guard(req, d, step_losses, res.guard);

  // Checkpoint windows: the save follows the checkpoint step, so the step after it is slow.
  if (req.checkpoint_period && *req.checkpoint_period > 0 && d.steps.size() >= 2) {
    const int64_t period = *req.checkpoint_period;
    std::vector<double> dts;
    for (size_t i = 1; i < d.steps.size(); ++i)
      dts.push_back(d.steps[i].t - d.steps[i - 1].t);
    const double typical = std::max(median(dts), d.scrape_s);
    const int slack = th.training.checkpoint_slack_steps + (req.async_checkpointing ? 2 : 0);
    for (const auto& s : d.steps) {
      if (s.step % period != 0) continue;
      const auto after = d.time_of_step(s.step + 1 + slack);
      const double end = after ? *after : s.t + typical * (2 + slack);
      d.checkpoints.emplace_back(s.step, Interval{s.t - d.scrape_s, end + d.scrape_s});
    }
  }
}

void find_ghost(Querier& q, const Scope& scope, const Thresholds& th, Discovery& d,
                std::vector<QueryRecord>* sink) {
  if (!d.has("hw_scrape_duration_seconds")) return;
  const double f = th.monitoring.flatline_s;
  if (d.end - d.start < f) return;
  const std::string x = scope.sel("hw_scrape_duration_seconds");
  const std::string expr = "(changes(" + x + "[" + dur(f) + "]) == 0) and (count_over_time(" + x +
                           "[" + dur(f) + "]) >= 3)";
  auto flat = q.range(expr, d.start + f, d.end, d.resolution_s, sink);
  for (const auto& s : flat) {
    std::vector<double> times;
    for (const auto& p : s.points)
      times.push_back(p.t);
    auto iv = runs_to_intervals(times, d.resolution_s, f);
    if (iv.empty()) continue;
    auto& dst = d.ghost[scope.host_of(s.labels)];
    dst.insert(dst.end(), iv.begin(), iv.end());
  }
}

}  // namespace

std::vector<Interval> runs_to_intervals(const std::vector<double>& times, double step,
                                        double lookback) {
  std::vector<Interval> out;
  for (double t : times) {
    if (!out.empty() && t - out.back().end <= step * 1.5) {
      out.back().end = t;
    } else {
      out.push_back({t - lookback, t});
    }
  }
  return out;
}

void check_guard(const TsdbRequest& req, const Discovery& d,
                 const std::vector<std::pair<int64_t, double>>& losses, TsdbResult::Guard& g) {
  g.log_step = req.last_step;
  g.log_loss = req.last_loss;
  if (!req.last_step) {
    g.status = "unverified";
    g.reason = "no last completed step from the log to compare with tb_step";
    return;
  }
  if (d.steps.empty()) {
    g.status = "unverified";
    g.reason = "the TSDB has no tb_step samples in the job window";
    return;
  }
  const int64_t n = *req.last_step;
  const int64_t lo = d.steps.front().step;
  const int64_t hi = d.steps.back().step;
  g.tsdb_step = hi;
  // Steps done within one scrape interval can be in the log but not yet in the TSDB.
  double step_time = req.step_time_s.value_or(0);
  if (!(step_time > 0) && d.steps.size() >= 2) {
    std::vector<double> dts;
    for (size_t i = 1; i < d.steps.size(); ++i) {
      const auto ds = d.steps[i].step - d.steps[i - 1].step;
      if (ds > 0) dts.push_back((d.steps[i].t - d.steps[i - 1].t) / static_cast<double>(ds));
    }
    step_time = median(dts);
  }
  int64_t tol = 2;
  if (step_time > 0 && std::isfinite(step_time)) {
    tol = std::max<int64_t>(2, static_cast<int64_t>(std::ceil(2 * d.scrape_s / step_time)));
  }
  if (hi > n + tol) {
    g.status = "mismatch";
    g.reason = "the TSDB saw training reach step " + std::to_string(hi) +
               ", beyond the log's last completed step " + std::to_string(n) +
               ": this is not the job's database (or not the job's log)";
    return;
  }
  if (n < lo - tol) {
    g.status = "mismatch";
    g.reason = "the TSDB's training starts at step " + std::to_string(lo) +
               ", after the log's last completed step " + std::to_string(n) +
               ": this is not the job's database";
    return;
  }
  if (n > hi + tol) {
    // The tb_* bridge is best-effort; a gap at the end is possible. Only a clearly different
    // training curve (the loss below) or a step range that cannot overlap counts as a mismatch.
    g.status = "unverified";
    g.reason = "tb_step stops at " + std::to_string(hi) + " while the log reached step " +
               std::to_string(n) + " (a gap in the tb_* bridge?); the step ranges overlap";
  } else {
    g.status = "match";
    g.reason = "tb_step reaches " + std::to_string(hi) + ", the log's last completed step is " +
               std::to_string(n);
  }
  if (auto t = d.time_of_step(n)) g.tsdb_step_time = *t;
  if (!req.last_loss) return;
  // The loss at the log's step, or at the closest earlier step the TSDB has.
  std::optional<std::pair<int64_t, double>> best;
  for (const auto& [step, loss] : losses) {
    if (step <= n && (!best || step >= best->first)) best = std::make_pair(step, loss);
  }
  if (!best) return;
  g.tsdb_loss = best->second;
  if (best->first != n) {
    g.reason +=
        "; loss compared at step " + std::to_string(best->first) + ", the nearest the TSDB has";
    if (n - best->first > tol) return;  // too far apart for the loss to be comparable
  }
  const double a = *req.last_loss;
  const double b = best->second;
  const bool same =
      (std::isnan(a) && std::isnan(b)) || std::abs(a - b) <= std::max(1e-3, 1e-3 * std::abs(a));
  if (!same && best->first == n) {
    g.status = "mismatch";
    g.reason = "at step " + std::to_string(n) + " the log's loss is " + fmt(a, 4) +
               " but tb_learning_loss is " + fmt(b, 4) + ": this is not the job's database";
  } else if (same) {
    g.reason += "; the loss agrees (" + fmt(a, 4) + ")";
  }
}

bool discover(Querier& q, Scope& scope, const TsdbRequest& req, const Thresholds& th,
              std::optional<double> data_min, std::optional<double> data_max, bool own_database,
              Discovery& d, TsdbResult& res, std::vector<QueryRecord>* sink) {
  // The window: the job's, clipped to what the TSDB holds.
  std::optional<double> lo = req.job_start;
  std::optional<double> hi = req.job_end ? req.job_end : req.failure_time;
  if (data_min) lo = lo ? std::max(*lo, *data_min) : *data_min;
  if (data_max) hi = hi ? std::min(*hi, *data_max) : *data_max;
  d.data_min = data_min;
  d.data_max = data_max;
  res.data_min = data_min;
  res.data_max = data_max;
  if (!lo || !hi) {
    res.notes.push_back(
        "no time window: the request has no job start/end and the source does not say what time it "
        "covers");
    return false;
  }
  if (*hi <= *lo) {
    res.notes.push_back("the TSDB (" + (data_min ? fmt_time(*data_min) : std::string("?")) +
                        " to " + (data_max ? fmt_time(*data_max) : std::string("?")) +
                        ") does not overlap the job's window (" +
                        (req.job_start ? fmt_time(*req.job_start) : std::string("?")) + " to " +
                        (req.job_end ? fmt_time(*req.job_end) : std::string("?")) + ")");
    res.guard.status = "mismatch";
    res.guard.reason = "no overlap between the TSDB's time range and the job's window";
    return false;
  }
  d.start = *lo;
  d.end = *hi;
  res.start = d.start;
  res.end = d.end;

  // Metric names and hosts present in the window.
  const std::string scoped = scope.matcher(req.hosts);
  const std::vector<std::string> name_match =
      scoped.empty() ? std::vector<std::string>{} : std::vector<std::string>{"{" + scoped + "}"};
  std::vector<std::string> names = q.labels("__name__", name_match, d.start, d.end, sink);
  if (names.empty() && own_database && !scoped.empty() && q.failures() == 0) {
    // Metrics, but none from the job's nodes: which nodes are there instead?
    std::vector<std::string> others;
    for (const auto& v : q.labels(scope.host_label(), {}, d.start, d.end, sink))
      add_unique(others, v);
    if (!others.empty()) {
      res.metric_count = q.labels("__name__", {}, d.start, d.end, sink).size();
      res.guard.status = "mismatch";
      res.guard.reason = "none of the job's nodes (" + list_names(req.hosts) +
                         ") appear in the TSDB, which holds " + list_names(others) +
                         ": this is not the job's database";
      res.refused = true;
      res.notes.push_back("refusing to diagnose: " + res.guard.reason);
      return false;
    }
  }
  if (names.empty()) {
    res.notes.push_back(q.failures() > 0 ? "could not list the TSDB's metrics: " + q.last_error()
                                         : "the TSDB holds no metrics between " +
                                               fmt_time(d.start) + " and " + fmt_time(d.end));
    return false;
  }
  d.metrics.insert(names.begin(), names.end());
  res.metric_count = names.size();
  for (const auto& n : names) {
    for (const char* f : kFamilies) {
      if (n.rfind(f, 0) == 0) ++res.families[f];
    }
  }

  const std::vector<std::string> host_match = {
      "{" + (scoped.empty() ? scope.host_label() + "=~\".+\"" : scoped) + "}"};
  std::vector<std::string> present;
  for (const auto& v : q.labels(scope.host_label(), host_match, d.start, d.end, sink)) {
    add_unique(present, scope.host_of({{scope.host_label(), v}}));
  }
  std::sort(present.begin(), present.end());
  std::vector<std::string> hosts;
  if (req.hosts.empty()) {
    hosts = present;
  } else {
    for (const auto& h : req.hosts) {
      if (std::find(present.begin(), present.end(), h) != present.end()) {
        hosts.push_back(h);
      } else {
        res.hosts_missing.push_back(h);
      }
    }
    for (const auto& h : present) {
      if (std::find(req.hosts.begin(), req.hosts.end(), h) == req.hosts.end())
        res.hosts_extra.push_back(h);
    }
  }
  if (hosts.empty()) {
    if (!req.hosts.empty() && !present.empty()) {
      res.guard.status = "mismatch";
      res.guard.reason = "none of the job's nodes (" + list_names(req.hosts) +
                         ") appear in the TSDB, which holds " + list_names(present);
      res.refused = true;
      res.notes.push_back("refusing to diagnose: " + res.guard.reason);
    } else {
      res.notes.push_back("no series carry a '" + scope.host_label() + "' label in the job window");
    }
    return false;
  }
  if (!res.hosts_missing.empty()) {
    res.notes.push_back(
        "no metrics at all from " + list_names(res.hosts_missing) +
        " (the job's Prometheus could not scrape them, or they died before the first scrape)");
  }
  scope.set_hosts(hosts);
  d.hosts = hosts;
  res.hosts = hosts;

  d.scrape_s = scrape_interval(q, scope, d, sink);
  res.scrape_interval_s = d.scrape_s;
  d.resolution_s = std::max(d.scrape_s, std::ceil((d.end - d.start) / 720.0));

  build_steps(q, scope, req, th, d, res, sink);
  if (res.guard.status == "mismatch") {
    res.refused = true;
    res.notes.push_back("refusing to diagnose: " + res.guard.reason);
    return false;
  }
  find_ghost(q, scope, th, d, sink);
  return true;
}

}  // namespace triage::tsdb
