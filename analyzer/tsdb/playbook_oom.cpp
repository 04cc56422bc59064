// Playbook 3: the shape of host memory on the way to an OOM kill. A steady ramp is a leak; a
// spike at a checkpoint step is the save copying parameters to host RAM (DP replica 0 only);
// every host at once points at the data pipeline or a recompilation.
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

struct Spike {
  double t = 0;     // peak time
  double rise = 0;  // fraction of total memory gained within the spike window
  bool recovered = false;
  bool checkpoint = false;
};

struct Shape {
  std::string host;
  double total = kNaN;
  double peak = kNaN;  // fraction of total
  double peak_t = 0;
  double first = kNaN, last = kNaN;
  double slope_r = 0;  // correlation of memory with time (ramp)
  std::vector<Spike> spikes;
};

Shape analyse(const std::string& host, const Series& s, double total, double spike_rise,
              double spike_window, const Discovery& d) {
  Shape sh;
  sh.host = host;
  sh.total = total;
  std::vector<Point> p;
  for (const auto& x : s.points) {
    if (std::isfinite(x.v)) p.push_back({x.t, x.v / total});
  }
  if (p.size() < 3) return sh;
  sh.first = p.front().v;
  sh.last = p.back().v;
  sh.peak = p.front().v;
  for (const auto& x : p) {
    if (x.v > sh.peak) {
      sh.peak = x.v;
      sh.peak_t = x.t;
    }
  }
  // Pearson correlation of memory with time: near 1 for a steady ramp.
  double mt = 0, mv = 0;
  for (const auto& x : p) {
    mt += x.t;
    mv += x.v;
  }
  mt /= static_cast<double>(p.size());
  mv /= static_cast<double>(p.size());
  double stv = 0, stt = 0, svv = 0;
  for (const auto& x : p) {
    stv += (x.t - mt) * (x.v - mv);
    stt += (x.t - mt) * (x.t - mt);
    svv += (x.v - mv) * (x.v - mv);
  }
  sh.slope_r = stt > 0 && svv > 0 ? stv / std::sqrt(stt * svv) : 0;
  // Spikes: a rise of at least `spike_rise` within `spike_window`, peaking at a local maximum.
  for (size_t i = 0; i < p.size(); ++i) {
    double low = p[i].v;
    for (size_t j = i; j-- > 0 && p[i].t - p[j].t <= spike_window;)
      low = std::min(low, p[j].v);
    const double rise = p[i].v - low;
    if (rise < spike_rise) continue;
    const bool local_max =
        (i + 1 == p.size() || p[i + 1].v <= p[i].v) && (i == 0 || p[i - 1].v <= p[i].v);
    if (!local_max) continue;
    if (!sh.spikes.empty() && p[i].t - sh.spikes.back().t < spike_window) {
      if (rise > sh.spikes.back().rise) sh.spikes.back() = {p[i].t, rise, false, false};
      continue;
    }
    Spike sp{p[i].t, rise, false, false};
    for (size_t k = i + 1; k < p.size(); ++k) {
      if (p[k].v <= p[i].v - rise / 2) {
        sp.recovered = true;
        break;
      }
    }
    // A checkpoint save shows up at (or a step after) the checkpoint step.
    sp.checkpoint = d.in_checkpoint(p[i].t) || d.in_checkpoint(p[i].t - spike_window / 2);
    sh.spikes.push_back(sp);
  }
  return sh;
}

}  // namespace

