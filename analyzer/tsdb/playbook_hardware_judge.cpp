// Playbook 4's judgement: hardware and driver faults from hardware counters only (never from
// training metrics), plus temperature; and the monitoring's own health: ghost data (a collection
// loop stuck while the old values keep being served) and the amdgpu CPER driver fault (the GPU
// plugin timing out intermittently at ~12 s while power samples go missing).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_hardware.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

const CounterSpec& spec_of(const std::string& metric) {
  for (const auto& c : hardware_counters()) {
    if (metric == c.metric) return c;
  }
  throw std::logic_error("not a hardware counter: " + metric);
}

struct Judging {
  const HardwareMetrics& m;
  HardwareJudgement out;
  EvidenceTable table;
  std::vector<std::string> fault_hosts, driver_hosts;

  void verdict(HardwareVerdict v) {
    v.source_trusted = m.source_trusted;
    out.verdicts.push_back(std::move(v));
  }
};

HardwareVerdict component_verdict(const std::string& host, const std::string& component,
                                  const char* verdict, const char* action) {
  HardwareVerdict v;
  v.host = host;
  v.component = component;
  v.verdict = verdict;
  v.action = action;
  return v;
}

// Uncorrectable errors are a bad part (drain); correctable ones at a high rate are a part
// degrading (watch); a few correctable ones are just accumulating.
void judge_counters(Judging& j, const GpuThresholds& g) {
  auto& r = j.out.result;
  const double hours = std::max((j.m.end - j.m.start) / 3600, 1.0 / 60);
  for (const auto& c : j.m.counters) {
    const CounterSpec& spec = spec_of(c.metric);
    const double per_hour = c.increase / hours;
    const std::string component = c.gpu.empty() ? "gpu" : "gpu " + c.gpu;
    const std::string on = c.gpu.empty() ? c.host : cat(c.host, " GPU ", c.gpu);
    std::string reading = "accumulating";
    if (spec.fatal) {
      reading = "hardware fault";
      add_unique(j.fault_hosts, c.host);
      const std::string where = c.gpu.empty() ? c.host : cat(c.host, ":", c.gpu);
      add_unique(r.gpus, where);
      HardwareVerdict v = component_verdict(c.host, component, "hardware-fault", "drain");
      v.reason = cat(fmt(c.increase, 0), " ", spec.what, " on ", on);
      v.metric = c.metric;
      v.value = c.increase;
      v.first_seen = c.first_seen;
      j.verdict(v);
      r.anomalies.push_back(Anomaly{.time = c.first_seen.value_or(j.m.end),
                                    .host = c.host,
                                    .gpu = c.gpu,
                                    .metric = c.metric,
                                    .domain = "hardware",
                                    .text = cat(spec.what, " on ", where)});
    } else if (per_hour >= g.ce_per_hour_watch || c.metric == "hw_gpu_pcie_nonfatal_total") {
      reading = "degrading";
      HardwareVerdict v = component_verdict(c.host, component, "degrading", "watch");
      v.reason = cat(fmt(c.increase, 0), " ", spec.what, " (", fmt(per_hour, 0), "/h) on ", on);
      v.metric = c.metric;
      v.value = c.increase;
      v.first_seen = c.first_seen;
      j.verdict(v);
    }
    j.table.rows.push_back({c.host, c.gpu.empty() ? "–" : c.gpu, c.metric, fmt(c.increase, 0),
                            c.first_seen ? fmt_time(*c.first_seen) : "–", reading});
  }
}

double value_or(const std::map<std::string, double>& m, const std::string& key, double fallback) {
  auto it = m.find(key);
  return it == m.end() ? fallback : it->second;
}

