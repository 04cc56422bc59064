// Which failure is the job's primary one. Every class found is gathered (the log, other logs,
// trusted node and Slurm evidence, and the classes derived from progress and status), ranked by
// failure_ranking.h, with the JOB SUMMARY's exit code as the last resort; the primary's evidence
// lines are then chosen.
#pragma once

#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/failure_ranking.h"
#include "analyzer/log_scanner.h"
#include "analyzer/node_evidence.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// The classes found in one job. Occurrences point at findings in the scans or in this object, so
// it is filled in place and never copied or moved.
struct FoundClasses {
  std::vector<ClassOccurrence> occ;
  std::vector<const ClassMatches*> matches;  // per occurrence: its log matches (null otherwise)
  std::deque<TrustedFinding> trusted;        // every trusted finding, known class or not
  std::deque<Finding> derived;               // derived and exit-code findings

  FoundClasses() = default;
  FoundClasses(const FoundClasses&) = delete;
  FoundClasses& operator=(const FoundClasses&) = delete;
};

// Adds each class the main log matched (at its earliest finding, a cause-pattern line first), then
// the classes only other logs matched (ordered after every main-log line).
void add_log_classes(FoundClasses& found, const ScanResult* scan,
                     const std::vector<const ScanResult*>& extra_scans);

// Adds trusted findings: one occurrence per class, counted, and decisive when any of them is.
void add_trusted_classes(FoundClasses& found, std::vector<TrustedFinding> trusted,
                         const SignatureCatalog& catalog);

struct DerivedFacts {
  std::string status;
  ProgressProjection progress;
  std::string last_step_text;  // the last step line's text
  int64_t log_lines = 0;
  std::string last_line_text;  // the log's last line ("" when the log was not read)
};

// The findings of the derived classes: the stall class when steps stopped before the job ended
// (or while it hangs), and the no-evidence class when the status is unknown.
std::vector<Finding> derived_findings(const DerivedFacts& facts, const SignatureCatalog& catalog);

// Adds derived findings; a stall counts from just after its last step line.
void add_derived_classes(FoundClasses& found, std::vector<Finding> derived,
                         const SignatureCatalog& catalog);

// The finding a JOB SUMMARY exit code stands for when the catalog gives the code to a class that is
// not a cancellation (134 -> signal-kill); nullopt otherwise.
std::optional<Finding> exit_code_finding(const Triage::Summary& summary,
                                         const SignatureCatalog& catalog);

// Ranks the classes found; a failed job with no primary takes its exit code's class, added to
// `found`. No primary when `wants_primary` is false (the job completed or runs).
RankingResult choose_primary(FoundClasses& found, bool wants_primary,
                             const Triage::Summary& summary, const SignatureCatalog& catalog);

struct PrimaryEvidence {
  std::string stage;  // the stage of its first finding, else the class's
  std::vector<Finding> evidence;
  std::vector<std::string> notes;
};

// The primary's evidence: its first lines and last line, the exception line ending a traceback it
// sits in, and (for trusted evidence) the related task exits on the same host; log lines first.
PrimaryEvidence primary_evidence(const FoundClasses& found, int primary,
                                 const std::vector<TracebackFact>& tracebacks,
                                 const SignatureCatalog& catalog);

}  // namespace triage
