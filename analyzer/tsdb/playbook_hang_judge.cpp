// Playbook 1's judgement. Power is the ground truth: GPUs spinning in a stuck collective report
// high utilisation at idle-level power; computing GPUs draw active-level power; a dead node
// reports nothing (or 0 W).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_hang.h"
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

Level classify(const GpuThresholds& g, const HangGpu& s) {
  if (!std::isfinite(s.power)) return Level::kUnknown;
  if (s.power <= g.dead_max_w && !(s.util > g.util_low_pct)) return Level::kDead;
  if (g.has_power_levels()) {
    if (s.power <= g.idle_level_max_w) return Level::kIdle;
    if (s.power >= g.active_min_w) return Level::kActive;
    return Level::kMid;
  }
  // No levels for this model: compare with what the same GPU drew while it was training.
  if (std::isfinite(s.base) && s.base > 0) {
    if (s.power <= 0.55 * s.base) return Level::kIdle;
    if (s.power >= 0.8 * s.base) return Level::kActive;
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

// The readings sorted by level, host and GPU: everything the verdict counts.
struct Reading {
  std::map<std::string, Level> level;                        // "host:gpu" -> level
  std::map<std::string, std::vector<std::string>> per_host;  // host -> its "host:gpu" keys
  std::vector<std::string> dead_hosts, live_hosts;
  size_t n_known = 0, n_active = 0, n_idle = 0, n_mid = 0;
  std::vector<std::string> active_hosts, idle_hosts;  // most of the host's GPUs at that level
  std::vector<std::string> spinning;                  // idle-level with high utilisation
  size_t with_util = 0;
};

void find_dead_hosts(const HangMetrics& m, Reading& rd) {
  for (const auto& h : m.hosts) {
    const bool silent = m.have_probe && m.reporting.count(h) == 0;
    auto it = rd.per_host.find(h);
    const bool all_dead = it != rd.per_host.end() && !it->second.empty() &&
                          std::all_of(it->second.begin(), it->second.end(), [&](const auto& k) {
                            return rd.level.at(k) == Level::kDead;
                          });
    (silent || all_dead || it == rd.per_host.end() ? rd.dead_hosts : rd.live_hosts).push_back(h);
  }
}

void count_levels(const HangMetrics& m, const GpuThresholds& g, Reading& rd) {
  for (const auto& [k, st] : m.gpus) {
    const Level l = rd.level.at(k);
    if (l != Level::kUnknown) {
      ++rd.n_known;
      rd.n_active += l == Level::kActive;
      rd.n_idle += l == Level::kIdle || l == Level::kDead;
      rd.n_mid += l == Level::kMid;
    }
    if (!std::isfinite(st.util)) continue;
    ++rd.with_util;
    if (l == Level::kIdle && st.util >= g.util_high_pct)
      rd.spinning.push_back(st.host + ":" + st.gpu);
  }
  for (const auto& [h, keys] : rd.per_host) {
    size_t a = 0, i = 0;
    for (const auto& k : keys) {
      a += rd.level.at(k) == Level::kActive;
      i += rd.level.at(k) == Level::kIdle;
    }
    if (a * 2 > keys.size()) rd.active_hosts.push_back(h);
    if (i * 2 > keys.size()) rd.idle_hosts.push_back(h);
  }
}

Reading read_gpus(const HangMetrics& m, const GpuThresholds& g) {
  Reading rd;
  for (const auto& [k, st] : m.gpus) {
    rd.level[k] = classify(g, st);
    rd.per_host[st.host].push_back(k);
  }
  find_dead_hosts(m, rd);
  count_levels(m, g, rd);
  return rd;
}

bool window_too_short(const HangMetrics& m) {
  return m.data_end - hang_window_start(m) < 3 * m.scrape_s;
}

// One row per host: GPU counts per level, power and utilisation ranges.
EvidenceTable hang_table(const HangMetrics& m, const Reading& rd, double start) {
  EvidenceTable t;
  t.title = "GPU power and utilisation, " + fmt_time(start) + " to " + fmt_time(m.data_end);
  t.columns = {"Host",   "GPUs", "Power (hang)", "Utilisation (hang)", "Power before (p90)",
               "Reading"};
  auto range_of = [](const std::vector<double>& v, auto f) {
    std::vector<double> x;
    std::copy_if(v.begin(), v.end(), std::back_inserter(x),
                 [](double e) { return std::isfinite(e); });
    if (x.empty()) return std::string("–");
    const auto [mn, mx] = std::minmax_element(x.begin(), x.end());
    return *mn == *mx || std::abs(*mx - *mn) < 1 ? f(mean(x)) : f(*mn) + "–" + f(*mx);
  };
  for (const auto& h : m.hosts) {
    auto it = rd.per_host.find(h);
    std::vector<double> p, u, b;
    std::map<Level, int> n;
    if (it != rd.per_host.end()) {
      for (const auto& k : it->second) {
        const HangGpu& s = m.gpus.at(k);
        p.push_back(s.power);
        u.push_back(s.util);
        b.push_back(s.base);
        ++n[rd.level.at(k)];
      }
    }
    std::string reading;
    if (std::find(rd.dead_hosts.begin(), rd.dead_hosts.end(), h) != rd.dead_hosts.end()) {
      reading = m.reporting.count(h) == 0 && m.have_probe ? "stopped reporting" : "no power draw";
    } else {
      for (const auto& [lvl, cnt] : n) {
        if (!reading.empty()) reading += ", ";
        reading += std::to_string(cnt) + " " + level_name(lvl);
      }
    }
    t.rows.push_back({h, std::to_string(it == rd.per_host.end() ? 0 : it->second.size()),
                      range_of(p, fmt_watts), range_of(u, fmt_pct), range_of(b, fmt_watts),
                      reading});
  }
  return t;
}

// Dead nodes: the rest hang waiting for them.
void judge_node_death(const HangMetrics& m, const Reading& rd, double start, PlaybookResult& r) {
  const auto& dead = rd.dead_hosts;
  r.verdict = "node-death";
  r.hosts = dead;
  r.summary = list_names(dead) + " stopped" +
              " reporting (or drew no power) during the hang while " +
              std::to_string(rd.live_hosts.size()) +
              " other host(s) stayed up: the survivors were left waiting in a collective for the "
              "dead node(s).";
  for (const auto& h : dead) {
    Anomaly a{.time = start, .host = h, .metric = m.probe, .domain = "node", .kind = "cause"};
    auto it = m.last_sample.find(h);
    const double last = it == m.last_sample.end() ? 0 : it->second;
    if (last > 0) a.time = last;
    a.text = last > 0 ? h + " stopped reporting metrics (last sample " + fmt_time(last) + ")"
                      : h + " drew no GPU power during the hang";
    r.add_finding(Severity::kCritical, a.text, {h}, a.time);
    r.anomalies.push_back(a);
  }
  // What the dead nodes' hardware said before they went silent.
  for (const auto& c : m.dead_host_errors) {
    r.add_finding(
        Severity::kCritical,
        c.metric + " rose by " + fmt(c.increase, 0) + " on " + c.where + " during the job",
        {c.host}, std::nullopt);
  }
  r.next_steps.push_back(
      "Check the dead node(s) " + list_names(dead) +
      ": kernel log (slurm-triage kernel), BMC/IPMI event log, and the hardware playbook below.");
  r.next_steps.push_back("Resubmit excluding " + list_names(dead) + " (sbatch --exclude).");
}

void judge_straggler(const Reading& rd, double start, PlaybookResult& r) {
  r.verdict = "straggler";
  r.hosts = rd.active_hosts;
  r.summary = list_names(rd.active_hosts) + " kept drawing active-level power while " +
              std::to_string(rd.idle_hosts.size()) +
              " host(s) sat at idle-level: the others were waiting for them. The slow host(s) "
              "are the suspects.";
  for (const auto& h : rd.active_hosts) {
    r.anomalies.push_back(
        Anomaly{.time = start,
                .host = h,
                .metric = "hw_gpu_power_watts",
                .domain = "gpu",
                .kind = "cause",
                .text = h + " still computing while the rest waited (straggler)"});
  }
  r.next_steps.push_back(
      "Look at " + list_names(rd.active_hosts) +
      ": GPU clocks and temperature (thermal throttling), CPU contention (hw_procs_running), "
      "and its RDMA links.");
}

// Who spins: the opening sentence of a busy-wait summary.
std::string spinners(const HangMetrics& m, const Reading& rd, size_t n_hosts, PlaybookResult& r) {
  if (!m.have_util || rd.with_util == 0) {
    r.notes.push_back(
        "ray_node_gpus_utilization is missing: the busy-wait is inferred from power alone");
    return "All " + std::to_string(rd.n_idle) +
           " GPUs drew idle-level power (no utilisation metric to confirm the spin)";
  }
  if (rd.spinning.size() == rd.with_util) {
    return "All " + std::to_string(rd.spinning.size()) + " GPUs on " + std::to_string(n_hosts) +
           " host(s) reported high utilisation at idle-level power";
  }
  return std::to_string(rd.spinning.size()) + " of " + std::to_string(rd.with_util) + " GPUs (" +
         list_names(rd.spinning, 12) +
         ") reported high utilisation at idle-level power, the rest sat idle: a partial deadlock "
         "where only the GPUs that entered the collective spin";
}

void judge_network_trigger(const HangMetrics& m, const std::string& who, PlaybookResult& r) {
  const NetEvent& first = m.network.front();
  r.verdict = "network-triggered-hang";
  std::vector<std::string> nh;
  for (const auto& e : m.network)
    add_unique(nh, e.host);
  r.hosts = nh;
  r.summary = who + ". " + first.what + " on " + first.host +
              (first.device.empty() ? "" : " (" + first.device + ")") + " began at " +
              fmt_time(first.time) +
              ", before training stopped: a network event stalled a collective and every rank "
              "then waited in it.";
  for (const auto& e : m.network) {
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
    r.add_finding(Severity::kCritical, a.text, {e.host}, e.time);
    r.anomalies.push_back(a);
  }
  r.next_steps.push_back(
      "Check the links named above (ethtool -S, RDMA port counters, switch logs); run the "
      "network playbook's exclusion list before resubmitting.");
}

// Idle-level power with high utilisation: a busy-wait, triggered by the network or not.
void judge_spin(const HangMetrics& m, const Reading& rd, PlaybookResult& r) {
  std::vector<std::string> spin_hosts;
  for (const auto& s : rd.spinning)
    add_unique(spin_hosts, s.substr(0, s.rfind(':')));
  r.gpus = rd.spinning;
  r.hosts = spin_hosts;
  const std::string who = spinners(m, rd, spin_hosts.size(), r);
  if (!m.network.empty()) {
    judge_network_trigger(m, who, r);
  } else {
    r.verdict = "busy-wait-hang";
    r.summary =
        who +
        ", with no network errors before the stall: a collective (RCCL/NCCL) busy-wait deadlock.";
    r.next_steps.push_back(
        "Cancel the job (scancel) and resubmit with NCCL_DEBUG=INFO to see the stuck collective if "
        "it recurs.");
  }
}

Anomaly symptom(double start, const std::string& text) {
  return Anomaly{.time = start,
                 .metric = "hw_gpu_power_watts",
                 .domain = "gpu",
                 .kind = "symptom",
                 .text = text};
}

// The verdicts that need no follow-up evidence and end the judgement: true when `r` is complete.
bool judge_plain_case(HangCase c, const HangMetrics& m, const Reading& rd, PlaybookResult& r) {
  switch (c) {
    case HangCase::kNobodyReported:
      r.verdict = "inconclusive";
      r.summary =
          "No host reported GPU metrics during the hang window; the metrics pipeline itself may "
          "have died.";
      return true;
    case HangCase::kNoReading:
      r.verdict = "inconclusive";
      r.summary = m.have_power ? "GPU power could not be judged (no power levels for this GPU "
                                 "model and no training baseline)."
                               : "The TSDB has no hw_gpu_power_watts, the ground truth for a hang.";
      return true;
    case HangCase::kNotAHang:
      r.verdict = "not-a-hang";
      r.summary = std::to_string(rd.n_active) + " of " + std::to_string(rd.n_known) +
                  " GPUs drew active-level power during the supposed hang: training was still "
                  "running. Re-check the triage classification (a slow step, or a log that "
                  "stopped being written).";
      r.next_steps.push_back(
          "Compare the TSDB's tb_step with the log: if tb_step kept advancing, the log stopped, "
          "not training.");
      return true;
    default:
      return false;
  }
}

}  // namespace

double hang_window_start(const HangMetrics& m) {
  return std::max(m.hang_start.value_or(m.data_start), m.data_start);
}

std::vector<std::string> hang_dead_hosts(const HangMetrics& m, const GpuThresholds& g) {
  return read_gpus(m, g).dead_hosts;
}

HangCase hang_case(const HangMetrics& m, const GpuThresholds& g) {
  if (!m.hang_start) return HangCase::kNoStart;
  if (window_too_short(m)) return HangCase::kShortWindow;
  const Reading rd = read_gpus(m, g);
  if (!rd.dead_hosts.empty())
    return rd.live_hosts.empty() ? HangCase::kNobodyReported : HangCase::kNodeDeath;
  if (rd.n_known == 0) return HangCase::kNoReading;
  if (static_cast<double>(rd.n_active) >= 0.9 * static_cast<double>(rd.n_known))
    return HangCase::kNotAHang;
  if (!rd.active_hosts.empty() && !rd.idle_hosts.empty() &&
      rd.active_hosts.size() <= rd.idle_hosts.size())
    return HangCase::kStraggler;
  if (rd.n_mid * 2 > rd.n_known) return HangCase::kMixedPower;
  if (m.have_util && rd.with_util > 0 && rd.spinning.empty()) return HangCase::kIdle;
  return HangCase::kSpin;
}

PlaybookResult judge_hang(const HangMetrics& m, const GpuThresholds& g) {
  PlaybookResult r = new_playbook("hang");
  const HangCase c = hang_case(m, g);
  if (c == HangCase::kNoStart) {
    r.verdict = "inconclusive";
    r.summary = "No hang start: neither the log nor tb_step says when the last step completed.";
    return r;
  }
  const double start = hang_window_start(m);
  r.window_start = start;
  r.window_end = m.data_end;
  if (c == HangCase::kShortWindow) {
    r.verdict = "inconclusive";
    r.summary = "The hang window (" + fmt_time(start) + " to " + fmt_time(m.data_end) +
                ") is shorter than three scrapes.";
    return r;
  }
  const Reading rd = read_gpus(m, g);
  r.tables.push_back(hang_table(m, rd, start));
  r.notes.push_back("power levels: " + levels_note(g));
  if (judge_plain_case(c, m, rd, r)) return r;
  if (c == HangCase::kNodeDeath) {
    judge_node_death(m, rd, start, r);
    return r;
  }
  if (c == HangCase::kStraggler) {
    judge_straggler(rd, start, r);
    return r;
  }
  if (!rd.active_hosts.empty() && !rd.idle_hosts.empty()) {
    r.add_finding(Severity::kWarning,
                  list_names(rd.idle_hosts) + " sat at idle-level while most hosts computed",
                  rd.idle_hosts, start);
  }
  if (c == HangCase::kMixedPower) {
    r.verdict = "inconclusive";
    r.summary =
        "Most GPUs drew power between the idle and active levels; the readings do not separate a "
        "busy-wait from slow work. " +
        levels_note(g) + ".";
    return r;
  }
  if (c == HangCase::kIdle) {
    r.verdict = "idle-hang";
    r.summary =
        "The GPUs were idle (idle-level power, low utilisation), not spinning in a collective: the "
        "processes were stuck outside the GPU (data pipeline, I/O, a Python-level deadlock).";
    r.anomalies.push_back(symptom(
        start, "GPU power fell to idle-level and utilisation to near zero when training stopped"));
    r.next_steps.push_back(
        "If the job is still live, take Python stack traces (py-spy dump) of the trainers; check "
        "hw_procs_blocked and I/O pressure at the hang start.");
    return r;
  }
  judge_spin(m, rd, r);
  r.anomalies.push_back(symptom(start,
                                "GPU power fell to idle-level while utilisation stayed high "
                                "(busy-wait) when training stopped"));
  r.next_steps.push_back(
      "Heartbeat timeouts do not detect hangs; watch step progress instead (a step-progress "
      "monitor).");
  return r;
}

}  // namespace triage::tsdb
