#include "analyzer/stall_verdict.h"

#include <algorithm>
#include <cstdio>

namespace triage {

namespace {

std::string seconds_text(double s) {
  char buf[48];
  (void)std::snprintf(buf, sizeof buf, s < 10 ? "%.1f s" : "%.0f s", s);
  return buf;
}

// The pause announcements after the last step, as guard names, with the latest one's line.
std::vector<std::string> pauses_after_last_step(const LiveProgress& p, int64_t* line) {
  std::vector<std::string> out;
  *line = 0;
  const int64_t after = p.last_step_line();
  for (const auto& [name, seen] :
       {std::pair<const char*, const LiveLine*>{"checkpoint-save", &p.last_checkpoint_save()},
        {"evaluation", &p.last_evaluation()}}) {
    if (seen->line > after) {
      out.emplace_back(name);
      *line = std::max(*line, seen->line);
    }
  }
  return out;
}

}  // namespace

StallVerdict judge_stall(const LiveProgress& progress, const LiveInstant& now,
                         const LiveStallPolicy& policy) {
  StallVerdict v;
  if (!progress.has_steps()) {
    v.guards_applied.emplace_back("no-step-lines");
    v.basis = "no step lines yet: a job that prints no steps is never judged stalled";
    return v;
  }
  v.last_step = progress.last_step();
  v.last_step_line = progress.last_step_line();
  v.last_step_mono = progress.last_step_mono();
  const int64_t silence_usec = std::max<int64_t>(0, now.mono_usec - v.last_step_mono);
  v.last_step_usec = now.wall_usec - silence_usec;
  v.silence_s = static_cast<double>(silence_usec) / 1e6;
  const StepTime& t = progress.step_time();
  if (!t.steady || !t.seconds) {
    v.guards_applied.emplace_back("warm-up");
    v.basis = "warm-up: " + std::to_string(progress.segment().distinct_steps) +
              " steps of this run, no steady step time yet";
    return v;
  }
  v.judged = true;
  const double base = std::max(policy.factor * *t.seconds, policy.min_seconds);
  v.threshold_s = base;
  char factor[32];
  (void)std::snprintf(factor, sizeof factor, "%g", policy.factor);
  v.basis = "allowed " + seconds_text(base) + " = max(" + factor + " x " +
            seconds_text(*t.seconds) + " step time, " + seconds_text(policy.min_seconds) +
            " minimum)";
  if (progress.longest_healthy_gap_s() > v.threshold_s) {
    v.threshold_s = progress.longest_healthy_gap_s();
    v.guards_applied.emplace_back("burst-floor");
    v.basis +=
        ", raised to the longest silence the job survived (" + seconds_text(v.threshold_s) + ")";
  }
  int64_t pause_line = 0;
  for (auto& g : pauses_after_last_step(progress, &pause_line))
    v.guards_applied.push_back(std::move(g));
  if (pause_line > 0) {
    v.threshold_s += policy.pause_allowance_seconds;
    v.basis += ", plus " + seconds_text(policy.pause_allowance_seconds) +
               " for the pause announced at line " + std::to_string(pause_line);
  }
  v.stalled = v.silence_s > v.threshold_s;
  v.basis = (v.stalled ? "stalled: " : "progressing: ") + seconds_text(v.silence_s) +
            " since step " + std::to_string(v.last_step) + " (line " +
            std::to_string(v.last_step_line) + "); " + v.basis;
  return v;
}

}  // namespace triage
