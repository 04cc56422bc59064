// Which of the failures found is the root cause. The earliest real error usually is; later ones are
// its consequences (an OOM on one node, NCCL timeouts on the others, then a heartbeat timeout). The
// catalog's `explains` lists say which classes follow from which, so that a consequence printed
// early (or a cause Slurm reports only at the end) does not win.
#pragma once

#include <cstdint>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/signature_catalog.h"

namespace triage {

struct ClassOccurrence {
  uint32_t cls = 0;
  const Finding* first = nullptr;  // the earliest finding of the class
  uint64_t count = 0;
  bool decisive = false;  // trusted evidence that names the failure on its own
  // Position in the job's timeline for "earliest": the log line (a specific error at the end of
  // a traceback counts from the traceback's start); findings from outside the log sort after it.
  int64_t order = 0;
  // A line matched by a `cause-pattern`: ranked as a cause whatever the class's role.
  bool cause = false;
  // The earliest `order` of a finding a vocabulary token named (INT64_MAX: none did). Such a class
  // explains a `generic` class found at that line or later.
  int64_t named_order = INT64_MAX;
};

struct RankingResult {
  int primary = -1;               // index into the occurrences, or -1
  std::vector<int> explained_by;  // per occurrence: the occurrence that explains it, or -1
};

// Picks the primary failure:
//  1. decisive trusted findings (kernel OOM kill of a rank, hardware faults), earliest first;
//  2. causes no other found class explains, earliest first (priority breaks ties);
//  3. any cause, earliest first; 4. consequences; 5. minor classes, when `allow_minor`.
RankingResult rank_failures(const SignatureCatalog& catalog,
                            const std::vector<ClassOccurrence>& occ, bool allow_minor);

}  // namespace triage
