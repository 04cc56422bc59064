#include "collector/event_folder.h"

#include <algorithm>

namespace triage::collector {

int64_t EventFolder::deadline(const Group& g) const {
  if (g.last < 0 || g.first < 0) return INT64_MAX;
  return std::min(g.last + quiet_, g.first + max_span_);
}

void EventFolder::emit(std::unordered_map<std::string, Group>::iterator it,
                       std::vector<KernelEvent>& out) {
  out.push_back(std::move(it->second.event));
  groups_.erase(it);
}

std::string EventFolder::add(const std::string& key, int64_t first, int64_t last, int64_t wall,
                             std::vector<KernelEvent>& out, bool& merged,
                             const std::function<KernelEvent()>& make,
                             const std::function<void(KernelEvent&)>& merge) {
  merged = false;
  auto it = groups_.find(key);
  if (it != groups_.end()) {
    Group& g = it->second;
    const bool in_burst =
        first < 0 || g.last < 0 || (first - g.last <= quiet_ && last - g.first <= max_span_);
    if (in_burst) {
      merge(g.event);
      if (last >= 0) g.last = std::max(g.last, last);
      if (g.first < 0) g.first = first;
      g.wall = wall;
      next_expiry_ = std::min(next_expiry_, deadline(g));
      merged = true;
      return g.event.id;
    }
    emit(it, out);
  }
  if (groups_.size() >= max_groups_) {
    // Too many distinct floods at once: the one that has waited longest goes out first.
    auto oldest = std::min_element(
        groups_.begin(), groups_.end(),
        [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
    emit(oldest, out);
  }
  Group g;
  g.first = first;
  g.last = last;
  g.wall = wall;
  g.order = next_order_++;
  g.event = make();
  next_expiry_ = std::min(next_expiry_, deadline(g));
  std::string id = g.event.id;
  groups_.emplace(key, std::move(g));
  return id;
}

void EventFolder::expire(int64_t now, std::vector<KernelEvent>& out) {
  // next_expiry_ is a lower bound of every burst's deadline (bursts only ever get later ones), so
  // most records cost one comparison.
  if (groups_.empty() || now < 0 || now <= next_expiry_) return;
  std::vector<std::pair<uint64_t, std::string>> done;
  int64_t lowest = INT64_MAX;
  for (const auto& [key, g] : groups_) {
    if (now > deadline(g)) {
      done.emplace_back(g.order, key);
    } else {
      lowest = std::min(lowest, deadline(g));
    }
  }
  next_expiry_ = lowest;
  // Emit in the order the bursts began, so output does not depend on hashing.
  std::sort(done.begin(), done.end());
  for (const auto& d : done)
    emit(groups_.find(d.second), out);
}

void EventFolder::flush(int64_t wall_now, int64_t idle_usec, std::vector<KernelEvent>& out) {
  std::vector<std::pair<uint64_t, std::string>> done;
  for (const auto& [key, g] : groups_) {
    if (idle_usec == 0 || wall_now - g.wall >= idle_usec) done.emplace_back(g.order, key);
  }
  std::sort(done.begin(), done.end());
  for (const auto& d : done)
    emit(groups_.find(d.second), out);
  if (groups_.empty()) next_expiry_ = INT64_MAX;
}

}  // namespace triage::collector
