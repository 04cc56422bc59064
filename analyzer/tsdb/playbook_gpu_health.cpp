// Playbook 5's queries: per-GPU statistics over the training part of the job and the error
// counters that rose (playbook_gpu_health_judge.cpp decides).
#include <algorithm>

#include "analyzer/tsdb/playbook_gpu_health.h"

namespace triage::tsdb {

namespace {

void gather_vram(Context& ctx, GpuHealthMetrics& m, const std::string& w,
                 std::vector<QueryRecord>* ev) {
  const std::string used = ctx.scope.sel("hw_gpu_vram_used_bytes");
  const std::string total = ctx.scope.sel("hw_gpu_vram_total_bytes");
  const std::string used_over_total = "max_over_time(" + used + w + ") / on(" +
                                      ctx.scope.host_label() + ", gpu) max_over_time(" + total + w +
                                      ")";
  for (const auto& s : ctx.q.instant(used_over_total, m.end, ev))
    m.vram_pct[host_gpu(ctx.scope, s.labels)] = 100 * s.point.v;
  for (const auto& s : ctx.q.instant(cat("max(max_over_time(", used, w, "))"), m.end, ev))
    m.vram_used_max = s.point.v;
  for (const auto& s : ctx.q.instant(cat("max(max_over_time(", total, w, "))"), m.end, ev))
    m.vram_total = s.point.v;
}

void gather_errors(Context& ctx, GpuHealthMetrics& m, std::vector<QueryRecord>* ev) {
  for (const char* block : {"umc", "xgmi", "gfx", "mmhub", "sdma"}) {
    for (const char* kind : {"ce", "ue"}) {
      const std::string metric = std::string("hw_gpu_ras_") + block + "_" + kind + "_total";
      const auto k = std::string(kind) == "ce" ? GpuErrorRise::kRasCorrectable
                                               : GpuErrorRise::kRasUncorrectable;
      for (const auto& s : ctx.nonzero_increase(metric, ev)) {
        m.errors.push_back(
            {host_gpu(ctx.scope, s.labels), std::string(block) + " " + kind, k, s.point.v});
      }
    }
  }
  const std::pair<const char*, GpuErrorRise::Kind> pcie[] = {
      {"correctable", GpuErrorRise::kPcieCorrectable},
      {"nonfatal", GpuErrorRise::kPcieNonFatal},
      {"fatal", GpuErrorRise::kPcieFatal}};
  for (const auto& [name, kind] : pcie) {
    for (const auto& s : ctx.nonzero_increase(cat("hw_gpu_pcie_", name, "_total"), ev)) {
      m.errors.push_back({host_gpu(ctx.scope, s.labels), cat("pcie ", name), kind, s.point.v});
    }
  }
}

}  // namespace

GpuHealthMetrics gather_gpu_health(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  GpuHealthMetrics m;
  m.start = d.start;
  m.nodes = d.hosts.size();
  // The training part of the job: a hang's idle minutes would drag every average down.
  m.end = d.end;
  if (ctx.req.last_step_time && *ctx.req.last_step_time > d.start + 4 * d.scrape_s)
    m.end = std::min(m.end, *ctx.req.last_step_time);
  const std::string w = range_window(m.end - d.start);
  auto stats = [&](const std::string& metric, const std::string& extra) {
    std::map<std::string, GpuStat> out;
    if (!d.has(metric)) return out;
    const std::string sel = ctx.scope.sel(metric, extra);
    for (const auto& s : ctx.q.instant(cat("min_over_time(", sel, w, ")"), m.end, ev))
      out[host_gpu(ctx.scope, s.labels)].min = s.point.v;
    for (const auto& s : ctx.q.instant(cat("max_over_time(", sel, w, ")"), m.end, ev))
      out[host_gpu(ctx.scope, s.labels)].max = s.point.v;
    for (const auto& s : ctx.q.instant(cat("avg_over_time(", sel, w, ")"), m.end, ev))
      out[host_gpu(ctx.scope, s.labels)].avg = s.point.v;
    return out;
  };
  m.temp = stats("hw_gpu_temperature_celsius", "");
  m.power = stats("hw_gpu_power_watts", "");
  m.sclk = stats("hw_gpu_clock_mhz", "type=\"sclk\"");
  m.util = stats("ray_node_gpus_utilization", "");
  if (d.has("hw_gpu_vram_used_bytes") && d.has("hw_gpu_vram_total_bytes"))
    gather_vram(ctx, m, w, ev);
  gather_errors(ctx, m, ev);
  return m;
}

PlaybookResult run_gpu_health(Context& ctx) {
  std::vector<QueryRecord> evidence;
  const GpuHealthMetrics m = gather_gpu_health(ctx, &evidence);
  PlaybookResult r = judge_gpu_health(m, ctx.gpu);
  r.evidence = std::move(evidence);
  return r;
}

}  // namespace triage::tsdb
