// Playbook 7's judgement: training stability from the tb_* bridge. Only real samples count
// (tb_metrics_plugin_staleness_fill == 0); checkpoint steps and warmup are left out before
// anything is called an anomaly, because a slow checkpoint step is expected.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "analyzer/tsdb/playbook_table.h"
#include "analyzer/tsdb/playbook_training.h"
#include "common/text.h"

namespace triage::tsdb {

namespace {

struct Rec {
  double t = 0;
  int64_t step = 0;
  double v = 0;
};

// The first real sample of each step, joined to tb_step by scrape timestamp.
std::vector<Rec> per_step(const TrainingMetrics& m, const Samples& at, size_t* fills) {
  std::vector<Rec> out;
  std::optional<int64_t> last;
  for (const auto& [t, v] : at) {
    auto f = m.fill.find(t);
    if (f != m.fill.end() && f->second != 0) {
      ++*fills;
      continue;
    }
    auto st = m.step.find(t);
    if (st == m.step.end()) continue;
    const auto step = static_cast<int64_t>(std::llround(st->second));
    if (last && step == *last) continue;
    last = step;
    out.push_back({t, step, v});
  }
  return out;
}

std::vector<double> values(const std::vector<Rec>& in) {
  std::vector<double> v;
  v.reserve(in.size());
  for (const auto& x : in)
    v.push_back(x.v);
  return v;
}

double rolling_median(const std::vector<Rec>& r, size_t i, size_t k) {
  std::vector<double> w;
  for (size_t j = i > k ? i - k : 0; j < i; ++j)
    w.push_back(r[j].v);
  return median(std::move(w));
}

// Checkpoint steps: from the log's period, else inferred from regularly recurring slow steps.
std::optional<int64_t> checkpoint_period(const TrainingMetrics& m,
                                         const std::vector<Rec>& step_time,
                                         const TrainingThresholds& tt, PlaybookResult& r) {
  if (m.checkpoint_period && *m.checkpoint_period > 0) return m.checkpoint_period;
  if (step_time.size() < 10) return m.checkpoint_period;
  const double med = median(values(step_time));
  int64_t gcd = 0;
  int spikes = 0;
  for (const auto& x : step_time) {
    if (x.v > tt.step_time_spike_factor * med && x.step > 0) {
      gcd = std::gcd(gcd, x.step);
      ++spikes;
    }
  }
  if (spikes < 2 || gcd < 10) return m.checkpoint_period;
  r.notes.push_back("checkpoint period inferred from recurring slow steps: every " +
                    std::to_string(gcd) + " steps");
  return gcd;
}

// Everything the judgement reads and writes, with the steps it leaves out.
struct Judging {
  const TrainingMetrics& m;
  const TrainingThresholds& tt;
  PlaybookResult& r;
  EvidenceTable anomalies;
  std::optional<int64_t> period;
  int slack = 0;

  bool excluded(int64_t s) const {
    if (s < *m.first_step + tt.warmup_steps) return true;
    if (period && *period > 0) {
      const int64_t k = s % *period;
      if (k <= slack && s >= *period) return true;  // the save follows the checkpoint step
    }
    return false;
  }
  std::vector<Rec> steady(const std::vector<Rec>& in) const {
    std::vector<Rec> out;
    std::copy_if(in.begin(), in.end(), std::back_inserter(out),
                 [&](const Rec& x) { return !excluded(x.step); });
    return out;
  }
  void anomaly(const Rec& x, const std::string& metric, const std::string& kind,
               const std::string& text) {
    const bool in_ck = std::any_of(m.checkpoint_windows.begin(), m.checkpoint_windows.end(),
                                   [&](const Interval& i) { return i.contains(x.t); });
    r.anomalies.push_back(Anomaly{.time = x.t,
                                  .host = m.tb_host,
                                  .metric = metric,
                                  .domain = "training",
                                  .kind = kind,
                                  .text = text,
                                  .during_checkpoint = in_ck});
  }
  void row(const Rec& x, const std::string& name, const std::string& value, const std::string& base,
           const std::string& reading) {
    anomalies.rows.push_back({std::to_string(x.step), fmt_time(x.t), name, value, base, reading});
  }

