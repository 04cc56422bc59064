#include "analyzer/progress_projection.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <string_view>

#include "common/text.h"

namespace triage {

namespace {

void decide_start(const ProgressInput& in, ProgressProjection& p) {
  const LogFacts& f = *in.facts;
  // Explicit restore messages beat inference from the first step number.
  for (const RestoreFacts* r : {&f.restore, in.worker_restore}) {
    if (r == nullptr) continue;
    if (r->restored_step) {
      p.start = "restored";
      p.restored_from_step = r->restored_step;
      p.start_basis = "restore message in " + r->source + " (line " + std::to_string(r->line) + ")";
      return;
    }
  }
  for (const RestoreFacts* r : {&f.restore, in.worker_restore}) {
    if (r != nullptr && r->fresh) {
      p.start = "fresh";
      p.start_basis = "'No existing checkpoints found' in " + r->source + " (line " +
                      std::to_string(r->line) + ")";
      return;
    }
  }
  if (p.first_step > 0) {
    // A restore skips the checkpoint's own step and trains from the next one.
    p.start = "restored";
    p.restored_from_step = p.first_step - 1;
    p.start_basis = "first completed step is " + std::to_string(p.first_step);
  } else {
    p.start = "fresh";
    p.start_basis = "first completed step is 0";
  }
}

void decide_step_time(const StepSegment& s, ProgressProjection& p) {
  StepTime t = step_time_of(s);
  p.step_seconds = t.seconds;
  p.step_time_basis = std::move(t.basis);
}

void decide_last_step_time(const ProgressInput& in, const StepSegment& s, ProgressProjection& p) {
  if (s.last_time_usec > 0) {
    p.last_step_time_usec = s.last_time_usec;
    p.last_step_time_basis = "timestamp";
    return;
  }
  if (s.first_time_usec > 0) {
    // The first step's time plus the seconds each later step took.
    const double later = s.steady_seconds_sum + s.warm_seconds_sum;
    p.last_step_time_usec = s.first_time_usec + static_cast<int64_t>(later * 1e6);
    p.last_step_time_basis = "estimated from the first step's timestamp and step durations";
    return;
  }
  if (in.log_mtime_usec > 0) {
    p.last_step_time_usec = in.log_mtime_usec;
    p.last_step_time_basis = "log modification time (an upper bound)";
  }
}

// "loss: 9.477" or "loss=nan" on a step line; not "lb_loss:" or "moe_lb_loss=".
std::optional<double> loss_on(std::string_view line) {
  for (size_t at = line.find("loss"); at != std::string_view::npos;
       at = line.find("loss", at + 4)) {
    if (at > 0) {
      const char before = line[at - 1];
      if (std::isalnum(static_cast<unsigned char>(before)) != 0 || before == '_') continue;
    }
    std::string_view v = line.substr(at + 4);
    while (!v.empty() && v.front() == ' ')
      v.remove_prefix(1);
    if (v.empty() || (v.front() != ':' && v.front() != '=')) continue;
    v.remove_prefix(1);
    while (!v.empty() && v.front() == ' ')
      v.remove_prefix(1);
    size_t n = 0;
    while (n < v.size() && n < 32 && v[n] != ',' && v[n] != ' ' && v[n] != ';' && v[n] != '\r')
      ++n;
    const std::string_view token = v.substr(0, n);
    if (token == "nan" || token == "NaN" || token == "-nan")
      return std::numeric_limits<double>::quiet_NaN();
    return parse_double(token);
  }
  return std::nullopt;
}

void decide_checkpoints(const LogFacts& f, ProgressProjection& p) {
  p.checkpointing_enabled = f.config.enable_checkpointing;
  p.async_checkpointing = f.config.async_checkpointing;
  if (f.config.checkpoint_period) {
    p.checkpoint_period = f.config.checkpoint_period;
    p.checkpoint_period_source = "config";
  } else if (f.config.enable_checkpointing.value_or(false)) {
    p.checkpoint_period = kDefaultCheckpointPeriod;
    p.checkpoint_period_source = "default (enable_checkpointing=true)";
  }
  if (f.config.enable_checkpointing && !*f.config.enable_checkpointing) p.checkpoint_period.reset();
  if (!p.checkpoint_period || *p.checkpoint_period <= 0) {
    p.checkpoint_period.reset();
  } else {
    const int64_t period = *p.checkpoint_period;
    const int64_t highest = (p.last_step / period) * period;
    // Step 0's checkpoint is the starting state of a fresh run, not a training milestone; and a
    // multiple below this run's first step was saved by an earlier run.
    if (highest >= period && highest >= p.first_step) p.last_periodic_checkpoint = highest;
    if (highest >= period) p.resume_step = highest;
  }
  if (!p.resume_step && p.restored_from_step) p.resume_step = p.restored_from_step;
  if (p.resume_step) {
    p.progress_lost_steps = p.last_step - *p.resume_step;
  } else {
    p.progress_lost_steps = p.steps_this_run;
    p.progress_lost_all = true;
  }
  if (p.step_seconds && p.progress_lost_steps) {
    p.progress_lost_seconds = static_cast<double>(*p.progress_lost_steps) * *p.step_seconds;
  }
}

}  // namespace

StepTime step_time_of(const StepSegment& s) {
  StepTime t;
  if (s.steady_count > 0) {
    t.seconds = s.steady_seconds_sum / static_cast<double>(s.steady_count);
    t.basis = "mean of " + std::to_string(s.steady_count) + " steady-state steps (warm-up skipped)";
    t.steady = true;
  } else if (s.warm_count > 0) {
    t.basis = "mean of " + std::to_string(s.warm_count) + " warm-up steps (no steady state yet)";
    t.seconds = s.warm_seconds_sum / static_cast<double>(s.warm_count);
  } else if (s.first_time_usec > 0 && s.last_time_usec > s.first_time_usec &&
             s.last_step > s.first_step) {
    t.seconds = static_cast<double>(s.last_time_usec - s.first_time_usec) / 1e6 /
                static_cast<double>(s.last_step - s.first_step);
    t.basis = "from the step lines' timestamps";
    t.steady = s.last_step >= s.first_step + kWarmUpSteps;
  } else if (s.first_seconds > 0) {
    t.seconds = s.first_seconds;
    t.basis = "the first step only (includes compilation)";
  }
  if (t.seconds && *t.seconds <= 0) {
    t.seconds.reset();
    t.steady = false;
  }
  return t;
}

ProgressProjection project_progress(const ProgressInput& in) {
  ProgressProjection p;
  const LogFacts& f = *in.facts;
  const StepSegment& s = f.steps;
  p.total_steps = f.config.total_steps;
  p.total_steps_source = f.config.total_steps_source;
  p.restarts_in_log = f.restarts;
  p.reference_time_usec = in.reference_time_usec;
  p.reference_basis = in.reference_basis;
  if (s.first_step < 0) return p;
  p.has_steps = true;
  p.first_step = s.first_step;
  p.last_step = s.last_step;
  p.first_step_line = s.first_line;
  p.last_step_line = s.last_line;
  p.steps_this_run = s.last_step - s.first_step + 1;
  if (p.total_steps && *p.total_steps > 0) {
    p.percent = 100.0 * static_cast<double>(s.last_step + 1) / static_cast<double>(*p.total_steps);
    p.reached_final_step = s.last_step >= *p.total_steps - 1;
  }
  decide_start(in, p);
  decide_step_time(s, p);
  decide_last_step_time(in, s, p);
  decide_checkpoints(f, p);
  p.last_loss = loss_on(s.last_text);
  if (p.step_seconds && p.total_steps) {
    p.remaining_seconds =
        static_cast<double>(std::max<int64_t>(0, *p.total_steps - 1 - p.last_step)) *
        *p.step_seconds;
  }
  if (p.step_seconds && p.last_step_time_usec > 0 && in.reference_time_usec > 0) {
    const double gap = static_cast<double>(in.reference_time_usec - p.last_step_time_usec) / 1e6;
    p.stall_seconds = std::max(0.0, gap);
    p.expected_step =
        p.last_step + static_cast<int64_t>(std::floor(*p.stall_seconds / *p.step_seconds));
    if (p.total_steps) p.expected_step = std::min(*p.expected_step, *p.total_steps - 1);
    const double threshold = std::max(in.stall.min_seconds, in.stall.step_factor * *p.step_seconds);
    // An mtime-based time is only an upper bound: a stall it shows is real, a recent one proves
    // nothing, and either way it never makes steps look stopped when they were logged recently.
    p.stalled = *p.stall_seconds > threshold && !p.reached_final_step;
    p.stall_undetermined = !p.stalled && p.last_step_time_basis != "timestamp" &&
                           p.last_step_time_basis.rfind("estimated", 0) != 0;
  } else if (!p.reached_final_step) {
    p.stall_undetermined = true;
  }
  return p;
}

}  // namespace triage
