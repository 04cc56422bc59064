#include "collector/health/rcu_stall_repeats.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <optional>
#include <string>
#include <utility>

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
  uint64_t value = 0;
  const char* begin = it->second.data();
  const char* end = begin + it->second.size();
  const auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec != std::errc() || ptr != end || value == 0) return std::nullopt;
  return value;
}

}  // namespace

std::vector<const KernelEvent*> repeated_rcu_stalls(const std::vector<const KernelEvent*>& stalls) {
  std::vector<std::pair<const KernelEvent*, uint64_t>> timed;
  std::map<std::string, uint64_t> shortest;  // flavor -> shortest t= (about one stall timeout)
  for (const KernelEvent* e : stalls) {
    if (e == nullptr) continue;
    const auto t = stall_jiffies(*e);
    if (!t) continue;
    const auto f = e->fields.find("flavor");
    const std::string flavor = f == e->fields.end() ? "" : f->second;
    timed.emplace_back(e, *t);
    auto [it, fresh] = shortest.try_emplace(flavor, *t);
    if (!fresh) it->second = std::min(it->second, *t);
  }
  std::vector<const KernelEvent*> repeats;
  for (const auto& [e, t] : timed) {
    const auto f = e->fields.find("flavor");
    const uint64_t first = shortest.at(f == e->fields.end() ? "" : f->second);
    if (t >= kRcuStallRepeatFactor * first) repeats.push_back(e);
  }
  return repeats;
}

}  // namespace triage::collector