PlaybookResult run_oom(Context& ctx) {
  PlaybookResult r = new_playbook("oom");
  const auto& d = ctx.disc;
  const auto& ht = ctx.th.host;
  auto* ev = &r.evidence;
  const double end =
      ctx.req.failure_time ? std::min(d.end, *ctx.req.failure_time + 2 * d.scrape_s) : d.end;
  r.window_start = d.start;
  r.window_end = end;
  const std::string w = "[" + dur(end - d.start) + "]";

  // Which hosts the kernel's OOM killer visited, and when.
  std::map<std::string, double> kills;
  std::map<std::string, double> kill_time;
  if (d.has("hw_oom_kills_total")) {
    kills = by_host(
        ctx.scope,
        ctx.q.instant(
            by_host_sum(ctx.scope, "increase(" + ctx.scope.sel("hw_oom_kills_total") + w + ")") +
                " > 0",
            end, ev));
    if (!kills.empty()) {
      std::vector<std::string> hs;
      hs.reserve(kills.size());
      for (const auto& [h, n] : kills)
        hs.push_back(h);
      const double step = std::max(d.scrape_s, std::ceil((end - d.start) / 1000));
      for (const auto& s : ctx.q.range(
               by_host_sum(ctx.scope, "increase(" + ctx.scope.sel_hosts("hw_oom_kills_total", hs) +
                                          "[" + dur(2 * step) + "])") +
                   " > 0",
               d.start, end, step, ev)) {
        if (!s.points.empty()) kill_time[ctx.scope.host_of(s.labels)] = s.points.front().t;
      }
    }
  }
  if (!d.has("ray_node_mem_used")) {
    r.verdict = "inconclusive";
    r.summary = "The TSDB has no ray_node_mem_used: the memory trajectory cannot be drawn.";
    if (!kills.empty())
      r.hosts = [&] {
        std::vector<std::string> v;
        v.reserve(kills.size());
        for (const auto& [h, n] : kills)
          v.push_back(h);
        return v;
      }();
    return r;
  }
  std::map<std::string, double> totals;
  if (d.has("ray_node_mem_total")) {
    totals = by_host(
        ctx.scope,
        ctx.q.instant(by_host_agg(ctx.scope, "max",
                                  "max_over_time(" + ctx.scope.sel("ray_node_mem_total") + w + ")"),
                      end, ev));
  }
  const double step = std::max(d.scrape_s, std::ceil((end - d.start) / 720));
  auto series = ctx.q.range(by_host_agg(ctx.scope, "max", ctx.scope.sel("ray_node_mem_used")),
                            d.start, end, step, ev);
  std::vector<Shape> shapes;
  for (const auto& s : series) {
    const std::string h = ctx.scope.host_of(s.labels);
    double total = totals.count(h) != 0 ? totals.at(h) : kNaN;
    if (!(total > 0)) {
      double mx = 0;
      for (const auto& p : s.points)
        mx = std::max(mx, p.v);
      total = mx;  // without a total, shapes are judged relative to the host's own peak
    }
    if (!(total > 0)) continue;
    shapes.push_back(analyse(h, s, total, ht.spike_rise_pct / 100, ht.spike_window_s, d));
  }
  // Without a checkpoint period from the log, regularly spaced spikes that recover are the
  // checkpoint saves' signature.
  if (d.checkpoints.empty()) {
    for (auto& sh : shapes) {
      if (sh.spikes.size() < 3) continue;
      std::vector<double> gaps;
      for (size_t i = 1; i < sh.spikes.size(); ++i)
        gaps.push_back(sh.spikes[i].t - sh.spikes[i - 1].t);
      const double m = median(gaps);
      const bool periodic = m > 0 && std::all_of(gaps.begin(), gaps.end(), [&](double x) {
                              return std::abs(x - m) <= 0.25 * m;
                            });
      if (!periodic) continue;
      for (auto& sp : sh.spikes)
        sp.checkpoint = true;
      r.notes.push_back(sh.host + ": memory spikes recur every ~" + format_duration(m) +
                        " (checkpoint saves, inferred: the log gave no checkpoint_period)");
    }
  }
  if (totals.empty())
    r.notes.push_back(
        "ray_node_mem_total is missing: memory is judged against each host's own peak");

  // Context at the OOM (or the peak): dirty pages, writeback, I/O pressure, blocked processes.
  const double at = ctx.req.failure_time.value_or(end);
  std::map<std::string, std::map<std::string, double>> around;
  for (const char* m : {"hw_mem_dirty_bytes", "hw_mem_writeback_bytes", "hw_io_pressure_full_pct",
                        "hw_procs_blocked"}) {
    if (!d.has(m)) continue;
    for (const auto& s : ctx.q.instant(
             by_host_agg(ctx.scope, "max", "max_over_time(" + ctx.scope.sel(m) + "[300s])"),
             std::min(at, end), ev)) {
      around[ctx.scope.host_of(s.labels)][m] = s.point.v;
    }
  }
  if (d.has("hw_gpu_vram_used_bytes")) {
    for (const auto& s : ctx.q.instant(
             by_host_sum(ctx.scope,
                         "max_over_time(" + ctx.scope.sel("hw_gpu_vram_used_bytes") + w + ")"),
             end, ev)) {
      around[ctx.scope.host_of(s.labels)]["vram"] = s.point.v;
    }
  }

  std::sort(shapes.begin(), shapes.end(), [&](const Shape& a, const Shape& b) {
    const bool ka = kills.count(a.host) != 0, kb = kills.count(b.host) != 0;
    if (ka != kb) return ka;
    return a.peak > b.peak;
  });
  EvidenceTable t;
  t.title = "Host memory, " + fmt_time(d.start) + " to " + fmt_time(end);
  t.columns = {"Host",
               "OOM kills",
               "Start",
               "Peak",
               "Peak at",
               "Spikes (checkpoint)",
               "Dirty / I/O pressure at OOM"};
  for (const auto& sh : shapes) {
    size_t ck = 0;
    for (const auto& sp : sh.spikes)
      ck += sp.checkpoint;
    const auto& ar = around[sh.host];
    std::string ctxcell;
    if (ar.count("hw_mem_dirty_bytes") != 0) ctxcell += fmt_bytes(ar.at("hw_mem_dirty_bytes"));
    if (ar.count("hw_io_pressure_full_pct") != 0)
      ctxcell += (ctxcell.empty() ? "" : " / ") + fmt_pct(ar.at("hw_io_pressure_full_pct"));
    t.rows.push_back(
        {sh.host, kills.count(sh.host) != 0 ? fmt(kills.at(sh.host), 0) : "0",
         std::isfinite(sh.first) ? fmt_pct(100 * sh.first) : "–",
         std::isfinite(sh.peak) ? fmt_pct(100 * sh.peak) + " of " + fmt_bytes(sh.total) : "–",
         sh.peak_t > 0 ? fmt_time(sh.peak_t) : "–",
         std::to_string(sh.spikes.size()) + " (" + std::to_string(ck) + ")",
         ctxcell.empty() ? "–" : ctxcell});
  }
  if (t.rows.size() > 16) t.rows.resize(16);
  r.tables.push_back(std::move(t));

  if (shapes.empty()) {
    r.verdict = "inconclusive";
    r.summary = "No usable host-memory series in the window.";
    return r;
  }
  // The host(s) to explain: those the OOM killer visited, else the fullest.
  std::vector<const Shape*> focus;
  for (const auto& sh : shapes) {
    if (kills.count(sh.host) != 0) focus.push_back(&sh);
  }
  const bool kills_seen = !focus.empty();
  if (focus.empty()) focus.push_back(&shapes.front());
  for (const auto* f : focus)
    add_unique(r.hosts, f->host);

  for (const auto& [h, n] : kills) {
    Anomaly a{.time = kill_time.count(h) != 0 ? kill_time.at(h) : at,
              .host = h,
              .metric = "hw_oom_kills_total",
              .domain = "memory",
              .kind = "symptom",
              .text = "the OOM killer ran on " + h + " (" + fmt(n, 0) + " kill(s))"};
    r.anomalies.push_back(a);
  }

  // Which hosts spike at all: a strict subset is the DP-replica-0 checkpoint pattern.
  std::vector<std::string> spiking;
  for (const auto& sh : shapes) {
    if (!sh.spikes.empty()) spiking.push_back(sh.host);
  }
  const bool subset = !spiking.empty() && spiking.size() < shapes.size() && shapes.size() > 1;
  const Shape& f = *focus.front();
  size_t ck_spikes = 0, recovered = 0;
  for (const auto& sp : f.spikes) {
    ck_spikes += sp.checkpoint;
    recovered += sp.recovered;
  }
  const Spike* last_spike = f.spikes.empty() ? nullptr : &f.spikes.back();
  const double near_limit = ht.mem_near_limit_pct / 100;
  const double ramp_rise = std::isfinite(f.first) ? f.peak - f.first : 0;

  // All hosts within a couple of scrapes of each other: a job-wide cause.
  bool simultaneous = false;
  if (kills.size() >= 2 &&
      static_cast<double>(kills.size()) >= 0.8 * static_cast<double>(shapes.size())) {
    double lo = 1e300, hi = -1e300;
    for (const auto& [h, t0] : kill_time) {
      lo = std::min(lo, t0);
      hi = std::max(hi, t0);
    }
    simultaneous = hi - lo <= 4 * step;
  }

  auto mem_anomaly = [&](double when, const std::string& text) {
    Anomaly a{.time = when,
              .host = f.host,
              .metric = "ray_node_mem_used",
              .domain = "memory",
              .kind = "cause",
              .text = text};
    r.anomalies.push_back(a);
  };

  if (simultaneous) {
    r.verdict = "all-hosts";
    r.hosts.clear();
    for (const auto& [h, n] : kills)
      r.hosts.push_back(h);
    r.summary = "The OOM killer ran on " + std::to_string(kills.size()) + " of " +
                std::to_string(shapes.size()) +
                " hosts at nearly the same time: a job-wide cause (data pipeline burst or an XLA "
                "recompilation "
                "allocating new buffers), not one host's checkpoint or leak.";
    mem_anomaly(f.peak_t, "host memory rose on every host at once");
    r.next_steps.push_back(
        "Look for recompilations (\"Compiling\" in the worker logs) and data-loader changes "
        "around " +
        fmt_time(f.peak_t) + ".");
  } else if (last_spike != nullptr && last_spike->checkpoint && (ck_spikes >= 1)) {
    r.verdict = "checkpoint-spike";
    r.summary =
        f.host + "'s memory jumped by " + fmt_pct(100 * last_spike->rise) +
        " of RAM at the checkpoint save at " + fmt_time(last_spike->t) + " (peak " +
        fmt_pct(100 * f.peak) + ")" +
        (ck_spikes > 1
             ? "; earlier checkpoint saves spiked too and recovered (" + std::to_string(recovered) +
                   " of " + std::to_string(f.spikes.size()) + ")"
             : "") +
        ": the save copies the parameters into host RAM, and this time it did not fit." +
        (subset ? " Only " + list_names(spiking) +
                      " spike at checkpoints (the DP replica 0 hosts that write the checkpoint)."
                : "");
    mem_anomaly(last_spike->t, "host memory spike at a checkpoint save on " + f.host);
    r.next_steps.push_back(
        "Budget ~2x the model's size in host RAM on the checkpoint-writing (DP replica 0) hosts, "
        "or "
        "enable async checkpointing / fewer parameters per host; reduce per_device_batch_size.");
  } else if (ramp_rise >= ht.ramp_min_rise_pct / 100 && f.slope_r >= 0.8) {
    r.verdict = "memory-leak-ramp";
    r.summary = f.host + "'s memory grew steadily from " + fmt_pct(100 * f.first) + " to " +
                fmt_pct(100 * f.peak) +
                " of RAM over the job without recovering: a leak (Python objects, data-pipeline "
                "buffers or a growing "
                "compilation cache).";
    mem_anomaly(d.start, "steady host-memory growth on " + f.host);
    r.next_steps.push_back(
        "Profile host memory over steps (tracemalloc / memray) and check data-loader prefetch "
        "depths.");
  } else if (last_spike != nullptr) {
    r.verdict = "single-spike";
    r.summary = f.host + "'s memory jumped by " + fmt_pct(100 * last_spike->rise) + " of RAM at " +
                fmt_time(last_spike->t) +
                ", outside any checkpoint save, from a flat baseline: a burst (data loading or a "
                "recompilation allocating new buffers).";
    mem_anomaly(last_spike->t, "host memory spike on " + f.host);
    r.next_steps.push_back("Check what ran at " + fmt_time(last_spike->t) +
                           " (worker logs: compilations, data-loader messages).");
  } else if (kills_seen || f.peak >= near_limit) {
    r.verdict = "inconclusive";
    r.summary = f.host + " reached " + fmt_pct(100 * f.peak) +
                " of RAM without a clear ramp or spike in the samples "
                "(the growth may have been faster than the scrape interval).";
  } else {
    r.verdict = "no-host-memory-pressure";
    r.summary = "Host memory peaked at " + fmt_pct(100 * f.peak) + " on " + f.host +
                " and the TSDB saw no OOM kill: the kill was probably a cgroup (job memory limit) "
                "OOM, or not an OOM.";
    r.next_steps.push_back(
        "Compare the job's memory limit (sacct -o ReqMem,MaxRSS) with the peak above.");
  }
  if (ck_spikes > 0 && r.verdict != "checkpoint-spike") {
    r.findings.push_back(
        {"info",
         std::to_string(ck_spikes) + " memory spike(s) on " + f.host +
             " line up with checkpoint saves and recovered: expected, not an OOM precursor",
         {f.host},
         std::nullopt});
  }
  const auto& ar = around[f.host];
  if (ar.count("hw_mem_dirty_bytes") != 0 && ar.at("hw_mem_dirty_bytes") >= ht.dirty_high_bytes) {
    r.findings.push_back({"warning",
                          "dirty pages on " + f.host + " reached " +
                              fmt_bytes(ar.at("hw_mem_dirty_bytes")) +
                              " near the OOM (writeback backlog)",
                          {f.host},
                          at});
  }
  if (ar.count("hw_io_pressure_full_pct") != 0 &&
      ar.at("hw_io_pressure_full_pct") >= ht.io_pressure_high_pct) {
    r.findings.push_back({"warning",
                          "I/O pressure on " + f.host + " reached " +
                              fmt_pct(ar.at("hw_io_pressure_full_pct")) + " near the OOM",
                          {f.host},
                          at});
  }
  return r;
}

}  // namespace triage::tsdb
