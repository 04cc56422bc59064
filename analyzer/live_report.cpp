#include "analyzer/live_report.h"

#include <cstdio>

#include "common/live_cost.h"
#include "common/time_util.h"

namespace triage {

namespace {

std::string fixed(double v, int decimals) {
  char buf[48];
  (void)std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string flag_sentence(const LiveRecord& r) {
  std::string s =
      "The agent flagged the job as hung while it ran, at " + format_utc(r.flagged_usec);
  if (r.step >= 0) {
    s += ": no step for " + fixed(r.silence_s, 0) + " s after step " + std::to_string(r.step) +
         " (line " + std::to_string(r.step_line) + ")";
  }
  s += ", " + fixed(r.threshold_s, 0) + " s allowed";
  s += r.corroboration.empty() ? " (the stall alone, no node fact)"
                               : " (corroborated: " + r.corroboration.front() + ")";
  return s + ".";
}

std::string action_sentence(const LiveRecord& r, const std::optional<double>& hours,
                            const std::optional<double>& gpu_hours) {
  if (r.action == "cancel" || r.action == "requeue") {
    const std::string verb = r.action == "cancel" ? "cancelled" : "requeued";
    const std::string at = " at " + format_utc(r.action_usec) +
                           (r.step >= 0 ? ", at step " + std::to_string(r.step) : "");
    // Only a command that worked is told as done (issue 30): one Slurm refused, one still being
    // tried, or one not run because Slurm showed another attempt says so.
    if (r.action_result == "not-done") {
      return "slurm-triage was to " + r.action + " it as hung" + at +
             ", but did not: " + r.action_error + ".";
    }
    if (!r.action_error.empty()) {
      return "slurm-triage tried to " + r.action + " it as hung" + at + ", but the command " +
             (r.action_result == "retry" ? "failed so far" : "failed") + ": " + r.action_error +
             ".";
    }
    std::string s =
        "It was " + verb + " as hung by slurm-triage (--triage-on-hang=" + r.action + ")" + at;
    if (hours) {
      s += "; the early cancel left " + fixed(*hours, 2) + " h of its time limit unused";
      s += gpu_hours ? ", saving " + fixed(*gpu_hours, 2) + " GPU-hours against its time limit"
                     : std::string(" (slurmctld listed no GPUs for it: no GPU-hours to count)");
    }
    return s + ".";
  }
  return "";  // notify: the decision's reason is shown beside the basis
}

// The stalls flagged before this one, each of which resumed.
std::string earlier_sentence(const LiveRecord& r) {
  if (r.stalls <= 1 || r.earlier_stalls.empty()) return "";
  std::string s = "It had stalled and resumed before (" + std::to_string(r.stalls - 1) +
                  (r.stalls == 2 ? " time" : " times");
  const size_t shown = r.earlier_stalls.size();
  if (static_cast<int64_t>(shown) < r.stalls - 1)
    s += ", the latest " + std::to_string(shown) + " listed";
  s += "):";
  for (size_t i = 0; i < shown; ++i) {
    const LiveStall& st = r.earlier_stalls[i];
    s += i == 0 ? " " : "; ";
    s += "flagged " + format_utc(st.flagged_usec);
    if (st.step >= 0) s += " after step " + std::to_string(st.step);
    s += ", " + fixed(st.silence_s, 0) + " s silent";
    if (st.resumed_usec != 0) s += ", steps again " + format_utc(st.resumed_usec);
  }
  return s + ".";
}

}  // namespace

LiveSection live_section(const LiveRecord& record, const JobFacts& job, bool alive) {
  LiveSection s;
  s.record = record;
  s.gpu_hours_saved = gpu_hours_saved(record, job);
  s.hours_saved = gpu_hours_saved(record, [&] {
    JobFacts one_gpu = job;  // the same span, counted once
    one_gpu.gpus = 1;
    return one_gpu;
  }());
  if (record.flagged_usec == 0) return s;
  s.interim = alive && record.resumed_usec == 0;
  s.summary = flag_sentence(record);
  const std::string action = action_sentence(record, s.hours_saved, s.gpu_hours_saved);
  if (!action.empty()) s.summary += " " + action;
  if (record.resumed_usec != 0)
    s.summary += " Steps came again at " + format_utc(record.resumed_usec) + ".";
  const std::string earlier = earlier_sentence(record);
  if (!earlier.empty()) s.summary += " " + earlier;
  return s;
}

}  // namespace triage
