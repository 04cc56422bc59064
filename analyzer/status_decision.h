// The job's status (completed, failed, cancelled, running, hanging or unknown) and why, from what
// is trusted most to least: the JOB SUMMARY, Slurm's cancellation lines in the log, Slurm's state,
// then the log alone (step progress, a cause found).
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// Whether and when the job ended, gathered before anything is decided.
struct Timeline {
  bool alive = false;    // Slurm says the job has not ended
  bool ended = false;    // Slurm (or the log) says it has
  int64_t end_usec = 0;  // when it ended, when known
  std::string end_basis;
  bool cancel_line = false;  // a cancellation class matched the log ("*** JOB ... CANCELLED AT")
};

struct TimelineFacts {
  std::string slurm_state;     // trusted ("" = unknown)
  int64_t slurm_end_usec = 0;  // the job's end time in the agent's evidence
  bool log_read = false;
  bool summary_found = false;
  int64_t summary_finished_usec = 0;
  bool cancel_line = false;
  int64_t cancel_time_usec = 0;  // the first timed cancellation line's time (0 = none)
  int64_t log_mtime_usec = 0;
};

// The cancellation lines of a scanned log, in the catalog's class order: whether any matched, and
// the time of the latest line of the first cancellation class whose latest line is timed.
struct CancellationInLog {
  bool found = false;
  int64_t time_usec = 0;
};
CancellationInLog cancellation_in_log(const ScanResult& scan, const SignatureCatalog& catalog);

// Whether the job ended and when: Slurm's end time, else the summary's, else the cancellation
// line's, else (once ended) the log's last write.
Timeline build_timeline(const TimelineFacts& f);

struct StatusFacts {
  Triage::Summary summary;
  Timeline timeline;
  std::string slurm_state;
  ProgressProjection progress;
  bool cause_found = false;  // the log matched a class whose role is cause
};

struct StatusVerdict {
  std::string status = kStatusUnknown;
  std::string reason;
};

// The status and the sentence that justifies it; the catalog says which exit codes and Slurm
// states are a cancellation.
StatusVerdict decide_status(const StatusFacts& f, const SignatureCatalog& catalog);

}  // namespace triage
