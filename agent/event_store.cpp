#include "agent/event_store.h"

#include <algorithm>

namespace triage::agent {

EventStore::Change EventStore::classify(const KernelEvent& e) const {
  const KernelEvent* old = find(e.id);
  if (old == nullptr) return Change::kNew;
  if (e.count > old->count || e.last_usec > old->last_usec || e.lines.size() > old->lines.size()) {
    return Change::kUpdated;
  }
  return Change::kDuplicate;
}

void EventStore::apply(KernelEvent e) {
  auto it = index_.find(e.id);
  if (it == index_.end()) {
    index_.emplace(e.id, events_.size());
    events_.push_back(std::move(e));
    if (events_.size() > max_events_ + max_events_ / 8) prune(0);
    return;
  }
  KernelEvent& old = events_[it->second];
  if (old.time_usec != 0 && (e.time_usec == 0 || old.time_usec < e.time_usec)) {
    e.time_usec = old.time_usec;
  }
  old = std::move(e);
}

const KernelEvent* EventStore::find(const std::string& id) const {
  auto it = index_.find(id);
  return it == index_.end() ? nullptr : &events_[it->second];
}

size_t EventStore::prune(int64_t cutoff_usec) {
  const size_t before = events_.size();
  if (cutoff_usec > 0) {
    events_.erase(std::remove_if(events_.begin(), events_.end(),
                                 [&](const KernelEvent& e) {
                                   const int64_t last = std::max(e.last_usec, e.time_usec);
                                   return last != 0 && last < cutoff_usec;
                                 }),
                  events_.end());
  }
  if (events_.size() > max_events_) {
    // Oldest by last activity go first.
    std::vector<size_t> order(events_.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return std::max(events_[a].last_usec, events_[a].time_usec) >
             std::max(events_[b].last_usec, events_[b].time_usec);
    });
    std::vector<bool> keep(events_.size(), false);
    for (size_t i = 0; i < max_events_; ++i)
      keep[order[i]] = true;
    std::vector<KernelEvent> kept;
    kept.reserve(max_events_);
    for (size_t i = 0; i < events_.size(); ++i) {
      if (keep[i]) kept.push_back(std::move(events_[i]));
    }
    events_ = std::move(kept);
  }
  reindex();
  return before - events_.size();
}

void EventStore::reindex() {
  index_.clear();
  for (size_t i = 0; i < events_.size(); ++i)
    index_.emplace(events_[i].id, i);
}

}  // namespace triage::agent
