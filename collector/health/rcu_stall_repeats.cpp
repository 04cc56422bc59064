#include "collector/health/rcu_stall_repeats.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>

#include "common/text.h"

namespace triage::collector {

namespace {

// The report's `t=`, when it has one the kernel does not doubt itself.
std::optional<uint64_t> stall_jiffies(const KernelEvent& e) {
  const bool doubted = std::any_of(e.lines.begin(), e.lines.end(), [](const std::string& l) {
    return l.find("(false positive?)") != std::string::npos;
  });
  if (doubted) return std::nullopt;
  const auto it = e.fields.find("jiffies");
  if (it == e.fields.end()) return std::nullopt;
  const auto value = parse_uint(it->second);
  if (!value || *value == 0) return std::nullopt;
  return value;
}

struct TimedStall {
  const KernelEvent* event;
  uint64_t jiffies;
  std::string flavor;
};

}  // namespace

std::vector<const KernelEvent*> repeated_rcu_stalls(const std::vector<const KernelEvent*>& stalls) {
  std::vector<TimedStall> timed;
  std::map<std::string, uint64_t> shortest;  // flavor -> shortest t= (about one stall timeout)
  for (const KernelEvent* e : stalls) {
    if (e == nullptr) continue;
    const auto t = stall_jiffies(*e);
    if (!t) continue;
    const auto f = e->fields.find("flavor");
    TimedStall s{e, *t, f == e->fields.end() ? "" : f->second};
    auto [it, fresh] = shortest.try_emplace(s.flavor, s.jiffies);
    if (!fresh) it->second = std::min(it->second, s.jiffies);
    timed.push_back(std::move(s));
  }
  std::vector<const KernelEvent*> repeats;
  for (const TimedStall& s : timed) {
    if (s.jiffies >= kRcuStallRepeatFactor * shortest.at(s.flavor)) repeats.push_back(s.event);
  }
  return repeats;
}

}  // namespace triage::collector
