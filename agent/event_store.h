// The node's events in memory, one entry per event id. A later version of an event (a flood
// whose count grew, a stuck read that is still stuck) replaces the earlier one; a version that
// adds nothing (a replay after a restart) is recognised as a duplicate and dropped, which is what
// makes ingestion exactly-once across restarts.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model.h"

namespace triage::agent {

class EventStore {
 public:
  enum class Change { kNew, kUpdated, kDuplicate };

  explicit EventStore(size_t max_events) : max_events_(max_events) {}

  // What `e` would be relative to the stored version (does not change anything).
  Change classify(const KernelEvent& e) const;
  // Stores `e` (new or newer). Keeps the earliest first-seen time of both versions.
  void apply(KernelEvent e);
  // Stores a replayed spool line: the newest version wins, duplicates are ignored.
  void restore(KernelEvent e) {
    if (classify(e) != Change::kDuplicate) apply(std::move(e));
  }

  const KernelEvent* find(const std::string& id) const;
  const std::vector<KernelEvent>& events() const { return events_; }
  size_t size() const { return events_.size(); }

  // Drops events last seen before `cutoff_usec`, and the oldest beyond the size cap.
  size_t prune(int64_t cutoff_usec);

 private:
  void reindex();

  size_t max_events_;
  std::vector<KernelEvent> events_;  // in order of first arrival
  std::unordered_map<std::string, size_t> index_;
};

}  // namespace triage::agent
