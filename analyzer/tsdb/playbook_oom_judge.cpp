// Playbook 3's judgement: the shape of host memory on the way to an OOM kill. A steady ramp is a
// leak; a spike at a checkpoint step is the save copying parameters to host RAM (DP replica 0
// only); every host at once points at the data pipeline or a recompilation.
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_oom.h"
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

bool in_checkpoint(const OomMetrics& m, double t) {
  return std::any_of(m.checkpoints.begin(), m.checkpoints.end(),
                     [&](const Interval& i) { return i.contains(t); });
}

// Pearson correlation of memory with time: near 1 for a steady ramp.
double ramp_correlation(const std::vector<Point>& p) {
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
  return stt > 0 && svv > 0 ? stv / std::sqrt(stt * svv) : 0;
}

// Spikes: a rise of at least `spike_rise` within `spike_window`, peaking at a local maximum.
std::vector<Spike> find_spikes(const std::vector<Point>& p, double spike_rise, double spike_window,
                               const OomMetrics& m) {
  std::vector<Spike> spikes;
  for (size_t i = 0; i < p.size(); ++i) {
    double low = p[i].v;
    for (size_t j = i; j-- > 0 && p[i].t - p[j].t <= spike_window;)
      low = std::min(low, p[j].v);
    const double rise = p[i].v - low;
    if (rise < spike_rise) continue;
    const bool local_max =
        (i + 1 == p.size() || p[i + 1].v <= p[i].v) && (i == 0 || p[i - 1].v <= p[i].v);
    if (!local_max) continue;
    if (!spikes.empty() && p[i].t - spikes.back().t < spike_window) {
      if (rise > spikes.back().rise) spikes.back() = {p[i].t, rise, false, false};
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
    sp.checkpoint = in_checkpoint(m, p[i].t) || in_checkpoint(m, p[i].t - spike_window / 2);
    spikes.push_back(sp);
  }
  return spikes;
}

Shape analyse(const HostMemory& mem, double total, const HostThresholds& ht, const OomMetrics& m) {
  Shape sh;
  sh.host = mem.host;
  sh.total = total;
  std::vector<Point> p;
  for (const auto& x : mem.used) {
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
  sh.slope_r = ramp_correlation(p);
  sh.spikes = find_spikes(p, ht.spike_rise_pct / 100, ht.spike_window_s, m);
  return sh;
}

// Without a checkpoint period from the log, regularly spaced spikes that recover are the
// checkpoint saves' signature.
void infer_checkpoint_spikes(std::vector<Shape>& shapes, PlaybookResult& r) {
  for (auto& sh : shapes) {
    if (sh.spikes.size() < 3) continue;
    std::vector<double> gaps;
    for (size_t i = 1; i < sh.spikes.size(); ++i)
      gaps.push_back(sh.spikes[i].t - sh.spikes[i - 1].t);
    const double med = median(gaps);
    const bool periodic = med > 0 && std::all_of(gaps.begin(), gaps.end(), [&](double x) {
                            return std::abs(x - med) <= 0.25 * med;
                          });
    if (!periodic) continue;
    for (auto& sp : sh.spikes)
      sp.checkpoint = true;
    r.notes.push_back(sh.host + ": memory spikes recur every ~" + format_duration(med) +
                      " (checkpoint saves, inferred: the log gave no checkpoint_period)");
  }
}

// Each host's trajectory, the OOM-killed hosts first, then the fullest.
std::vector<Shape> shapes_of(const OomMetrics& m, const HostThresholds& ht, PlaybookResult& r) {
  std::vector<Shape> shapes;
  for (const auto& mem : m.memory) {
    double total = m.totals.count(mem.host) != 0 ? m.totals.at(mem.host) : kNaN;
    if (!(total > 0)) {
      double mx = 0;
      for (const auto& p : mem.used)
        mx = std::max(mx, p.v);
      total = mx;  // without a total, shapes are judged relative to the host's own peak
    }
    if (!(total > 0)) continue;
    shapes.push_back(analyse(mem, total, ht, m));
  }
  if (m.checkpoints.empty()) infer_checkpoint_spikes(shapes, r);
  if (m.totals.empty())
    r.notes.push_back(
        "ray_node_mem_total is missing: memory is judged against each host's own peak");
  std::sort(shapes.begin(), shapes.end(), [&](const Shape& a, const Shape& b) {
    const bool ka = m.kills.count(a.host) != 0, kb = m.kills.count(b.host) != 0;
    if (ka != kb) return ka;
    return a.peak > b.peak;
  });
  return shapes;
}

EvidenceTable memory_table(const OomMetrics& m, const std::vector<Shape>& shapes) {
  EvidenceTable t;
  t.title = "Host memory, " + fmt_time(m.start) + " to " + fmt_time(m.end);
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
    std::string ctxcell;
    if (auto it = m.around.find(sh.host); it != m.around.end()) {
      const auto& ar = it->second;
      if (ar.count("hw_mem_dirty_bytes") != 0) ctxcell += fmt_bytes(ar.at("hw_mem_dirty_bytes"));
      if (ar.count("hw_io_pressure_full_pct") != 0)
        ctxcell += (ctxcell.empty() ? "" : " / ") + fmt_pct(ar.at("hw_io_pressure_full_pct"));
    }
    t.rows.push_back(
        {sh.host, m.kills.count(sh.host) != 0 ? fmt(m.kills.at(sh.host), 0) : "0",
         std::isfinite(sh.first) ? fmt_pct(100 * sh.first) : "–",
         std::isfinite(sh.peak) ? fmt_pct(100 * sh.peak) + " of " + fmt_bytes(sh.total) : "–",
         sh.peak_t > 0 ? fmt_time(sh.peak_t) : "–",
         std::to_string(sh.spikes.size()) + " (" + std::to_string(ck) + ")",
         ctxcell.empty() ? "–" : ctxcell});
  }
  if (t.rows.size() > 16) t.rows.resize(16);
  return t;
}

// What the verdict rests on: the host to explain and how its memory moved.
struct Focus {
  const Shape* f = nullptr;
  bool kills_seen = false;           // the OOM killer visited the focus host(s)
  std::vector<std::string> spiking;  // hosts with any spike
  bool subset = false;               // only some hosts spike: the DP-replica-0 pattern
  size_t ck_spikes = 0, recovered = 0;
  const Spike* last_spike = nullptr;
  double ramp_rise = 0;
  bool simultaneous = false;  // most hosts killed within a few scrapes: a job-wide cause
};

Focus focus_of(const OomMetrics& m, const std::vector<Shape>& shapes, PlaybookResult& r) {
  Focus fo;
  std::vector<const Shape*> focus;
  for (const auto& sh : shapes) {
    if (m.kills.count(sh.host) != 0) focus.push_back(&sh);
    if (!sh.spikes.empty()) fo.spiking.push_back(sh.host);
  }
  fo.kills_seen = !focus.empty();
  if (focus.empty()) focus.push_back(&shapes.front());
  for (const auto* f : focus)
    add_unique(r.hosts, f->host);
  fo.f = focus.front();
  fo.subset = !fo.spiking.empty() && fo.spiking.size() < shapes.size() && shapes.size() > 1;
  for (const auto& sp : fo.f->spikes) {
    fo.ck_spikes += sp.checkpoint;
    fo.recovered += sp.recovered;
  }
  fo.last_spike = fo.f->spikes.empty() ? nullptr : &fo.f->spikes.back();
  fo.ramp_rise = std::isfinite(fo.f->first) ? fo.f->peak - fo.f->first : 0;
  if (m.kills.size() >= 2 &&
      static_cast<double>(m.kills.size()) >= 0.8 * static_cast<double>(shapes.size())) {
    double lo = 1e300, hi = -1e300;
    for (const auto& [h, t0] : m.kill_time) {
      lo = std::min(lo, t0);
      hi = std::max(hi, t0);
    }
    fo.simultaneous = hi - lo <= 4 * m.step;
  }
  return fo;
}

void mem_anomaly(const Focus& fo, double when, const std::string& text, PlaybookResult& r) {
  r.anomalies.push_back(Anomaly{.time = when,
                                .host = fo.f->host,
                                .metric = "ray_node_mem_used",
                                .domain = "memory",
                                .kind = "cause",
                                .text = text});
}

void judge_all_hosts(const OomMetrics& m, size_t n_hosts, const Focus& fo, PlaybookResult& r) {
  r.verdict = "all-hosts";
  r.hosts.clear();
  for (const auto& [h, n] : m.kills)
    r.hosts.push_back(h);
  r.summary = "The OOM killer ran on " + std::to_string(m.kills.size()) + " of " +
              std::to_string(n_hosts) +
              " hosts at nearly the same time: a job-wide cause (data pipeline burst or an XLA "
              "recompilation allocating new buffers), not one host's checkpoint or leak.";
  mem_anomaly(fo, fo.f->peak_t, "host memory rose on every host at once", r);
  r.next_steps.push_back(
      "Look for recompilations (\"Compiling\" in the worker logs) and data-loader changes around " +
      fmt_time(fo.f->peak_t) + ".");
}

void judge_checkpoint_spike(const Focus& fo, PlaybookResult& r) {
  const Shape& f = *fo.f;
  const Spike& last = *fo.last_spike;
  r.verdict = "checkpoint-spike";
  r.summary =
      f.host + "'s memory jumped by " + fmt_pct(100 * last.rise) +
      " of RAM at the checkpoint save at " + fmt_time(last.t) + " (peak " + fmt_pct(100 * f.peak) +
      ")" +
      (fo.ck_spikes > 1
           ? "; earlier checkpoint saves spiked too and recovered (" +
                 std::to_string(fo.recovered) + " of " + std::to_string(f.spikes.size()) + ")"
           : "") +
      ": the save copies the parameters into host RAM, and this time it did not fit." +
      (fo.subset ? " Only " + list_names(fo.spiking) +
                       " spike at checkpoints (the DP replica 0 hosts that write the checkpoint)."
                 : "");
  mem_anomaly(fo, last.t, "host memory spike at a checkpoint save on " + f.host, r);
  r.next_steps.push_back(
      "Budget ~2x the model's size in host RAM on the checkpoint-writing (DP replica 0) hosts, or "
      "enable async checkpointing / fewer parameters per host; reduce per_device_batch_size.");
}

// A leak, a single burst, or no trajectory that explains a kill.
void judge_trajectory(const OomMetrics& m, const HostThresholds& ht, const Focus& fo,
                      PlaybookResult& r) {
  const Shape& f = *fo.f;
  if (fo.ramp_rise >= ht.ramp_min_rise_pct / 100 && f.slope_r >= 0.8) {
    r.verdict = "memory-leak-ramp";
    r.summary = f.host + "'s memory grew steadily from " + fmt_pct(100 * f.first) + " to " +
                fmt_pct(100 * f.peak) +
                " of RAM over the job without recovering: a leak (Python objects, data-pipeline "
                "buffers or a growing compilation cache).";
    mem_anomaly(fo, m.start, "steady host-memory growth on " + f.host, r);
    r.next_steps.push_back(
        "Profile host memory over steps (tracemalloc / memray) and check data-loader prefetch "
        "depths.");
  } else if (fo.last_spike != nullptr) {
    const Spike& last = *fo.last_spike;
    r.verdict = "single-spike";
    r.summary = f.host + "'s memory jumped by " + fmt_pct(100 * last.rise) + " of RAM at " +
                fmt_time(last.t) +
                ", outside any checkpoint save, from a flat baseline: a burst (data loading or a "
                "recompilation allocating new buffers).";
    mem_anomaly(fo, last.t, "host memory spike on " + f.host, r);
    r.next_steps.push_back("Check what ran at " + fmt_time(last.t) +
                           " (worker logs: compilations, data-loader messages).");
  } else if (fo.kills_seen || f.peak >= ht.mem_near_limit_pct / 100) {
    r.verdict = "inconclusive";
    r.summary = f.host + " reached " + fmt_pct(100 * f.peak) +
                " of RAM without a clear ramp or spike in the samples (the growth may have been "
                "faster than the scrape interval).";
  } else {
    r.verdict = "no-host-memory-pressure";
    r.summary = "Host memory peaked at " + fmt_pct(100 * f.peak) + " on " + f.host +
                " and the TSDB saw no OOM kill: the kill was probably a cgroup (job memory limit) "
                "OOM, or not an OOM.";
    r.next_steps.push_back(
        "Compare the job's memory limit (sacct -o ReqMem,MaxRSS) with the peak above.");
  }
}

// Checkpoint spikes that recovered, a writeback backlog or I/O pressure near the kill.
void context_findings(const OomMetrics& m, const HostThresholds& ht, const Focus& fo,
                      PlaybookResult& r) {
  const std::string& host = fo.f->host;
  const double at = m.failure_time.value_or(m.end);
  if (fo.ck_spikes > 0 && r.verdict != "checkpoint-spike") {
    r.add_finding(
        Severity::kInfo,
        std::to_string(fo.ck_spikes) + " memory spike(s) on " + host +
            " line up with checkpoint saves and recovered: expected, not an OOM precursor",
        {host}, std::nullopt);
  }
  auto it = m.around.find(host);
  if (it == m.around.end()) return;
  const auto& ar = it->second;
  if (ar.count("hw_mem_dirty_bytes") != 0 && ar.at("hw_mem_dirty_bytes") >= ht.dirty_high_bytes) {
    r.add_finding(Severity::kWarning,
                  "dirty pages on " + host + " reached " + fmt_bytes(ar.at("hw_mem_dirty_bytes")) +
                      " near the OOM (writeback backlog)",
                  {host}, at);
  }
  if (ar.count("hw_io_pressure_full_pct") != 0 &&
      ar.at("hw_io_pressure_full_pct") >= ht.io_pressure_high_pct) {
    r.add_finding(Severity::kWarning,
                  "I/O pressure on " + host + " reached " +
                      fmt_pct(ar.at("hw_io_pressure_full_pct")) + " near the OOM",
                  {host}, at);
  }
}

}  // namespace

