// What PyTorch's NCCL watchdog says about each rank's collectives: the last collective a rank
// enqueued, the last one that completed, and the one it timed out in. The watchdog prints these
// per rank and per process group in several wordings across PyTorch 2.x (docs/analyze.md, "Where a
// hang began", lists them with their sources); parse_collective_line() reads all of them from one
// line, and where_hang_began (hang_origin.h) compares the ranks.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "analyzer/line_text.h"

namespace triage {

// A sequence number the line did not state. PyTorch itself prints -1 for "none yet", so the
// absence needs a value of its own.
inline constexpr int64_t kSeqUnknown = INT64_MIN;

// One rank's view of one process group, from the lines that mention them (the latest value of each
// field wins: the watchdog's numbers only grow within a process).
struct CollectiveProgress {
  int64_t rank = -1;  // the line's task label or [rankN]: prefix, else the rank it printed
  std::string pg;     // the process group as printed ("0", "1"); "" when the line names none
  int64_t last_enqueued = kSeqUnknown;
  int64_t last_completed = kSeqUnknown;
  int64_t timed_out = kSeqUnknown;  // the collective the watchdog timed out (or failed) in
  // "Received a dump signal due to a collective timeout from rank R": R, or -1; the rank whose
  // watchdog fired first (a rank waiting in the collective, not the one that never came).
  int64_t dump_from_rank = -1;
  int64_t line = 0;  // the last line that said something about it

  // How far the rank got: the last collective it is known to have enqueued (a collective it timed
  // out in was enqueued too), or kSeqUnknown.
  int64_t reached() const;
};

// Reads one line: nullopt when it states no sequence number of a rank's collectives.
std::optional<CollectiveProgress> parse_collective_line(const LineText& lt);

}  // namespace triage
