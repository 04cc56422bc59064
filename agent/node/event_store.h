// The node's events in memory, one entry per event id. A later version of an event (a flood
// whose count grew, a stuck read that is still stuck) replaces the earlier one; a version that
// adds nothing (a replay after a restart) is recognised as a duplicate and dropped, which is what
// makes ingestion exactly-once across restarts.
//
// Besides arrival order the store indexes events by time, by the job they name and by the pid they
// name, so that finding the events of one job costs what that job's window holds, not what the
// node saw in its whole history (a node keeps tens of thousands of events across thousands of
// jobs).
#pragma once

#include <array>
#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
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

  // Positions in events() of every event that names `job_id`, names one of `pids`, or was active
  // at some time in [from_usec, to_usec] (its first-seen..last-seen span overlaps it); ascending.
  // A superset of the job's events: the caller still applies the attribution rules.
  std::vector<size_t> candidates(uint64_t job_id, const std::vector<int64_t>& pids,
                                 int64_t from_usec, int64_t to_usec) const;

  // Events are indexed by first-seen time in tiers of how long they stayed active, so a window
  // query looks back only as far as the longest span of each tier; events active for more than a
  // day (a stuck read) are few and checked by every query.
  static constexpr std::array<int64_t, 3> kSpanTiersUsec = {60LL * 1000000, 3600LL * 1000000,
                                                            86400LL * 1000000};

 private:
  void reindex();
  void index_one(size_t pos);
  void unindex_one(size_t pos);

  size_t max_events_;
  std::vector<KernelEvent> events_;  // in order of first arrival
  std::unordered_map<std::string, size_t> index_;
  std::array<std::set<std::pair<int64_t, size_t>>, kSpanTiersUsec.size()>
      by_time_;  // (first seen, position)
  std::set<size_t> long_lived_;
  std::unordered_map<uint64_t, std::set<size_t>> by_job_;
  std::unordered_map<int64_t, std::set<size_t>> by_pid_;
};

}  // namespace triage::agent