PlaybookResult judge_oom(const OomMetrics& m, const HostThresholds& ht) {
  PlaybookResult r = new_playbook("oom");
  r.window_start = m.start;
  r.window_end = m.end;
  if (!m.have_memory) {
    r.verdict = "inconclusive";
    r.summary = "The TSDB has no ray_node_mem_used: the memory trajectory cannot be drawn.";
    for (const auto& [h, n] : m.kills)
      r.hosts.push_back(h);
    return r;
  }
  const std::vector<Shape> shapes = shapes_of(m, ht, r);
  r.tables.push_back(memory_table(m, shapes));
  if (shapes.empty()) {
    r.verdict = "inconclusive";
    r.summary = "No usable host-memory series in the window.";
    return r;
  }
  const Focus fo = focus_of(m, shapes, r);
  const double at = m.failure_time.value_or(m.end);
  for (const auto& [h, n] : m.kills) {
    r.anomalies.push_back(
        Anomaly{.time = m.kill_time.count(h) != 0 ? m.kill_time.at(h) : at,
                .host = h,
                .metric = "hw_oom_kills_total",
                .domain = "memory",
                .kind = "symptom",
                .text = "the OOM killer ran on " + h + " (" + fmt(n, 0) + " kill(s))"});
  }
  if (fo.simultaneous) {
    judge_all_hosts(m, shapes.size(), fo, r);
  } else if (fo.last_spike != nullptr && fo.last_spike->checkpoint && fo.ck_spikes >= 1) {
    judge_checkpoint_spike(fo, r);
  } else {
    judge_trajectory(m, ht, fo, r);
  }
  context_findings(m, ht, fo, r);
  return r;
}

}  // namespace triage::tsdb
