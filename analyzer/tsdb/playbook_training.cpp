// Playbook 7: training stability from the tb_* bridge. Only real samples count
// (tb_metrics_plugin_staleness_fill == 0); checkpoint steps and warmup are left out before
// anything is called an anomaly, because a slow checkpoint step is expected.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "analyzer/tsdb/playbook_context.h"
#include "analyzer/tsdb/playbook_table.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

struct Rec {
  double t = 0;
  int64_t step = 0;
  double v = 0;
};

// The first real sample of each step for `metric`, joined to tb_step by scrape timestamp.
std::vector<Rec> per_step(const std::map<double, int64_t>& step_at,
                          const std::map<double, double>& fill_at,
                          const std::vector<Series>& series, size_t* fills) {
  std::map<double, double> at;
  for (const auto& s : series) {
    for (const auto& p : s.points)
      at[p.t] = p.v;
  }
  std::vector<Rec> out;
  std::optional<int64_t> last;
  for (const auto& [t, v] : at) {
    auto f = fill_at.find(t);
    if (f != fill_at.end() && f->second != 0) {
      ++*fills;
      continue;
    }
    auto st = step_at.find(t);
    if (st == step_at.end()) continue;
    if (last && st->second == *last) continue;
    last = st->second;
    out.push_back({t, st->second, v});
  }
  return out;
}

double rolling_median(const std::vector<Rec>& r, size_t i, size_t k) {
  std::vector<double> w;
  for (size_t j = i > k ? i - k : 0; j < i; ++j)
    w.push_back(r[j].v);
  return median(std::move(w));
}

}  // namespace