// Driver errors in dmesg, and a GPU plugin that times out or loses samples.
void judge_host_health(Judging& j, const MonitoringThresholds& mt) {
  auto& r = j.out.result;
  const auto& m = j.m;
  for (const auto& h : m.hosts) {
    const double sf = value_or(m.slow_fraction, h, 0);
    const bool intermittent =
        sf >= mt.intermittent_min_fraction && value_or(m.fast_fraction, h, 1) >= 0.1;
    const bool always_slow = sf >= 0.9;
    const bool near_timeout =
        m.scrape_p90.count(h) != 0 && std::abs(m.scrape_p90.at(h) - mt.scrape_timeout_s) <= 2;
    const bool gappy = m.power_gaps.count(h) != 0 && m.power_gaps.at(h) >= mt.gap_fraction;
    const bool errors = m.dmesg_errors.count(h) != 0;
    if (!errors && !intermittent && !always_slow && !gappy) continue;
    std::vector<std::string> signs;
    if (errors) signs.push_back(fmt(m.dmesg_errors.at(h), 0) + " GPU/driver errors in dmesg");
    if (intermittent) {
      signs.push_back(
          "the GPU plugin timed out on " + fmt_pct(100 * sf) + " of scrapes" +
          (near_timeout ? " (~" + fmt(mt.scrape_timeout_s, 0) + " s, the plugin's timeout)" : "") +
          " and succeeded fast on the rest");
    } else if (always_slow) {
      signs.push_back("every GPU scrape was slow (" + fmt_pct(100 * sf) + ")");
    }
    if (gappy) signs.push_back(fmt_pct(100 * m.power_gaps.at(h)) + " of GPU power samples missing");
    if (errors) {
      add_unique(j.driver_hosts, h);
      HardwareVerdict v =
          component_verdict(h, "amdgpu driver", "driver-fault", "reboot-at-job-boundary");
      v.reason = join(signs, "; ");
      v.metric = "hw_dmesg_gpu_errors_total";
      v.value = m.dmesg_errors.at(h);
      j.verdict(v);
      r.anomalies.push_back(Anomaly{.time = m.start,
                                    .host = h,
                                    .metric = "hw_dmesg_gpu_errors_total",
                                    .domain = "hardware",
                                    .text = "GPU driver errors on " + h});
    }
    r.add_finding(errors ? Severity::kWarning : Severity::kInfo, h + ": " + join(signs, "; "), {h},
                  std::nullopt);
    j.table.rows.push_back({h, "–",
                            errors ? "hw_dmesg_gpu_errors_total" : "hw_scrape_duration_seconds",
                            errors ? fmt(m.dmesg_errors.at(h), 0) : fmt_pct(100 * sf) + " slow",
                            "–", errors ? "driver fault" : "monitoring degraded"});
  }
}

void judge_ports(Judging& j) {
  for (const auto& p : j.m.ports_down) {
    add_unique(j.fault_hosts, p.host);
    HardwareVerdict v = component_verdict(p.host, "rdma " + p.device, "link-fault", "drain");
    v.reason = "RDMA port " + p.device + " left the ACTIVE state during the job";
    v.metric = "hw_rdma_port_state";
    j.verdict(v);
    j.table.rows.push_back({p.host, p.device, "hw_rdma_port_state", "0", "–", "link down"});
    j.out.result.anomalies.push_back(
        Anomaly{.time = std::min(j.m.end, p.first_down.value_or(j.m.end)),
                .host = p.host,
                .gpu = p.device,
                .metric = "hw_rdma_port_state",
                .domain = "network",
                .text = "RDMA port " + p.device + " on " + p.host + " went down"});
  }
}

// A thermal excursion within 15 minutes before the failure counts as the fault.
void judge_heat(Judging& j, const GpuThresholds& g) {
  auto& r = j.out.result;
  for (const auto& hot : j.m.hot_gpus) {
    Anomaly a{.time = std::min(j.m.end, hot.first_hot.value_or(j.m.end)),
              .host = hot.host,
              .gpu = hot.gpu,
              .metric = "hw_gpu_temperature_celsius",
              .domain = "hardware"};
    a.text = cat(hot.host, ":", hot.gpu, " reached ", fmt(hot.max_c, 0), " °C (throttling above ",
                 fmt(g.temp_throttle_c, 0), " °C)");
    r.anomalies.push_back(a);
    r.add_finding(Severity::kWarning, a.text, {hot.host}, a.time);
    const bool before_crash =
        j.m.failure_time && a.time <= *j.m.failure_time && *j.m.failure_time - a.time <= 900;
    HardwareVerdict v = component_verdict(hot.host, "cooling (gpu " + hot.gpu + ")",
                                          before_crash ? "hardware-fault" : "degrading", "watch");
    v.reason = a.text + (before_crash ? ", within 15 minutes before the failure" : "");
    v.metric = "hw_gpu_temperature_celsius";
    v.value = hot.max_c;
    v.first_seen = a.time;
    j.verdict(v);
    if (before_crash) add_unique(j.fault_hosts, hot.host);
    j.table.rows.push_back({hot.host, hot.gpu, "hw_gpu_temperature_celsius",
                            fmt(hot.max_c, 0) + " °C", fmt_time(a.time), "thermal excursion"});
  }
}

void judge_ghosts(Judging& j) {
  auto& r = j.out.result;
  for (const auto& gh : j.m.ghosts) {
    double total = 0;
    for (const auto& iv : gh.intervals)
      total += iv.end - iv.start;
    std::string text = gh.host + ": hw_scrape_duration_seconds flat-lined for " +
                       format_duration(total) + " (from " + fmt_time(gh.intervals.front().start) +
                       "): the exporter's collection loop was stuck and every hw_* value "
                       "of that host in that time is ghost data";
    if (gh.power_flat) text += " (GPU power held the exact same value too)";
    r.add_finding(Severity::kWarning, text, {gh.host}, gh.intervals.front().start);
    const bool at_failure =
        j.m.failure_time &&
        std::any_of(gh.intervals.begin(), gh.intervals.end(),
                    [&](const Interval& iv) { return iv.contains(*j.m.failure_time); });
    if (at_failure) {
      r.notes.push_back(gh.host +
                        "'s hw_* data at the failure time is ghost data: its hardware readings "
                        "then are not real");
    }
  }
}

