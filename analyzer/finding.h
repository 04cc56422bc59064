// A finding: one piece of evidence that a failure class happened, with where it came from. Log
// lines are untrusted (a user can print anything); kernel events and Slurm facts are trusted.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

namespace triage {

struct Finding {
  std::string cls;
  // "log" for the job's log; a path relative to the job dir for other files; "kernel:<host>" for a
  // node's kernel event; "slurm" for the job's Slurm state; "tasks:<host>" for task exits.
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

  // The line this finding counts from when deciding which error came first: a specific error
  // printed at the end of a traceback happened where the traceback began.
  int64_t effective_line() const {
    return traceback_line > 0 && traceback_line < line ? traceback_line : line;
  }
};

// Every match of one class, bounded: the first and last few in full, and a count. A log with a
// million OOM lines costs the same memory as one with ten.
struct ClassMatches {
  static constexpr size_t kKeepFirst = 8;
  static constexpr size_t kKeepLast = 5;

  uint64_t count = 0;
  std::vector<Finding> first;
  std::deque<Finding> last;  // after `first` is full; at most kKeepLast

  void add(Finding f) {
    ++count;
    if (first.size() < kKeepFirst) {
      first.push_back(std::move(f));
      return;
    }
    last.push_back(std::move(f));
    if (last.size() > kKeepLast) last.pop_front();
  }
  const Finding* earliest() const { return first.empty() ? nullptr : &first.front(); }
  const Finding* latest() const {
    if (!last.empty()) return &last.back();
    return first.empty() ? nullptr : &first.back();
  }
};

}  // namespace triage