  // The first spike of a steady series above its running median; true when one was found.
  bool first_spike(const std::vector<Rec>& in, const std::string& metric, const std::string& name,
                   bool mad_rule) {
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
      anomaly(s[i], metric, "cause",
              name + " spiked to " + fmt(s[i].v, 3) + " at step " + std::to_string(s[i].step) +
                  " (running median " + fmt(med, 3) + ")");
      row(s[i], name, fmt(s[i].v, 3), fmt(med, 3), "spike");
      return true;  // the first one is the one that matters for the chain
    }
    return false;
  }
};

bool loss_diverged(Judging& j, const std::vector<Rec>& loss) {
  for (const auto& x : loss) {
    if (std::isfinite(x.v)) continue;
    j.anomaly(x, "tb_learning_loss", "cause",
              "loss became " + fmt(x.v) + " at step " + std::to_string(x.step));
    j.row(x, "loss", fmt(x.v), "–", "not a number");
    return true;
  }
  return j.first_spike(loss, "tb_learning_loss", "loss", true);
}

bool learning_rate_broke(Judging& j, const std::vector<Rec>& lr) {
  for (const auto& x : lr) {
    if (std::isfinite(x.v) && x.v >= 0) continue;
    j.anomaly(x, "tb_learning_current_learning_rate", "cause",
              "learning rate " + fmt(x.v, 6) + " at step " + std::to_string(x.step));
    return true;
  }
  return false;
}

void clipping_finding(const std::vector<Rec>& grad, const std::vector<Rec>& raw_grad,
                      PlaybookResult& r) {
  if (grad.empty() || raw_grad.empty()) return;
  std::vector<double> ratio;
  std::map<int64_t, double> g;
  for (const auto& x : grad)
    g[x.step] = x.v;
  for (const auto& x : raw_grad) {
    if (g.count(x.step) != 0 && g[x.step] > 0) ratio.push_back(x.v / g[x.step]);
  }
  const double med = median(ratio);
  if (std::isfinite(med) && med > 2) {
    r.add_finding(Severity::kInfo,
                  "raw grad norm is " + fmt(med, 1) +
                      "x the clipped grad norm (median): gradient clipping "
                      "is active on most steps",
                  {}, std::nullopt);
  }
}

// Step time: spikes outside checkpoints are symptoms worth a look; at checkpoints they are
// expected. Returns the steady-state median.
double judge_step_time(Judging& j, const std::vector<Rec>& step_time) {
  const auto st = j.steady(step_time);
  const double st_med = median(values(st));
  const double limit = j.tt.step_time_spike_factor * st_med;
  size_t ck_slow = 0;
  for (const auto& x : step_time) {
    if (std::isfinite(st_med) && x.v > limit && j.excluded(x.step) &&
        x.step >= *j.m.first_step + j.tt.warmup_steps) {
      ++ck_slow;
    }
  }
  if (ck_slow > 0) {
    j.r.add_finding(
        Severity::kInfo,
        std::to_string(ck_slow) + " slow step(s) at checkpoint saves: expected, not incidents", {},
        std::nullopt);
  }
  for (const auto& x : st) {
    if (!(std::isfinite(st_med) && x.v > limit)) continue;
    j.anomaly(x, "tb_perf_step_time_seconds", "symptom",
              "step " + std::to_string(x.step) + " took " + fmt(x.v, 1) + " s (median " +
                  fmt(st_med, 1) + " s)");
    j.row(x, "step time", fmt(x.v, 1) + " s", fmt(st_med, 1) + " s",
          "slow step outside checkpoints");
    break;
  }
  return st_med;
}

// Throughput: a sustained drop (five steady steps) from the steady state of the first quarter.
bool throughput_dropped(Judging& j, const std::vector<Rec>& tg) {
  if (tg.size() < 12) return false;
  std::vector<double> head;
  for (size_t i = 0; i < tg.size() / 4; ++i)
    head.push_back(tg[i].v);
  const double base = median(head);
  const double limit = base * (1 - j.tt.throughput_drop_pct / 100);
  for (size_t i = tg.size() / 4; i + 5 <= tg.size(); ++i) {
    bool held = true;
    for (size_t k = i; k < i + 5; ++k)
      held = held && tg[k].v < limit;
    if (!held) continue;
    std::vector<double> tail;
    for (size_t k = i; k < tg.size(); ++k)
      tail.push_back(tg[k].v);
    const double after = median(tail);
    j.anomaly(tg[i], "tb_perf_per_device_tokens_per_sec", "symptom",
              "throughput fell " + fmt_pct(100 * (base - after) / base) + " from step " +
                  std::to_string(tg[i].step) + " (" + fmt(base, 0) + " → " + fmt(after, 0) +
                  " tokens/s per device)");
    j.row(tg[i], "tokens/s per device", fmt(after, 0), fmt(base, 0), "sustained drop");
    return true;
  }
  return false;
}

struct Summary {
  size_t fills = 0;
  double st_med = kNaN;
  std::vector<Rec> loss, tg;
};

EvidenceTable summary_table(const Judging& j, const Summary& s) {
  EvidenceTable sum;
  sum.title = "Training metrics from " + j.m.tb_host;
  sum.columns = {"Metric", "Value"};
  sum.rows.push_back({"Steps in the TSDB",
                      std::to_string(*j.m.first_step) + " to " + std::to_string(*j.m.last_step)});
  sum.rows.push_back({"Synthetic (staleness-fill) samples left out", std::to_string(s.fills)});
  if (j.period)
    sum.rows.push_back({"Checkpoint period", std::to_string(*j.period) +
                                                 " steps (those steps and " +
                                                 std::to_string(j.slack) + " after are left out)"});
  if (!s.loss.empty())
    sum.rows.push_back({"Loss", fmt(s.loss.front().v, 4) + " → " + fmt(s.loss.back().v, 4)});
  if (std::isfinite(s.st_med))
    sum.rows.push_back({"Step time (median, steady state)", fmt(s.st_med, 2) + " s"});
  if (!s.tg.empty())
    sum.rows.push_back({"Tokens/s per device (median)", fmt(median(values(s.tg)), 0)});
  return sum;
}

void conclude(bool no_samples, bool diverged, bool unstable, bool regression, PlaybookResult& r) {
  if (no_samples) {
    r.verdict = "no-training-metrics";
    r.summary = "tb_step is there but no real samples of loss, step time or throughput.";
  } else if (diverged) {
    r.verdict = "loss-divergence";
    r.summary =
        "The loss diverged (see the anomalies): a training-level event, which the system metrics "
        "then follow.";
    r.next_steps.push_back(
        "Check the learning-rate schedule and the data around the divergence step; consider a "
        "lower LR or tighter gradient clipping.");
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
}

}  // namespace

PlaybookResult judge_training(const TrainingMetrics& m, const TrainingThresholds& tt) {
  PlaybookResult r = new_playbook("training-stability");
  r.window_start = m.start;
  r.window_end = m.end;
  if (m.tb_host.empty() || !m.first_step || !m.last_step) {
    r.verdict = "no-training-metrics";
    r.summary =
        "The TSDB has no tb_step series in the window (the tb_* bridge did not run, or the job "
        "never reached its first step).";
    return r;
  }
  if (m.long_job) r.notes.push_back("long job: training metrics read at the window resolution");
  if (!m.have_fill)
    r.notes.push_back(
        "tb_metrics_plugin_staleness_fill is missing: every tb_* sample is taken as real");
  Summary s;
  s.loss = per_step(m, m.loss, &s.fills);
  const auto grad = per_step(m, m.grad_norm, &s.fills);
  const auto raw_grad = per_step(m, m.raw_grad_norm, &s.fills);
  const auto step_time = per_step(m, m.step_time, &s.fills);
  const auto tgs = per_step(m, m.tokens_per_s, &s.fills);
  const auto lr = per_step(m, m.learning_rate, &s.fills);
  const auto moe = per_step(m, m.moe_lb_loss, &s.fills);

  Judging j{m,
            tt,
            r,
            {},
            checkpoint_period(m, step_time, tt, r),
            tt.checkpoint_slack_steps + (m.async_checkpointing ? 2 : 0)};
  j.anomalies.title = "Training anomalies (checkpoint and warmup steps excluded)";
  j.anomalies.columns = {"Step", "Time", "Metric", "Value", "Baseline", "Reading"};
  const bool diverged = loss_diverged(j, s.loss);
  bool unstable = j.first_spike(grad, "tb_learning_grad_norm", "grad norm", false);
  unstable =
      j.first_spike(moe, "tb_learning_moe_lb_loss", "MoE load-balance loss", true) || unstable;
  unstable = learning_rate_broke(j, lr) || unstable;
  clipping_finding(grad, raw_grad, r);
  s.st_med = judge_step_time(j, step_time);
  s.tg = j.steady(tgs);
  const bool regression = throughput_dropped(j, s.tg);
  r.tables.push_back(summary_table(j, s));
  if (!j.anomalies.rows.empty()) r.tables.push_back(std::move(j.anomalies));
  conclude(s.loss.empty() && step_time.empty() && tgs.empty(), diverged, unstable, regression, r);
  return r;
}

}  // namespace triage::tsdb