void conclude(Judging& j) {
  auto& r = j.out.result;
  const auto& hosts = j.m.hosts;
  std::vector<std::string> named = j.fault_hosts;
  for (const auto& h : j.driver_hosts)
    add_unique(named, h);
  const size_t clean = hosts.size() - std::min(hosts.size(), named.size());
  if (!j.fault_hosts.empty()) {
    r.verdict = "hardware-fault";
    r.hosts = j.fault_hosts;
    r.summary = "Hardware counters name " + list_names(r.gpus.empty() ? j.fault_hosts : r.gpus) +
                ": see the table. The other " + std::to_string(clean) + " host(s) are clean.";
    r.next_steps.push_back(
        "Drain " + list_names(j.fault_hosts) +
        " for hardware service (scontrol update nodename=... state=drain reason=...).");
  } else if (!j.driver_hosts.empty()) {
    r.verdict = "driver-fault";
    r.hosts = j.driver_hosts;
    r.summary = list_names(j.driver_hosts) + " logged GPU driver errors; the other " +
                std::to_string(clean) +
                " host(s) logged none. On AMD Instinct this is the CPER/RAS sysfs bug: monitoring "
                "breaks and unkillable D-state processes pile up, while training itself keeps "
                "working.";
    r.next_steps.push_back(
        "Reboot " + list_names(j.driver_hosts) +
        " at the next job boundary (D-state processes cannot be cleared otherwise); collect "
        "uname -r, /sys/module/amdgpu/version and the dmesg call stacks for the admins.");
  } else {
    r.verdict = "no-hardware-fault";
    r.summary =
        "No uncorrectable RAS error, PCIe fatal error, GPU driver error or RDMA link loss on any "
        "of the " +
        std::to_string(hosts.size()) + " hosts during the job.";
  }
}

}  // namespace

const std::vector<CounterSpec>& hardware_counters() {
  static const std::vector<CounterSpec> counters = {
      {"hw_gpu_ras_umc_ue_total", "uncorrectable HBM ECC errors", true},
      {"hw_gpu_ras_xgmi_ue_total", "uncorrectable XGMI link errors", true},
      {"hw_gpu_ras_gfx_ue_total", "uncorrectable compute-engine errors", true},
      {"hw_gpu_ras_mmhub_ue_total", "uncorrectable memory-hub errors", true},
      {"hw_gpu_ras_sdma_ue_total", "uncorrectable SDMA errors", true},
      {"hw_gpu_pcie_fatal_total", "PCIe fatal errors", true},
      {"hw_gpu_pcie_nonfatal_total", "PCIe non-fatal errors", false},
      {"hw_gpu_ras_umc_ce_total", "correctable HBM ECC errors", false},
      {"hw_gpu_ras_xgmi_ce_total", "correctable XGMI link errors", false},
      {"hw_gpu_ras_gfx_ce_total", "correctable compute-engine errors", false},
      {"hw_gpu_ras_mmhub_ce_total", "correctable memory-hub errors", false},
      {"hw_gpu_ras_sdma_ce_total", "correctable SDMA errors", false},
      {"hw_gpu_pcie_correctable_total", "PCIe correctable errors", false},
  };
  return counters;
}

bool worth_first_seen(const CounterSpec& c, double per_hour, const GpuThresholds& g) {
  return c.fatal || per_hour >= g.ce_per_hour_watch;
}

HardwareJudgement judge_hardware(const HardwareMetrics& m, const GpuThresholds& g,
                                 const MonitoringThresholds& mt) {
  Judging j{m, {new_playbook("hardware"), {}}, {}, {}, {}};
  j.out.result.window_start = m.start;
  j.out.result.window_end = m.end;
  j.table.title = "Hardware counters that rose during the job (increase over " +
                  format_duration(m.end - m.start) + ")";
  j.table.columns = {"Host", "GPU / device", "Counter", "Increase", "First seen", "Reading"};
  judge_counters(j, g);
  judge_host_health(j, mt);
  judge_ports(j);
  judge_heat(j, g);
  judge_ghosts(j);
  if (j.table.rows.size() > 32) j.table.rows.resize(32);
  if (!j.table.rows.empty()) j.out.result.tables.push_back(std::move(j.table));
  conclude(j);
  return std::move(j.out);
}

}  // namespace triage::tsdb
