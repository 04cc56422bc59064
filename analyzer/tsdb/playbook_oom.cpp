// Playbook 3's queries: host memory over the job, the OOM killer's visits, and the pressure around
// the kill (playbook_oom_judge.cpp decides).
#include <algorithm>
#include <cmath>

#include "analyzer/tsdb/playbook_oom.h"

namespace triage::tsdb {

namespace {

// Which hosts the kernel's OOM killer visited, and when.
void gather_kills(Context& ctx, OomMetrics& m, const std::string& w, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  m.kills = by_host(
      ctx.scope,
      ctx.q.instant(
          by_host_sum(ctx.scope, "increase(" + ctx.scope.sel("hw_oom_kills_total") + w + ")") +
              " > 0",
          m.end, ev));
  if (m.kills.empty()) return;
  std::vector<std::string> hs;
  hs.reserve(m.kills.size());
  for (const auto& [h, n] : m.kills)
    hs.push_back(h);
  const double step = std::max(d.scrape_s, std::ceil((m.end - d.start) / 1000));
  for (const auto& s : ctx.q.range(
           by_host_sum(ctx.scope, "increase(" + ctx.scope.sel_hosts("hw_oom_kills_total", hs) +
                                      "[" + dur(2 * step) + "])") +
               " > 0",
           d.start, m.end, step, ev)) {
    if (!s.points.empty()) m.kill_time[ctx.scope.host_of(s.labels)] = s.points.front().t;
  }
}

// Context at the OOM (or the peak): dirty pages, writeback, I/O pressure, blocked processes.
void gather_around(Context& ctx, OomMetrics& m, const std::string& w,
                   std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  const double at = m.failure_time.value_or(m.end);
  for (const char* metric : {"hw_mem_dirty_bytes", "hw_mem_writeback_bytes",
                             "hw_io_pressure_full_pct", "hw_procs_blocked"}) {
    if (!d.has(metric)) continue;
    for (const auto& s : ctx.q.instant(
             by_host_agg(ctx.scope, "max", "max_over_time(" + ctx.scope.sel(metric) + "[300s])"),
             std::min(at, m.end), ev)) {
      m.around[ctx.scope.host_of(s.labels)][metric] = s.point.v;
    }
  }
  if (d.has("hw_gpu_vram_used_bytes")) {
    for (const auto& s : ctx.q.instant(
             by_host_sum(ctx.scope,
                         "max_over_time(" + ctx.scope.sel("hw_gpu_vram_used_bytes") + w + ")"),
             m.end, ev)) {
      m.around[ctx.scope.host_of(s.labels)]["vram"] = s.point.v;
    }
  }
}

}  // namespace

OomMetrics gather_oom(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  OomMetrics m;
  m.failure_time = ctx.req.failure_time;
  m.start = d.start;
  m.end = m.failure_time ? std::min(d.end, *m.failure_time + 2 * d.scrape_s) : d.end;
  m.have_memory = d.has("ray_node_mem_used");
  for (const auto& [ck, iv] : d.checkpoints)
    m.checkpoints.push_back(iv);
  const std::string w = range_window(m.end - d.start);
  if (d.has("hw_oom_kills_total")) gather_kills(ctx, m, w, ev);
  if (!m.have_memory) return m;
  if (d.has("ray_node_mem_total")) {
    m.totals = by_host(
        ctx.scope,
        ctx.q.instant(by_host_agg(ctx.scope, "max",
                                  "max_over_time(" + ctx.scope.sel("ray_node_mem_total") + w + ")"),
                      m.end, ev));
  }
  m.step = std::max(d.scrape_s, std::ceil((m.end - d.start) / 720));
  for (auto& s : ctx.q.range(by_host_agg(ctx.scope, "max", ctx.scope.sel("ray_node_mem_used")),
                             d.start, m.end, m.step, ev)) {
    m.memory.push_back({ctx.scope.host_of(s.labels), std::move(s.points)});
  }
  gather_around(ctx, m, w, ev);
  return m;
}

PlaybookResult run_oom(Context& ctx) {
  std::vector<QueryRecord> evidence;
  const OomMetrics m = gather_oom(ctx, &evidence);
  PlaybookResult r = judge_oom(m, ctx.th.host);
  r.evidence = std::move(evidence);
  return r;
}

}  // namespace triage::tsdb
