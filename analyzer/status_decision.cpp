// Decides the job's status and why (contracts in status_decision.h): the JOB SUMMARY first, then
// Slurm's cancellation lines in the log, Slurm's state, and last the log alone.
#include "analyzer/status_decision.h"

#include "analyzer/node_evidence.h"
#include "common/text.h"

namespace triage {

namespace {

bool cancellation_code(int code, const SignatureCatalog& catalog) {
  const SignatureClass* c = catalog.exit_code_class(code);
  return c != nullptr && c->cancellation;
}

StatusVerdict from_summary(const Triage::Summary& sum, const SignatureCatalog& catalog) {
  const int code = sum.exit_code.value_or(sum.status_word == "SUCCESS" ? 0 : 1);
  if (cancellation_code(code, catalog) || sum.status_word == "CANCELLED")
    return {kStatusCancelled,
            "JOB SUMMARY reports exit " + std::to_string(code) + " (cancellation)"};
  if (sum.status_word == "SUCCESS" || (sum.status_word.empty() && code == 0))
    return {kStatusCompleted, "JOB SUMMARY reports SUCCESS (exit " + std::to_string(code) + ")"};
  return {kStatusFailed, "JOB SUMMARY reports " +
                             (sum.status_word.empty() ? std::string("failure") : sum.status_word) +
                             " (exit " + std::to_string(code) + ")"};
}

StatusVerdict while_alive(const std::string& st, const ProgressProjection& p) {
  if (p.has_steps && p.stalled) {
    return {kStatusHanging, "Slurm state " + st + ", but training steps stopped " +
                                format_duration(*p.stall_seconds) + " ago"};
  }
  return {kStatusRunning,
          "Slurm state " + st +
              (p.has_steps ? (p.stall_undetermined ? "; step progress cannot be timed"
                                                   : "; training steps are advancing")
                           : "; no training step logged yet")};
}

// Slurm's end state: a cancellation class's state is cancelled, another class's (or FAILED) failed.
StatusVerdict after_end(const StatusFacts& f, const SignatureCatalog& catalog) {
  const std::string& st = f.slurm_state;
  const SignatureClass* c = st.empty() ? nullptr : catalog.slurm_state_class(st);
  std::string status;
  if (st == "COMPLETED") {
    status = kStatusCompleted;
  } else if (c != nullptr && c->cancellation) {
    status = kStatusCancelled;
  } else if (c != nullptr || st == "FAILED") {
    status = kStatusFailed;
  } else {
    status = f.cause_found ? kStatusFailed : kStatusUnknown;
  }
  return {status, "no JOB SUMMARY; Slurm state " + (st.empty() ? std::string("ended") : st)};
}

StatusVerdict from_log_alone(const StatusFacts& f) {
  const ProgressProjection& p = f.progress;
  if (p.has_steps && !p.stalled && !p.stall_undetermined && !p.reached_final_step) {
    return {kStatusRunning, "no JOB SUMMARY, Slurm state unavailable; the last step was logged " +
                                format_duration(p.stall_seconds.value_or(0)) + " ago"};
  }
  if (f.cause_found)
    return {kStatusFailed, "no JOB SUMMARY, Slurm state unavailable; the log shows a failure"};
  return {kStatusUnknown, "no JOB SUMMARY, training stopped, and Slurm state unavailable"};
}

}  // namespace

CancellationInLog cancellation_in_log(const ScanResult& scan, const SignatureCatalog& catalog) {
  CancellationInLog out;
  const auto& classes = catalog.classes();
  for (size_t i = 0; i < classes.size() && i < scan.classes.size(); ++i) {
    if (!classes[i].cancellation || scan.classes[i].count == 0) continue;
    out.found = true;
    const Finding* f = scan.classes[i].latest();
    if (out.time_usec == 0 && f != nullptr && f->time_usec > 0) out.time_usec = f->time_usec;
  }
  return out;
}

Timeline build_timeline(const TimelineFacts& f) {
  Timeline tl;
  const std::string& st = f.slurm_state;
  tl.alive = slurm_state_alive(st);
  tl.ended = !st.empty() && !tl.alive && st != "PENDING";
  if (f.slurm_end_usec > 0) {
    tl.end_usec = f.slurm_end_usec;
    tl.end_basis = "job end (Slurm)";
  }
  if (f.log_read && tl.end_usec == 0 && f.summary_finished_usec > 0) {
    tl.end_usec = f.summary_finished_usec;
    tl.end_basis = "JOB SUMMARY end time";
  }
  if (f.log_read) {
    tl.cancel_line = f.cancel_line;
    if (tl.end_usec == 0 && f.cancel_time_usec > 0) {
      tl.end_usec = f.cancel_time_usec;
      tl.end_basis = "cancellation time in the log";
    }
    if (f.summary_found || tl.cancel_line) tl.ended = tl.ended || !tl.alive;
  }
  if (tl.ended && tl.end_usec == 0 && f.log_mtime_usec > 0) {
    tl.end_usec = f.log_mtime_usec;
    tl.end_basis = "log last written";
  }
  return tl;
}

StatusVerdict decide_status(const StatusFacts& f, const SignatureCatalog& catalog) {
  const auto& sum = f.summary;
  if (sum.found && (!sum.status_word.empty() || sum.exit_code)) return from_summary(sum, catalog);
  if (f.timeline.cancel_line)
    return {kStatusCancelled, "Slurm's cancellation line in the log; no JOB SUMMARY"};
  if (f.timeline.alive) return while_alive(f.slurm_state, f.progress);
  if (f.timeline.ended) return after_end(f, catalog);
  // Slurm's view is unavailable: only the log speaks.
  return from_log_alone(f);
}

}  // namespace triage
