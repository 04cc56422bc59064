#include "collector/open_record.h"

#include "common/model.h"

namespace triage::collector {

void OpenRecord::add_line(const KernelRules& rules, std::string_view verbatim,
                          std::string_view message) {
  ++line_count;
  if (lines.size() < KernelEvent::kMaxEventLines) lines.emplace_back(verbatim);
  const KernelRule& r = rules.rules()[rule];
  if (refine_hits.size() != r.refined_by.size()) {
    refine_hits.resize(r.refined_by.size());
    refine_captures.resize(r.refined_by.size());
  }
  for (size_t i = 0; i < r.refined_by.size(); ++i) {
    const KernelRule& refiner = rules.rules()[r.refined_by[i]];
    auto& hits = refine_hits[i];
    hits.resize(refiner.matches.size(), false);
    for (size_t m = 0; m < refiner.matches.size(); ++m) {
      if (hits[m]) continue;
      hits[m] = match_pattern(
          refiner.matches[m], message,
          [&](const std::string& name, std::string_view v) { refine_captures[i].add(name, v); });
    }
  }
}

}  // namespace triage::collector
