// Playbook 1: why training stopped while the job kept running. Power is the ground truth: GPUs
// spinning in a stuck collective report high utilisation at idle-level power; computing GPUs draw
// active-level power; a dead node reports nothing (or 0 W).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"

namespace triage::tsdb {

namespace {

enum class Level { kUnknown, kDead, kIdle, kMid, kActive };

const char* level_name(Level l) {
  switch (l) {
    case Level::kDead:
      return "no power";
    case Level::kIdle:
      return "idle-level";
    case Level::kMid:
      return "between idle and active";
    case Level::kActive:
      return "active";
    case Level::kUnknown:
      break;
  }
  return "unknown";
}

struct GpuState {
  std::string host;
  std::string gpu;
  double power = kNaN;
  double util = kNaN;
  double base = kNaN;  // p90 power while training, before the hang
  Level level = Level::kUnknown;
};

Level classify(const GpuThresholds& g, double power, double util, double base) {
  if (!std::isfinite(power)) return Level::kUnknown;
  if (power <= g.dead_max_w && !(util > g.util_low_pct)) return Level::kDead;
  if (g.has_power_levels()) {
    if (power <= g.idle_level_max_w) return Level::kIdle;
    if (power >= g.active_min_w) return Level::kActive;
    return Level::kMid;
  }
  // No levels for this model: compare with what the same GPU drew while it was training.
  if (std::isfinite(base) && base > 0) {
    if (power <= 0.55 * base) return Level::kIdle;
    if (power >= 0.8 * base) return Level::kActive;
    return Level::kMid;
  }
  return Level::kUnknown;
}

std::string levels_note(const GpuThresholds& g) {
  if (!g.has_power_levels())
    return "no power levels known for this GPU model; judged against each GPU's own training power";
  std::string s = g.model + ": idle-level ≤ " + fmt_watts(g.idle_level_max_w) + ", active ≥ " +
                  fmt_watts(g.active_min_w);
  if (std::isfinite(g.power_active_w)) s += " (training ~" + fmt_watts(g.power_active_w);
  if (std::isfinite(g.power_busy_wait_w)) s += ", busy-wait ~" + fmt_watts(g.power_busy_wait_w);
  if (std::isfinite(g.power_active_w)) s += ")";
  return s;
}

}  // namespace

PlaybookResult run_hang(Context& ctx) {
  PlaybookResult r = new_playbook("hang");
  const auto& d = ctx.disc;
  const auto& g = ctx.gpu;
  auto* ev = &r.evidence;

  std::optional<double> hs = ctx.req.last_step_time ? ctx.req.last_step_time : d.last_step_change;
  const double he = d.end;
  if (!hs) {
    r.verdict = "inconclusive";
    r.summary = "No hang start: neither the log nor tb_step says when the last step completed.";
    return r;
  }
  const double start = std::max(*hs, d.start);
  r.window_start = start;
  r.window_end = he;
  if (he - start < 3 * d.scrape_s) {
    r.verdict = "inconclusive";
    r.summary = "The hang window (" + fmt_time(start) + " to " + fmt_time(he) +
                ") is shorter than three scrapes.";
    return r;
  }
  // GPUs take a moment to settle into the polling loop after the last step.
  const double settle = std::min(60.0, (he - start) / 4);
  const std::string w = dur(he - start - settle);

  std::map<std::string, GpuState> gpus;
  if (d.has("hw_gpu_power_watts")) {
    for (const auto& s : ctx.q.instant(
             "avg_over_time(" + ctx.scope.sel("hw_gpu_power_watts") + "[" + w + "])", he, ev)) {
      auto& st = gpus[host_gpu(ctx.scope, s.labels)];
      st.host = ctx.scope.host_of(s.labels);
      st.gpu = gpu_of(s.labels);
      st.power = s.point.v;
    }
    if (start - d.start >= 2 * d.scrape_s) {
      const std::string b = dur(std::min(1800.0, start - d.start));
      for (const auto& s : ctx.q.instant(
               "quantile_over_time(0.9, " + ctx.scope.sel("hw_gpu_power_watts") + "[" + b + "])",
               start, ev)) {
        auto it = gpus.find(host_gpu(ctx.scope, s.labels));
        if (it != gpus.end()) it->second.base = s.point.v;
      }
    }
  }
  const bool have_util = d.has("ray_node_gpus_utilization");
  if (have_util) {
    for (const auto& s : ctx.q.instant(
             "avg_over_time(" + ctx.scope.sel("ray_node_gpus_utilization") + "[" + w + "])", he,
             ev)) {
      const std::string key = host_gpu(ctx.scope, s.labels);
      auto it = gpus.find(key);
      if (it != gpus.end()) {
        it->second.util = s.point.v;
      } else if (gpu_of(s.labels).empty()) {
        // Host-level utilisation: applies to each of the host's GPUs.
        const std::string host = ctx.scope.host_of(s.labels);
        for (auto& [k, st] : gpus) {
          if (st.host == host) st.util = s.point.v;
        }
      } else {
        auto& st = gpus[key];
        st.host = ctx.scope.host_of(s.labels);
        st.gpu = gpu_of(s.labels);
        st.util = s.point.v;
      }
    }
  }

  // Who still reported at the end of the window: a dead node stops being scraped.
  const std::string probe =
      d.has("hw_scrape_duration_seconds") ? "hw_scrape_duration_seconds" : "hw_gpu_power_watts";
  const double tail = std::max(3 * d.scrape_s, (he - start) / 4);
  std::map<std::string, double> reporting;
  if (d.has(probe)) {
    reporting = by_host(
        ctx.scope, ctx.q.instant(by_host_sum(ctx.scope, "count_over_time(" + ctx.scope.sel(probe) +
                                                            "[" + dur(tail) + "])"),
                                 he, ev));
  }

  std::vector<std::string> dead_hosts, live_hosts;
  std::map<std::string, std::vector<GpuState*>> per_host;
  for (auto& [k, st] : gpus) {
    st.level = classify(g, st.power, st.util, st.base);
    per_host[st.host].push_back(&st);
  }
  for (const auto& h : d.hosts) {
    const bool silent = d.has(probe) && reporting.count(h) == 0;
    auto it = per_host.find(h);
    const bool all_dead = it != per_host.end() && !it->second.empty() &&
                          std::all_of(it->second.begin(), it->second.end(),
                                      [](const GpuState* s) { return s->level == Level::kDead; });
    if (silent || all_dead || it == per_host.end()) {
      dead_hosts.push_back(h);
    } else {
      live_hosts.push_back(h);
    }
  }

  // The evidence table: one row per host, GPU counts per level.
  EvidenceTable t;
  t.title = "GPU power and utilisation, " + fmt_time(start) + " to " + fmt_time(he);
  t.columns = {"Host",   "GPUs", "Power (hang)", "Utilisation (hang)", "Power before (p90)",
               "Reading"};
  for (const auto& h : d.hosts) {
    auto it = per_host.find(h);
    std::vector<double> p, u, b;
    std::map<Level, int> n;
    if (it != per_host.end()) {
      for (const auto* s : it->second) {
        p.push_back(s->power);
        u.push_back(s->util);
        b.push_back(s->base);
        ++n[s->level];
      }
    }
    std::string reading;
    if (std::find(dead_hosts.begin(), dead_hosts.end(), h) != dead_hosts.end()) {
      reading = reporting.count(h) == 0 && d.has(probe) ? "stopped reporting" : "no power draw";
    } else {
      for (const auto& [lvl, cnt] : n) {
        if (!reading.empty()) reading += ", ";
        reading += std::to_string(cnt) + " " + level_name(lvl);
      }
    }
    auto range_of = [](const std::vector<double>& v, auto f) {
      std::vector<double> x;
      for (double e : v) {
        if (std::isfinite(e)) x.push_back(e);
      }
      if (x.empty()) return std::string("–");
      const auto [mn, mx] = std::minmax_element(x.begin(), x.end());
      return *mn == *mx || std::abs(*mx - *mn) < 1 ? f(mean(x)) : f(*mn) + "–" + f(*mx);
    };
    t.rows.push_back({h, std::to_string(it == per_host.end() ? 0 : it->second.size()),
                      range_of(p, fmt_watts), range_of(u, fmt_pct), range_of(b, fmt_watts),
                      reading});
  }
  r.tables.push_back(std::move(t));
  r.notes.push_back("power levels: " + levels_note(g));

  auto symptom = [&](const std::string& text) {
    Anomaly a{.time = start,
              .metric = "hw_gpu_power_watts",
              .domain = "gpu",
              .kind = "symptom",
              .text = text};
    r.anomalies.push_back(a);
  };

  // 1. Dead nodes: the rest hang waiting for them.
  if (!dead_hosts.empty()) {
    if (live_hosts.empty()) {
      r.verdict = "inconclusive";
      r.summary =
          "No host reported GPU metrics during the hang window; the metrics pipeline itself may "
          "have died.";
      return r;
    }
    r.verdict = "node-death";
    r.hosts = dead_hosts;
    r.summary = list_names(dead_hosts) + " stopped" +
                " reporting (or drew no power) during the hang while " +
                std::to_string(live_hosts.size()) +
                " other host(s) stayed up: the survivors were left waiting in a collective for the "
                "dead node(s).";
    for (const auto& h : dead_hosts) {
      Anomaly a{.time = start, .host = h, .metric = probe, .domain = "node", .kind = "cause"};
      double last = 0;
      if (d.has(probe)) {
        for (const auto& s : ctx.q.raw(ctx.scope.sel_hosts(probe, {h}), he, he - d.start, ev)) {
          if (!s.points.empty()) last = std::max(last, s.points.back().t);
        }
      }
      if (last > 0) a.time = last;
      a.text = last > 0 ? h + " stopped reporting metrics (last sample " + fmt_time(last) + ")"
                        : h + " drew no GPU power during the hang";
      r.findings.push_back({"critical", a.text, {h}, a.time});
      r.anomalies.push_back(a);
    }
    // What the dead nodes' hardware said before they went silent.
    for (const char* m :
         {"hw_dmesg_gpu_errors_total", "hw_gpu_ras_umc_ue_total", "hw_gpu_ras_xgmi_ue_total",
          "hw_gpu_ras_gfx_ue_total", "hw_gpu_pcie_fatal_total"}) {
      for (const auto& s : ctx.nonzero_increase(m, ev)) {
        const std::string h = ctx.scope.host_of(s.labels);
        if (std::find(dead_hosts.begin(), dead_hosts.end(), h) == dead_hosts.end()) continue;
        r.findings.push_back({"critical",
                              std::string(m) + " rose by " + fmt(s.point.v, 0) + " on " +
                                  host_gpu(ctx.scope, s.labels) + " during the job",
                              {h},
                              std::nullopt});
      }
    }
    r.next_steps.push_back(
        "Check the dead node(s) " + list_names(dead_hosts) +
        ": kernel log (slurm-triage kernel), BMC/IPMI event log, and the hardware playbook below.");
    r.next_steps.push_back("Resubmit excluding " + list_names(dead_hosts) + " (sbatch --exclude).");
    return r;
  }

  size_t n_known = 0, n_active = 0, n_idle = 0, n_mid = 0;
  for (const auto& [k, st] : gpus) {
    if (st.level == Level::kUnknown) continue;
    ++n_known;
    n_active += st.level == Level::kActive;
    n_idle += st.level == Level::kIdle || st.level == Level::kDead;
    n_mid += st.level == Level::kMid;
  }
  if (n_known == 0) {
    r.verdict = "inconclusive";
    r.summary = d.has("hw_gpu_power_watts")
                    ? "GPU power could not be judged (no power levels for this GPU model and no "
                      "training baseline)."
                    : "The TSDB has no hw_gpu_power_watts, the ground truth for a hang.";
    return r;
  }

  // 2. Everyone still computing: training was not hung (or the window is wrong).
  if (static_cast<double>(n_active) >= 0.9 * static_cast<double>(n_known)) {
    r.verdict = "not-a-hang";
    r.summary = std::to_string(n_active) + " of " + std::to_string(n_known) +
                " GPUs drew active-level power during the supposed hang: training was still "
                "running. Re-check the "
                "triage classification (a slow step, or a log that stopped being written).";
    r.next_steps.push_back(
        "Compare the TSDB's tb_step with the log: if tb_step kept advancing, the log stopped, not "
        "training.");
    return r;
  }

  // 3. A straggler: some hosts still compute while the others wait for them.
  std::vector<std::string> active_hosts, idle_hosts;
  for (const auto& [h, list] : per_host) {
    size_t a = 0, i = 0;
    for (const auto* s : list) {
      a += s->level == Level::kActive;
      i += s->level == Level::kIdle;
    }
    if (a * 2 > list.size()) active_hosts.push_back(h);
    if (i * 2 > list.size()) idle_hosts.push_back(h);
  }
  if (!active_hosts.empty() && !idle_hosts.empty()) {
    if (active_hosts.size() <= idle_hosts.size()) {
      r.verdict = "straggler";
      r.hosts = active_hosts;
      r.summary = list_names(active_hosts) + " kept drawing active-level power while " +
                  std::to_string(idle_hosts.size()) +
                  " host(s) sat at idle-level: the others were waiting for them. The slow host(s) "
                  "are the suspects.";
      for (const auto& h : active_hosts) {
        Anomaly a{.time = start,
                  .host = h,
                  .metric = "hw_gpu_power_watts",
                  .domain = "gpu",
                  .kind = "cause",
                  .text = h + " still computing while the rest waited (straggler)"};
        r.anomalies.push_back(a);
      }
      r.next_steps.push_back(
          "Look at " + list_names(active_hosts) +
          ": GPU clocks and temperature (thermal throttling), CPU contention (hw_procs_running), "
          "and its RDMA links.");
      return r;
    }
    r.findings.push_back({"warning",
                          list_names(idle_hosts) + " sat at idle-level while most hosts computed",
                          idle_hosts, start});
  }
  if (n_mid * 2 > n_known) {
    r.verdict = "inconclusive";
    r.summary =
        "Most GPUs drew power between the idle and active levels; the readings do not separate a "
        "busy-wait from "
        "slow work. " +
        levels_note(g) + ".";
    return r;
  }

  // 4. Idle-level power: spinning (busy-wait) or really idle.
  std::vector<std::string> spinning;
  size_t with_util = 0;
  for (const auto& [k, st] : gpus) {
    if (!std::isfinite(st.util)) continue;
    ++with_util;
    if ((st.level == Level::kIdle) && st.util >= g.util_high_pct)
      spinning.push_back(st.host + ":" + st.gpu);
  }
  if (have_util && with_util > 0 && spinning.empty()) {
    r.verdict = "idle-hang";
    r.summary =
        "The GPUs were idle (idle-level power, low utilisation), not spinning in a collective: the "
        "processes "
        "were stuck outside the GPU (data pipeline, I/O, a Python-level deadlock).";
    symptom("GPU power fell to idle-level and utilisation to near zero when training stopped");
    r.next_steps.push_back(
        "If the job is still live, take Python stack traces (py-spy dump) of the trainers; check "
        "hw_procs_blocked and I/O pressure at the hang start.");
    return r;
  }
  std::vector<std::string> spin_hosts;
  for (const auto& s : spinning)
    add_unique(spin_hosts, s.substr(0, s.rfind(':')));
  r.gpus = spinning;
  r.hosts = spin_hosts;
  std::string who;
  if (!have_util || with_util == 0) {
    who = "All " + std::to_string(n_idle) +
          " GPUs drew idle-level power (no utilisation metric to confirm the spin)";
    r.notes.push_back(
        "ray_node_gpus_utilization is missing: the busy-wait is inferred from power alone");
  } else if (spinning.size() == with_util) {
    who = "All " + std::to_string(spinning.size()) + " GPUs on " +
          std::to_string(spin_hosts.size()) +
          " host(s) reported high utilisation at idle-level power";
  } else {
    who = std::to_string(spinning.size()) + " of " + std::to_string(with_util) + " GPUs (" +
          list_names(spinning, 12) +
          ") reported high utilisation at idle-level power, the rest sat idle: a partial deadlock "
          "where only the GPUs "
          "that entered the collective spin";
  }

  const auto net =
      find_network_events(ctx, start - ctx.th.network.lead_s, start + 2 * d.scrape_s, ev);
  if (!net.empty()) {
    r.verdict = "network-triggered-hang";
    std::vector<std::string> nh;
    for (const auto& e : net)
      add_unique(nh, e.host);
    r.hosts = nh;
    r.summary = who + ". " + net.front().what + " on " + net.front().host +
                (net.front().device.empty() ? "" : " (" + net.front().device + ")") + " began at " +
                fmt_time(net.front().time) +
                ", before training stopped: a network event stalled a collective and every rank "
                "then waited in it.";
    for (const auto& e : net) {
      Anomaly a{.time = e.time,
                .host = e.host,
                .gpu = e.device,
                .metric = e.metric,
                .domain = "network",
                .kind = "cause"};
      a.text = e.what + " on " + e.host + (e.device.empty() ? "" : " " + e.device) +
               (e.amount > 0 ? " (+" + fmt(e.amount, 0) + " in the window, baseline " +
                                   fmt_rate(e.baseline) + ")"
                             : "");
      r.findings.push_back({"critical", a.text, {e.host}, e.time});
      r.anomalies.push_back(a);
    }
    r.next_steps.push_back(
        "Check the links named above (ethtool -S, RDMA port counters, switch logs); run the "
        "network "
        "playbook's exclusion list before resubmitting.");
  } else {
    r.verdict = "busy-wait-hang";
    r.summary =
        who +
        ", with no network errors before the stall: a collective (RCCL/NCCL) busy-wait deadlock.";
    r.next_steps.push_back(
        "Cancel the job (scancel) and resubmit with NCCL_DEBUG=INFO to see the stuck collective if "
        "it recurs.");
  }
  symptom(
      "GPU power fell to idle-level while utilisation stayed high (busy-wait) when training "
      "stopped");
  r.next_steps.push_back(
      "Heartbeat timeouts do not detect hangs; watch step progress instead (a step-progress "
      "monitor).");
  return r;
}

}  // namespace triage::tsdb
