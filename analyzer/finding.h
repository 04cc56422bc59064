// A finding: one piece of evidence, with where it came from. From the log triage, evidence that a
// failure class happened; from a metrics playbook, something its metrics showed. Log lines are
// untrusted (a user can print anything); kernel events and Slurm facts are trusted; metrics are
// trusted only from the admin-run cluster Prometheus. analyzer/finding_render.h renders it.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/model.h"

namespace triage {

struct Finding {
  std::string cls;  // empty for metrics findings
  // "log" for the job's log; a path relative to the job dir for other files; "kernel:<host>" for a
  // node's kernel event; "slurm" for the job's Slurm state; "tasks:<host>" for task exits;
  // "metrics:<playbook id>" for a metrics playbook's.
  std::string source = "log";
  int64_t line = 0;  // 1-based line in `source` (0 = not a file line)
  std::string text;  // verbatim, possibly truncated (see `truncated`)
  bool truncated = false;
  int64_t rank = -1;
  std::string host;
  int64_t time_usec = 0;
  std::string stage;
  bool trusted = false;
  std::vector<std::pair<std::string, std::string>> captures;
  // When the line sits inside a Python traceback of the same rank: the traceback's first line.
  int64_t traceback_line = 0;
  // Matched a `cause-pattern` of its class.
  bool cause = false;
  // The vocabulary entry whose token named the class on this line (empty: a pattern matched).
  std::string vocabulary;
  // Graded findings (the metrics playbooks') say how bad they are and may name several hosts
  // (`host` then holds the one host when there is one). A log, kernel or Slurm finding is evidence
  // of its class, not graded: no severity, its one host in `host`.
  std::optional<Severity> severity;
  std::vector<std::string> hosts;

  // The line this finding counts from when deciding which error came first: a specific error
  // printed at the end of a traceback happened where the traceback began.
  int64_t effective_line() const {
    return traceback_line > 0 && traceback_line < line ? traceback_line : line;
  }

  // Back to a default Finding, every field, keeping the strings' and vectors' storage: the scanner
  // refills the same few findings for each of a million repeated matches.
  void reset() {
    cls.clear();
    source.assign("log");
    line = 0;
    text.clear();
    truncated = false;
    rank = -1;
    host.clear();
    time_usec = 0;
    stage.clear();
    trusted = false;
    captures.clear();
    traceback_line = 0;
    cause = false;
    vocabulary.clear();
    severity.reset();
    hosts.clear();
  }
};

// Every match of one class, bounded: the first and last few in full, and a count. A log with a
// million OOM lines costs the same memory as one with ten.
struct ClassMatches {
  static constexpr size_t kKeepFirst = 8;
  static constexpr size_t kKeepLast = 5;

  uint64_t count = 0;
  std::vector<Finding> first;
  // After `first` is full; at most kKeepLast, oldest first once settle() ran. While matches are
  // added it is a ring whose oldest entry is at `oldest`.
  std::vector<Finding> last;
  size_t oldest = 0;

  // Counts one more match and returns the finding to fill in for it: a new one while `first` or
  // `last` has room, else the oldest of `last`, reset (its storage kept).
  Finding& next() {
    ++count;
    if (first.size() < kKeepFirst) return first.emplace_back();
    if (last.size() < kKeepLast) return last.emplace_back();
    Finding& f = last[oldest];
    oldest = (oldest + 1) % last.size();
    f.reset();
    return f;
  }
  void add(Finding f) { next() = std::move(f); }
  // Puts `last` in order, oldest first; the scanner calls it when a scan ends.
  void settle() {
    std::rotate(last.begin(), last.begin() + static_cast<std::ptrdiff_t>(oldest), last.end());
    oldest = 0;
  }
  const Finding* earliest() const { return first.empty() ? nullptr : &first.front(); }
  const Finding* latest() const {
    if (!last.empty()) return &last.back();
    return first.empty() ? nullptr : &first.back();
  }
};

}  // namespace triage
