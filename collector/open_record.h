// A kernel record being assembled: the lines of one event (a call trace, a page fault and its
// detail lines, an OOM report) while more of them may still come.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "collector/kernel_rules.h"

namespace triage::collector {

// Named captures in the order first seen; the first value of each name wins. A record holds a
// handful, so a flat list is cheaper than a map (floods make one record per line).
class Captures {
 public:
  void add(std::string_view name, std::string_view value) {
    if (find(name) == nullptr) items_.emplace_back(name, value);
  }
  const std::string* find(std::string_view name) const {
    for (const auto& [n, v] : items_) {
      if (n == name) return &v;
    }
    return nullptr;
  }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

 private:
  std::vector<std::pair<std::string, std::string>> items_;
};

struct OpenRecord {
  size_t rule = 0;  // index into KernelRules::rules()
  std::string id;   // the event id (from the first line)
  std::string device;
  std::string boot_id;
  std::string host;
  std::string kernel_device;
  std::string first_message;       // the kernel message of the first line (no text prefix)
  std::vector<std::string> lines;  // the first KernelEvent::kMaxEventLines lines, verbatim
  size_t line_count = 0;           // every line, kept or not
  Captures captures;
  int64_t first_time = -1;  // record clock (monotonic, else wall), -1 = unknown
  int64_t last_time = -1;
  int64_t first_realtime = 0;
  int64_t last_realtime = 0;
  int64_t first_monotonic = -1;
  int64_t last_fed_wall = 0;  // our own monotonic clock when the last line came (flush idle)

  // Refining rules: which of each refiner's `match` patterns have matched some line so far, and
  // what they captured.
  std::vector<std::vector<bool>> refine_hits;
  std::vector<Captures> refine_captures;

  void capture(const std::string& name, std::string_view value) { captures.add(name, value); }
  // Adds a line (verbatim text and the kernel message within it) and runs the refiners over it.
  void add_line(const KernelRules& rules, std::string_view verbatim, std::string_view message);
};

}  // namespace triage::collector
