#include "agent/node/hang_action.h"

#include <cmath>

namespace triage::agent {

std::string_view to_string(HangChoice c) {
  switch (c) {
    case HangChoice::kNotify:
      return "notify";
    case HangChoice::kCancel:
      return "cancel";
    case HangChoice::kRequeue:
      return "requeue";
  }
  return "notify";
}

std::optional<HangChoice> parse_hang_choice(std::string_view s) {
  if (s == "notify") return HangChoice::kNotify;
  if (s == "cancel") return HangChoice::kCancel;
  if (s == "requeue") return HangChoice::kRequeue;
  return std::nullopt;
}

std::string_view to_string(HangOutcome o) {
  switch (o) {
    case HangOutcome::kNone:
      return "none";
    case HangOutcome::kNotify:
      return "notify";
    case HangOutcome::kCancel:
      return "cancel";
    case HangOutcome::kRequeue:
      return "requeue";
  }
  return "none";
}

namespace {

std::string seconds(double s) {
  return std::to_string(std::llround(s)) + " s";
}

std::string corroboration(const HangFacts& f) {
  std::string out;
  auto add = [&out](const std::string& what) { out += (out.empty() ? "" : ", ") + what; };
  if (f.dstate_tasks > 0) add(std::to_string(f.dstate_tasks) + " task(s) in D state");
  if (f.kernel_events > 0) add(std::to_string(f.kernel_events) + " kernel event(s) on its nodes");
  if (f.busy_wait) add("GPUs busy-waiting at idle power");
  return out;
}

// Why an asked-for cancel or requeue cannot happen at all (empty: it may).
std::string refusal(const HangFacts& f) {
  const std::string option = "--triage-on-hang=" + std::string(to_string(f.asked));
  if (!f.admin_allows) {
    return option + " is not allowed on this cluster (plugstack hang_action=allow is not set)";
  }
  if (f.asked == HangChoice::kRequeue && !(f.batch && f.requeueable)) {
    return option + " cannot be done: Slurm requeues only batch jobs that allow requeue";
  }
  return "";
}

// The notify duties once; afterwards nothing new to do, with the same reason kept.
HangDecision notify_once(const HangFacts& f, bool corroborated, std::string reason) {
  HangDecision d;
  d.outcome = f.notified ? HangOutcome::kNone : HangOutcome::kNotify;
  d.corroborated = corroborated;
  d.reason = std::move(reason);
  return d;
}

}  // namespace

int hang_requeues_allowed(const HangFacts& f) {
  return f.requeue_max > 0 ? f.requeue_max : 1;
}

HangDecision decide_hang_action(const HangFacts& f) {
  if (!f.stalled) return {HangOutcome::kNone, false, "the job is not stalled"};
  const std::string evidence = corroboration(f);
  const bool corroborated = !evidence.empty();
  if (f.acted) {
    return {HangOutcome::kNone, corroborated,
            "a " + std::string(to_string(f.asked)) + " was already issued; never twice"};
  }
  const std::string stall =
      "no step for " + seconds(f.silence_s) + " (threshold " + seconds(f.threshold_s) + ")";
  if (f.asked == HangChoice::kNotify) {
    return notify_once(f, corroborated, stall + "; recorded, the job is left running");
  }
  if (const std::string why = refusal(f); !why.empty()) {
    return notify_once(f, corroborated, stall + "; " + why + ", so it is only recorded");
  }
  const bool long_enough = f.silence_s >= 2 * f.threshold_s;
  if (!corroborated && !long_enough) {
    return notify_once(f, false,
                       stall + "; " + std::string(to_string(f.asked)) +
                           " waits for a node fact or " + seconds(2 * f.threshold_s) +
                           " of silence");
  }
  const std::string backing = corroborated ? "corroborated by " + evidence
                                           : "after twice the threshold without a node fact";
  HangDecision d;
  d.corroborated = corroborated;
  const int allowed = hang_requeues_allowed(f);
  if (f.asked == HangChoice::kRequeue && f.restarts >= allowed) {
    d.outcome = HangOutcome::kCancel;
    const std::string limit =
        f.requeue_max > 0
            ? "the " + std::to_string(allowed) +
                  " --triage-requeue=" + std::to_string(f.requeue_max) + " allows"
            : std::string("the one --triage-on-hang=requeue allows without --triage-requeue");
    d.reason = stall + "; requeue refused: Slurm shows the job requeued " +
               std::to_string(f.restarts) + " time(s), " + limit +
               ", so it is cancelled instead, " + backing;
    return d;
  }
  d.outcome = f.asked == HangChoice::kCancel ? HangOutcome::kCancel : HangOutcome::kRequeue;
  d.reason = stall + "; " + std::string(to_string(d.outcome)) + " as the user asked" +
             (d.outcome == HangOutcome::kRequeue ? " (requeue " + std::to_string(f.restarts + 1) +
                                                       " of " + std::to_string(allowed) + ")"
                                                 : std::string()) +
             ", " + backing;
  return d;
}

}  // namespace triage::agent
