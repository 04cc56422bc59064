#include "agent/node/event_store.h"

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
    index_one(events_.size() - 1);
    if (events_.size() > max_events_ + max_events_ / 8) prune(0);
    return;
  }
  KernelEvent& old = events_[it->second];
  if (old.time_usec != 0 && (e.time_usec == 0 || old.time_usec < e.time_usec)) {
    e.time_usec = old.time_usec;
  }
  // A newer version may last longer or name a pid the first did not: index it afresh.
  unindex_one(it->second);
  old = std::move(e);
  index_one(it->second);
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
  for (auto& tier : by_time_)
    tier.clear();
  long_lived_.clear();
  by_job_.clear();
  by_pid_.clear();
  for (size_t i = 0; i < events_.size(); ++i) {
    index_.emplace(events_[i].id, i);
    index_one(i);
  }
}

void EventStore::index_one(size_t pos) {
  const KernelEvent& e = events_[pos];
  if (e.job_id) by_job_[*e.job_id].insert(pos);
  if (e.pid) by_pid_[*e.pid].insert(pos);
  if (e.time_usec == 0) return;  // no time: only a job or pid can claim it
  const int64_t span = std::max(e.last_usec, e.time_usec) - e.time_usec;
  for (size_t t = 0; t < kSpanTiersUsec.size(); ++t) {
    if (span <= kSpanTiersUsec[t]) {
      by_time_[t].emplace(e.time_usec, pos);
      return;
    }
  }
  long_lived_.insert(pos);
}

void EventStore::unindex_one(size_t pos) {
  const KernelEvent& e = events_[pos];
  const auto drop = [pos](auto& map, auto key) {
    auto it = map.find(key);
    if (it == map.end()) return;
    it->second.erase(pos);
    if (it->second.empty()) map.erase(it);
  };
  if (e.job_id) drop(by_job_, *e.job_id);
  if (e.pid) drop(by_pid_, *e.pid);
  for (auto& tier : by_time_)
    tier.erase({e.time_usec, pos});
  long_lived_.erase(pos);
}

std::vector<size_t> EventStore::candidates(uint64_t job_id, const std::vector<int64_t>& pids,
                                           int64_t from_usec, int64_t to_usec) const {
  std::vector<size_t> out;
  if (auto it = by_job_.find(job_id); it != by_job_.end()) {
    out.insert(out.end(), it->second.begin(), it->second.end());
  }
  for (const int64_t pid : pids) {
    if (auto it = by_pid_.find(pid); it != by_pid_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
    }
  }
  if (from_usec <= to_usec) {
    for (size_t t = 0; t < kSpanTiersUsec.size(); ++t) {
      // An event of this tier overlapping the window began at most the tier's span before it.
      const int64_t back = kSpanTiersUsec[t];
      const int64_t lo = from_usec < INT64_MIN + back ? INT64_MIN : from_usec - back;
      for (auto it = by_time_[t].lower_bound({lo, 0});
           it != by_time_[t].end() && it->first <= to_usec; ++it) {
        out.push_back(it->second);
      }
    }
    out.insert(out.end(), long_lived_.begin(), long_lived_.end());
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

}  // namespace triage::agent
