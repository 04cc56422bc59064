// Playbook 7's queries: the tb_* bridge's samples of the host that maps steps to time
// (playbook_training_judge.cpp decides).
#include "analyzer/tsdb/playbook_training.h"

#include <cmath>

namespace triage::tsdb {

TrainingMetrics gather_training(Context& ctx, std::vector<QueryRecord>* ev) {
  const auto& d = ctx.disc;
  TrainingMetrics m;
  m.start = d.start;
  m.end = d.end;
  if (d.tb_host.empty() || d.steps.empty()) return m;
  m.tb_host = d.tb_host;
  m.first_step = d.steps.front().step;
  m.last_step = d.steps.back().step;
  for (const auto& [ck, iv] : d.checkpoints)
    m.checkpoint_windows.push_back(iv);
  m.checkpoint_period = ctx.req.checkpoint_period;
  m.async_checkpointing = ctx.req.async_checkpointing;
  const double window = d.end - d.start;
  m.long_job = window / d.scrape_s > 60000;
  m.have_fill = d.has("tb_metrics_plugin_staleness_fill");
  auto fetch = [&](const std::string& metric, Samples& into, bool finite_only = false) {
    if (!d.has(metric)) return;
    const std::string sel = ctx.scope.sel_hosts(metric, {d.tb_host});
    const auto series = m.long_job ? ctx.q.range(sel, d.start, d.end, d.resolution_s, ev)
                                   : ctx.q.raw(sel, d.end, window, ev);
    for (const auto& s : series) {
      for (const auto& p : s.points) {
        if (!finite_only || std::isfinite(p.v)) into[p.t] = p.v;
      }
    }
  };
  fetch("tb_step", m.step, true);
  fetch("tb_metrics_plugin_staleness_fill", m.fill);
  fetch("tb_learning_loss", m.loss);
  fetch("tb_learning_grad_norm", m.grad_norm);
  fetch("tb_learning_raw_grad_norm", m.raw_grad_norm);
  fetch("tb_perf_step_time_seconds", m.step_time);
  fetch("tb_perf_per_device_tokens_per_sec", m.tokens_per_s);
  fetch("tb_learning_current_learning_rate", m.learning_rate);
  fetch("tb_learning_moe_lb_loss", m.moe_lb_loss);
  return m;
}

PlaybookResult run_training(Context& ctx) {
  std::vector<QueryRecord> evidence;
  const TrainingMetrics m = gather_training(ctx, &evidence);
  PlaybookResult r = judge_training(m, ctx.th.training);
  r.evidence = std::move(evidence);
  return r;
}

}  // namespace triage::tsdb
