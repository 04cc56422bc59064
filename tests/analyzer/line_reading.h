// What the shipped catalog reads in a log: the vocabulary tests' common questions.
#pragma once

#include <cstdint>
#include <string>

#include "analyzer/log_scanner.h"
#include "test_support.h"

namespace triage::test {

// The class of the first finding on line `line_no` of `log`, and the vocabulary entry that named
// it (both empty when no finding is on that line).
struct Read {
  std::string cls;
  std::string vocabulary;
};

inline Read read_line(const std::string& log, int64_t line_no) {
  const ScanResult r = scan_text(log);
  const auto& classes = shipped_catalog().classes();
  for (size_t i = 0; i < r.classes.size(); ++i) {
    for (const Finding& f : r.classes[i].first) {
      if (f.line == line_no) return {classes[i].id, f.vocabulary};
    }
  }
  return {};
}

// Whether any line of `log` is a finding of any class.
inline bool finds_anything(const std::string& log) {
  const ScanResult r = scan_text(log);
  for (const auto& c : r.classes) {
    if (c.count > 0) return true;
  }
  return false;
}

}  // namespace triage::test
