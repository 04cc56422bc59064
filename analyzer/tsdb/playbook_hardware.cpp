// Playbook 4: hardware and driver faults, from hardware counters only (RAS, PCIe AER, the kernel's
// GPU error count, RDMA port state) plus temperature; and the monitoring's own health: ghost data
// (a collection loop stuck while the old values keep being served) and the amdgpu CPER driver
// fault (the GPU plugin timing out intermittently at ~12 s while power samples go missing).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

struct CounterSpec {
  const char* metric;
  const char* what;
  bool fatal;  // a single increment means a bad part
};

constexpr CounterSpec kCounters[] = {
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

}  // namespace

PlaybookResult run_hardware(Context& ctx, std::vector<HardwareVerdict>& verdicts) {
  PlaybookResult r = new_playbook("hardware");
  const auto& d = ctx.disc;
  const auto& g = ctx.gpu;
  const auto& mt = ctx.th.monitoring;
  auto* ev = &r.evidence;
  r.window_start = d.start;
  r.window_end = d.end;
  const double span = d.end - d.start;
  const std::string w = "[" + dur(span) + "]";
  const double hours = std::max(span / 3600, 1.0 / 60);

  EvidenceTable t;
  t.title =
      "Hardware counters that rose during the job (increase over " + format_duration(span) + ")";
  t.columns = {"Host", "GPU / device", "Counter", "Increase", "First seen", "Reading"};
  std::vector<std::string> fault_hosts, driver_hosts;
  auto verdict = [&](HardwareVerdict v) {
    v.source_trusted = ctx.source_trusted;
    verdicts.push_back(std::move(v));
  };
  auto first_seen = [&](const std::string& metric, const Labels& labels) -> std::optional<double> {
    std::string extra;
    for (const char* k : {"gpu", "device", "port"}) {
      auto it = labels.find(k);
      if (it != labels.end()) extra += (extra.empty() ? "" : ",") + label_eq(k, it->second);
    }
    const double step = std::max(d.scrape_s, std::ceil(span / 720));
    for (const auto& s :
         ctx.q.range("increase(" + ctx.scope.sel_hosts(metric, {ctx.scope.host_of(labels)}, extra) +
                         "[" + dur(2 * step) + "]) > 0",
                     d.start, d.end, step, ev)) {
      if (!s.points.empty()) return s.points.front().t;
    }
    return std::nullopt;
  };

  size_t lookups = 0;
  for (const auto& c : kCounters) {
    for (const auto& s : ctx.nonzero_increase(c.metric, ev)) {
      const std::string host = ctx.scope.host_of(s.labels);
      const std::string gpu = gpu_of(s.labels);
      const double per_hour = s.point.v / hours;
      std::optional<double> seen;
      if ((c.fatal || per_hour >= g.ce_per_hour_watch) && lookups < 24) {
        ++lookups;
        seen = first_seen(c.metric, s.labels);
      }
      std::string reading;
      if (c.fatal) {
        reading = "hardware fault";
        add_unique(fault_hosts, host);
        const std::string where = gpu.empty() ? host : cat(host, ":", gpu);
        add_unique(r.gpus, where);
        HardwareVerdict v;
        v.host = host;
        v.component = gpu.empty() ? "gpu" : "gpu " + gpu;
        v.verdict = "hardware-fault";
        v.action = "drain";
        v.reason = cat(fmt(s.point.v, 0), " ", c.what, " on ",
                       gpu.empty() ? host : cat(host, " GPU ", gpu));
        v.metric = c.metric;
        v.value = s.point.v;
        v.first_seen = seen;
        verdict(v);
        Anomaly a{.time = seen.value_or(d.end),
                  .host = host,
                  .gpu = gpu,
                  .metric = c.metric,
                  .domain = "hardware",
                  .text = cat(c.what, " on ", where)};
        r.anomalies.push_back(a);
      } else if (per_hour >= g.ce_per_hour_watch ||
                 std::string(c.metric) == "hw_gpu_pcie_nonfatal_total") {
        reading = "degrading";
        HardwareVerdict v;
        v.host = host;
        v.component = gpu.empty() ? "gpu" : "gpu " + gpu;
        v.verdict = "degrading";
        v.action = "watch";
        v.reason = cat(fmt(s.point.v, 0), " ", c.what, " (", fmt(per_hour, 0), "/h) on ",
                       gpu.empty() ? host : cat(host, " GPU ", gpu));
        v.metric = c.metric;
        v.value = s.point.v;
        v.first_seen = seen;
        verdict(v);
      } else {
        reading = "accumulating";
      }
      t.rows.push_back({host, gpu.empty() ? "–" : gpu, c.metric, fmt(s.point.v, 0),
                        seen ? fmt_time(*seen) : "–", reading});
    }
  }

  // The kernel's GPU error count and the GPU plugin's timing on each host.
  std::map<std::string, double> dmesg;
  for (const auto& s : ctx.nonzero_increase("hw_dmesg_gpu_errors_total", ev)) {
    dmesg[ctx.scope.host_of(s.labels)] += s.point.v;
  }
  std::map<std::string, double> slow_frac, fast_frac, p90;
  if (d.has("hw_scrape_duration_seconds")) {
    const std::string x = ctx.scope.sel("hw_scrape_duration_seconds");
    const std::string sub = "[" + dur(span) + ":" + dur(d.scrape_s) + "]";
    slow_frac = by_host(ctx.scope,
                        ctx.q.instant(by_host_agg(ctx.scope, "max",
                                                  "avg_over_time((" + x + " > bool " +
                                                      fmt(mt.scrape_slow_s, 1) + ")" + sub + ")"),
                                      d.end, ev));
    fast_frac = by_host(ctx.scope,
                        ctx.q.instant(by_host_agg(ctx.scope, "max",
                                                  "avg_over_time((" + x + " < bool " +
                                                      fmt(mt.scrape_fast_s, 1) + ")" + sub + ")"),
                                      d.end, ev));
    p90 = by_host(ctx.scope, ctx.q.instant(by_host_agg(ctx.scope, "max",
                                                       "quantile_over_time(0.9, " + x + w + ")"),
                                           d.end, ev));
  }
  std::map<std::string, double> gaps;
  if (d.has("hw_gpu_power_watts") && d.has("hw_scrape_duration_seconds")) {
    auto power_n = by_host(
        ctx.scope, ctx.q.instant(by_host_agg(ctx.scope, "min",
                                             "count_over_time(" +
                                                 ctx.scope.sel("hw_gpu_power_watts") + w + ")"),
                                 d.end, ev));
    auto scrape_n = by_host(
        ctx.scope,
        ctx.q.instant(
            by_host_agg(ctx.scope, "max",
                        "count_over_time(" + ctx.scope.sel("hw_scrape_duration_seconds") + w + ")"),
            d.end, ev));
    for (const auto& [h, n] : scrape_n) {
      if (n > 0 && power_n.count(h) != 0) gaps[h] = std::max(0.0, 1 - power_n[h] / n);
    }
  }
  for (const auto& h : d.hosts) {
    const double sf = slow_frac.count(h) != 0 ? slow_frac[h] : 0;
    const double ff = fast_frac.count(h) != 0 ? fast_frac[h] : 1;
    const bool intermittent = sf >= mt.intermittent_min_fraction && ff >= 0.1;
    const bool always_slow = sf >= 0.9;
    const bool near_timeout = p90.count(h) != 0 && std::abs(p90[h] - mt.scrape_timeout_s) <= 2;
    const bool gappy = gaps.count(h) != 0 && gaps[h] >= mt.gap_fraction;
    const bool errors = dmesg.count(h) != 0;
    if (!errors && !intermittent && !always_slow && !gappy) continue;
    std::vector<std::string> signs;
    if (errors) signs.push_back(fmt(dmesg[h], 0) + " GPU/driver errors in dmesg");
    if (intermittent) {
      signs.push_back(
          "the GPU plugin timed out on " + fmt_pct(100 * sf) + " of scrapes" +
          (near_timeout ? " (~" + fmt(mt.scrape_timeout_s, 0) + " s, the plugin's timeout)" : "") +
          " and succeeded fast on the rest");
    } else if (always_slow) {
      signs.push_back("every GPU scrape was slow (" + fmt_pct(100 * sf) + ")");
    }
    if (gappy) signs.push_back(fmt_pct(100 * gaps[h]) + " of GPU power samples missing");
    if (errors) {
      add_unique(driver_hosts, h);
      HardwareVerdict v;
      v.host = h;
      v.component = "amdgpu driver";
      v.verdict = "driver-fault";
      v.action = "reboot-at-job-boundary";
      v.reason = join(signs, "; ");
      v.metric = "hw_dmesg_gpu_errors_total";
      v.value = dmesg[h];
      verdict(v);
      Anomaly a{.time = d.start,
                .host = h,
                .metric = "hw_dmesg_gpu_errors_total",
                .domain = "hardware",
                .text = "GPU driver errors on " + h};
      r.anomalies.push_back(a);
    }
    r.findings.push_back(
        {errors ? "warning" : "info", h + ": " + join(signs, "; "), {h}, std::nullopt});
    t.rows.push_back({h, "–", errors ? "hw_dmesg_gpu_errors_total" : "hw_scrape_duration_seconds",
                      errors ? fmt(dmesg[h], 0) : fmt_pct(100 * sf) + " slow", "–",
                      errors ? "driver fault" : "monitoring degraded"});
  }

  // RDMA links that went down, and temperatures.
  if (d.has("hw_rdma_port_state")) {
    for (const auto& s : ctx.q.instant(
             "min_over_time(" + ctx.scope.sel("hw_rdma_port_state") + w + ") == 0", d.end, ev)) {
      const std::string h = ctx.scope.host_of(s.labels);
      add_unique(fault_hosts, h);
      HardwareVerdict v;
      v.host = h;
      v.component = "rdma " + device_of(s.labels);
      v.verdict = "link-fault";
      v.action = "drain";
      v.reason = "RDMA port " + device_of(s.labels) + " left the ACTIVE state during the job";
      v.metric = "hw_rdma_port_state";
      verdict(v);
      t.rows.push_back({h, device_of(s.labels), "hw_rdma_port_state", "0", "–", "link down"});
      Anomaly a{.time = d.end, .host = h, .gpu = device_of(s.labels)};
      for (const auto& rs : ctx.q.range(
               ctx.scope.sel_hosts("hw_rdma_port_state", {h}, device_matcher(s.labels)) + " == 0",
               d.start, d.end, std::max(d.scrape_s, std::ceil(span / 1000)), ev)) {
        if (!rs.points.empty()) a.time = std::min(a.time, rs.points.front().t);
      }
      a.metric = "hw_rdma_port_state";
      a.domain = "network";
      a.text = "RDMA port " + device_of(s.labels) + " on " + h + " went down";
      r.anomalies.push_back(a);
    }
  }
  if (d.has("hw_gpu_temperature_celsius")) {
    for (const auto& s :
         ctx.q.instant("max_over_time(" + ctx.scope.sel("hw_gpu_temperature_celsius") + w + ") > " +
                           fmt(g.temp_throttle_c, 1),
                       d.end, ev)) {
      const std::string h = ctx.scope.host_of(s.labels);
      const std::string gpu = gpu_of(s.labels);
      Anomaly a{.time = d.end, .host = h, .gpu = gpu};
      for (const auto& rs : ctx.q.range(
               ctx.scope.sel_hosts("hw_gpu_temperature_celsius", {h}, label_eq("gpu", gpu)) +
                   " > " + fmt(g.temp_throttle_c, 1),
               d.start, d.end, std::max(d.scrape_s, std::ceil(span / 1000)), ev)) {
        if (!rs.points.empty()) a.time = std::min(a.time, rs.points.front().t);
      }
      a.metric = "hw_gpu_temperature_celsius";
      a.domain = "hardware";
      a.text = cat(h, ":", gpu, " reached ", fmt(s.point.v, 0), " °C (throttling above ",
                   fmt(g.temp_throttle_c, 0), " °C)");
      r.anomalies.push_back(a);
      r.findings.push_back({"warning", a.text, {h}, a.time});
      const bool before_crash = ctx.req.failure_time && a.time <= *ctx.req.failure_time &&
                                *ctx.req.failure_time - a.time <= 900;
      HardwareVerdict v;
      v.host = h;
      v.component = "cooling (gpu " + gpu + ")";
      v.verdict = before_crash ? "hardware-fault" : "degrading";
      v.action = "watch";
      v.reason = a.text + (before_crash ? ", within 15 minutes before the failure" : "");
      v.metric = "hw_gpu_temperature_celsius";
      v.value = s.point.v;
      v.first_seen = a.time;
      verdict(v);
      if (before_crash) add_unique(fault_hosts, h);
      t.rows.push_back({h, gpu, "hw_gpu_temperature_celsius", fmt(s.point.v, 0) + " °C",
                        fmt_time(a.time), "thermal excursion"});
    }
  }

  // Ghost data: the exporter kept serving stale values; nothing read from those intervals is real.
  for (const auto& [h, ivs] : d.ghost) {
    double total = 0;
    for (const auto& iv : ivs)
      total += iv.end - iv.start;
    std::string text = h + ": hw_scrape_duration_seconds flat-lined for " + format_duration(total) +
                       " (from " + fmt_time(ivs.front().start) +
                       "): the exporter's collection loop was stuck and every hw_* value "
                       "of that host in that time is ghost data";
    if (d.has("hw_gpu_power_watts")) {
      const Interval& iv = ivs.front();
      auto flat = ctx.q.instant("changes(" + ctx.scope.sel_hosts("hw_gpu_power_watts", {h}) + "[" +
                                    dur(iv.end - iv.start) + "]) == 0",
                                iv.end, ev);
      if (!flat.empty()) text += " (GPU power held the exact same value too)";
    }
    r.findings.push_back({"warning", text, {h}, ivs.front().start});
    if (ctx.req.failure_time && d.ghost_at(h, *ctx.req.failure_time)) {
      r.notes.push_back(h +
                        "'s hw_* data at the failure time is ghost data: its hardware readings "
                        "then are not real");
    }
  }
  if (t.rows.size() > 32) t.rows.resize(32);
  if (!t.rows.empty()) r.tables.push_back(std::move(t));

  std::vector<std::string> named = fault_hosts;
  for (const auto& h : driver_hosts)
    add_unique(named, h);
  const size_t clean = d.hosts.size() - std::min(d.hosts.size(), named.size());
  if (!fault_hosts.empty()) {
    r.verdict = "hardware-fault";
    r.hosts = fault_hosts;
    r.summary = "Hardware counters name " + list_names(r.gpus.empty() ? fault_hosts : r.gpus) +
                ": see the table. The other " + std::to_string(clean) + " host(s) are clean.";
    r.next_steps.push_back(
        "Drain " + list_names(fault_hosts) +
        " for hardware service (scontrol update nodename=... state=drain reason=...).");
  } else if (!driver_hosts.empty()) {
    r.verdict = "driver-fault";
    r.hosts = driver_hosts;
    r.summary = list_names(driver_hosts) + " logged GPU driver errors; the other " +
                std::to_string(clean) +
                " host(s) logged none. On AMD Instinct this is the CPER/RAS sysfs bug: monitoring "
                "breaks and unkillable "
                "D-state processes pile up, while training itself keeps working.";
    r.next_steps.push_back(
        "Reboot " + list_names(driver_hosts) +
        " at the next job boundary (D-state processes cannot "
        "be cleared otherwise); collect uname -r, /sys/module/amdgpu/version and the dmesg call "
        "stacks for the admins.");
  } else {
    r.verdict = "no-hardware-fault";
    r.summary =
        "No uncorrectable RAS error, PCIe fatal error, GPU driver error or RDMA link loss on any "
        "of the " +
        std::to_string(d.hosts.size()) + " hosts during the job.";
  }
  return r;
}

}  // namespace triage::tsdb