PlaybookResult run_training(Context& ctx) {
  PlaybookResult r = new_playbook("training-stability");
  const auto& d = ctx.disc;
  const auto& tt = ctx.th.training;
  auto* ev = &r.evidence;
  r.window_start = d.start;
  r.window_end = d.end;
  if (d.tb_host.empty() || d.steps.empty()) {
    r.verdict = "no-training-metrics";
    r.summary =
        "The TSDB has no tb_step series in the window (the tb_* bridge did not run, or the job "
        "never reached "
        "its first step).";
    return r;
  }
  const double window = d.end - d.start;
  if (window / d.scrape_s > 60000)
    r.notes.push_back("long job: training metrics read at the window resolution");
  auto fetch = [&](const std::string& m) -> std::vector<Series> {
    if (!d.has(m)) return {};
    const std::string sel = ctx.scope.sel_hosts(m, {d.tb_host});
    if (window / d.scrape_s <= 60000) return ctx.q.raw(sel, d.end, window, ev);
    return ctx.q.range(sel, d.start, d.end, d.resolution_s, ev);
  };
  std::map<double, int64_t> step_at;
  for (const auto& s : fetch("tb_step")) {
    for (const auto& p : s.points) {
      if (std::isfinite(p.v)) step_at[p.t] = static_cast<int64_t>(std::llround(p.v));
    }
  }
  std::map<double, double> fill_at;
  const bool have_fill = d.has("tb_metrics_plugin_staleness_fill");
  for (const auto& s : fetch("tb_metrics_plugin_staleness_fill")) {
    for (const auto& p : s.points)
      fill_at[p.t] = p.v;
  }
  if (!have_fill)
    r.notes.push_back(
        "tb_metrics_plugin_staleness_fill is missing: every tb_* sample is taken as real");
  size_t fills = 0;
  const auto loss = per_step(step_at, fill_at, fetch("tb_learning_loss"), &fills);
  const auto grad = per_step(step_at, fill_at, fetch("tb_learning_grad_norm"), &fills);
  const auto raw_grad = per_step(step_at, fill_at, fetch("tb_learning_raw_grad_norm"), &fills);
  auto step_time = per_step(step_at, fill_at, fetch("tb_perf_step_time_seconds"), &fills);
  auto tgs = per_step(step_at, fill_at, fetch("tb_perf_per_device_tokens_per_sec"), &fills);
  const auto lr = per_step(step_at, fill_at, fetch("tb_learning_current_learning_rate"), &fills);
  const auto moe = per_step(step_at, fill_at, fetch("tb_learning_moe_lb_loss"), &fills);

  // Checkpoint steps: from the log's period, else inferred from regularly recurring slow steps.
  std::optional<int64_t> period = ctx.req.checkpoint_period;
  if ((!period || *period <= 0) && step_time.size() >= 10) {
    std::vector<double> v;
    v.reserve(step_time.size());
    for (const auto& x : step_time)
      v.push_back(x.v);
    const double m = median(v);
    int64_t gcd = 0;
    int spikes = 0;
    for (const auto& x : step_time) {
      if (x.v > tt.step_time_spike_factor * m && x.step > 0) {
        gcd = std::gcd(gcd, x.step);
        ++spikes;
      }
    }
    if (spikes >= 2 && gcd >= 10) {
      period = gcd;
      r.notes.push_back("checkpoint period inferred from recurring slow steps: every " +
                        std::to_string(gcd) + " steps");
    }
  }
  const int64_t first = d.steps.front().step;
  const int slack = tt.checkpoint_slack_steps + (ctx.req.async_checkpointing ? 2 : 0);
  auto excluded = [&](int64_t s) {
    if (s < first + tt.warmup_steps) return true;
    if (period && *period > 0) {
      const int64_t m = s % *period;
      if (m <= slack && s >= *period) return true;  // the save follows the checkpoint step
    }
    return false;
  };
  auto steady = [&](const std::vector<Rec>& in) {
    std::vector<Rec> out;
    for (const auto& x : in) {
      if (!excluded(x.step)) out.push_back(x);
    }
    return out;
  };

  auto anomaly = [&](const Rec& x, const std::string& metric, const std::string& kind,
                     const std::string& text) {
    Anomaly a{.time = x.t,
              .host = d.tb_host,
              .metric = metric,
              .domain = "training",
              .kind = kind,
              .text = text,
              .during_checkpoint = d.in_checkpoint(x.t)};
    r.anomalies.push_back(a);
  };
  EvidenceTable at;
  at.title = "Training anomalies (checkpoint and warmup steps excluded)";
  at.columns = {"Step", "Time", "Metric", "Value", "Baseline", "Reading"};
  bool diverged = false, unstable = false, regression = false;

  for (const auto& x : loss) {
    if (!std::isfinite(x.v)) {
      diverged = true;
      anomaly(x, "tb_learning_loss", "cause",
              "loss became " + fmt(x.v) + " at step " + std::to_string(x.step));
      at.rows.push_back(
          {std::to_string(x.step), fmt_time(x.t), "loss", fmt(x.v), "–", "not a number"});
      break;
    }
  }
  auto spikes = [&](const std::vector<Rec>& in, const std::string& metric, const std::string& name,
                    bool* flag, bool mad_rule) {
    const auto s = steady(in);
    for (size_t i = 5; i < s.size(); ++i) {
      const double med = rolling_median(s, i, 20);
      if (!std::isfinite(s[i].v) || !std::isfinite(med) || med <= 0) continue;
      bool hit = false;
      if (mad_rule) {
        std::vector<double> win;
        for (size_t j = i > 20 ? i - 20 : 0; j < i; ++j)
          win.push_back(s[j].v);
        const double spread = 1.4826 * mad(win) + 1e-9 * std::abs(med);
        hit = s[i].v > med && (s[i].v - med) / spread > tt.loss_spike_mad &&
              (s[i].v - med) / med > 0.1;
      } else {
        hit = s[i].v > tt.grad_spike_factor * med;
      }
      if (!hit) continue;
      *flag = true;
      anomaly(s[i], metric, "cause",
              name + " spiked to " + fmt(s[i].v, 3) + " at step " + std::to_string(s[i].step) +
                  " (running median " + fmt(med, 3) + ")");
      at.rows.push_back({std::to_string(s[i].step), fmt_time(s[i].t), name, fmt(s[i].v, 3),
                         fmt(med, 3), "spike"});
      return;  // the first one is the one that matters for the chain
    }
  };
  if (!diverged) spikes(loss, "tb_learning_loss", "loss", &diverged, true);
  spikes(grad, "tb_learning_grad_norm", "grad norm", &unstable, false);
  spikes(moe, "tb_learning_moe_lb_loss", "MoE load-balance loss", &unstable, true);
  for (const auto& x : lr) {
    if (!std::isfinite(x.v) || x.v < 0) {
      unstable = true;
      anomaly(x, "tb_learning_current_learning_rate", "cause",
              "learning rate " + fmt(x.v, 6) + " at step " + std::to_string(x.step));
      break;
    }
  }
  if (!grad.empty() && !raw_grad.empty()) {
    std::vector<double> ratio;
    std::map<int64_t, double> g;
    for (const auto& x : grad)
      g[x.step] = x.v;
    for (const auto& x : raw_grad) {
      if (g.count(x.step) != 0 && g[x.step] > 0) ratio.push_back(x.v / g[x.step]);
    }
    const double m = median(ratio);
    if (std::isfinite(m) && m > 2) {
      r.findings.push_back({"info",
                            "raw grad norm is " + fmt(m, 1) +
                                "x the clipped grad norm (median): gradient clipping "
                                "is active on most steps",
                            {},
                            std::nullopt});
    }
  }
  // Step time: spikes outside checkpoints are symptoms worth a look; at checkpoints they are
  // expected.
  const auto st = steady(step_time);
  std::vector<double> stv;
  stv.reserve(st.size());
  for (const auto& x : st)
    stv.push_back(x.v);
  const double st_med = median(stv);
  size_t ck_slow = 0;
  for (const auto& x : step_time) {
    if (std::isfinite(st_med) && x.v > tt.step_time_spike_factor * st_med && excluded(x.step) &&
        x.step >= first + tt.warmup_steps) {
      ++ck_slow;
    }
  }
  if (ck_slow > 0) {
    r.findings.push_back(
        {"info",
         std::to_string(ck_slow) + " slow step(s) at checkpoint saves: expected, not incidents",
         {},
         std::nullopt});
  }
  for (const auto& x : st) {
    if (std::isfinite(st_med) && x.v > tt.step_time_spike_factor * st_med) {
      anomaly(x, "tb_perf_step_time_seconds", "symptom",
              "step " + std::to_string(x.step) + " took " + fmt(x.v, 1) + " s (median " +
                  fmt(st_med, 1) + " s)");
      at.rows.push_back({std::to_string(x.step), fmt_time(x.t), "step time", fmt(x.v, 1) + " s",
                         fmt(st_med, 1) + " s", "slow step outside checkpoints"});
      break;
    }
  }
  // Throughput: a sustained drop from the steady state of the first quarter.
  const auto tg = steady(tgs);
  if (tg.size() >= 12) {
    std::vector<double> head;
    for (size_t i = 0; i < tg.size() / 4; ++i)
      head.push_back(tg[i].v);
    const double base = median(head);
    const double limit = base * (1 - tt.throughput_drop_pct / 100);
    for (size_t i = tg.size() / 4; i + 5 <= tg.size(); ++i) {
      bool held = true;
      for (size_t j = i; j < i + 5; ++j)
        held = held && tg[j].v < limit;
      if (!held) continue;
      regression = true;
      std::vector<double> tail;
      for (size_t j = i; j < tg.size(); ++j)
        tail.push_back(tg[j].v);
      const double after = median(tail);
      anomaly(tg[i], "tb_perf_per_device_tokens_per_sec", "symptom",
              "throughput fell " + fmt_pct(100 * (base - after) / base) + " from step " +
                  std::to_string(tg[i].step) + " (" + fmt(base, 0) + " → " + fmt(after, 0) +
                  " tokens/s per device)");
      at.rows.push_back({std::to_string(tg[i].step), fmt_time(tg[i].t), "tokens/s per device",
                         fmt(after, 0), fmt(base, 0), "sustained drop"});
      break;
    }
  }

  EvidenceTable sum;
  sum.title = "Training metrics from " + d.tb_host;
  sum.columns = {"Metric", "Value"};
  sum.rows.push_back({"Steps in the TSDB", std::to_string(d.steps.front().step) + " to " +
                                               std::to_string(d.steps.back().step)});
  sum.rows.push_back({"Synthetic (staleness-fill) samples left out", std::to_string(fills)});
  if (period)
    sum.rows.push_back({"Checkpoint period", std::to_string(*period) + " steps (those steps and " +
                                                 std::to_string(slack) + " after are left out)"});
  if (!loss.empty())
    sum.rows.push_back({"Loss", fmt(loss.front().v, 4) + " → " + fmt(loss.back().v, 4)});
  if (std::isfinite(st_med))
    sum.rows.push_back({"Step time (median, steady state)", fmt(st_med, 2) + " s"});
  if (!tg.empty()) {
    std::vector<double> v;
    v.reserve(tg.size());
    for (const auto& x : tg)
      v.push_back(x.v);
    sum.rows.push_back({"Tokens/s per device (median)", fmt(median(v), 0)});
  }
  r.tables.push_back(std::move(sum));
  if (!at.rows.empty()) r.tables.push_back(std::move(at));

  if (loss.empty() && step_time.empty() && tgs.empty()) {
    r.verdict = "no-training-metrics";
    r.summary = "tb_step is there but no real samples of loss, step time or throughput.";
  } else if (diverged) {
    r.verdict = "loss-divergence";
    r.summary =
        "The loss diverged (see the anomalies): a training-level event, which the system metrics "
        "then follow.";
    r.next_steps.push_back(
        "Check the learning-rate schedule and the data around the divergence step; consider a "
        "lower "
        "LR or tighter gradient clipping.");
  } else if (unstable) {
    r.verdict = "unstable";
    r.summary = "Gradient norm or routing spikes (see the anomalies) outside checkpoint steps.";
  } else if (regression) {
    r.verdict = "throughput-regression";
    r.summary =
        "Throughput dropped and stayed down (see the anomalies); look for the system event that "
        "came first.";
  } else {
    r.verdict = "stable";
    r.summary =
        "Loss, gradients and throughput behaved over the steps the TSDB holds (checkpoint steps "
        "excluded).";
  }
  return r;
}

}  // namespace triage::tsdb
