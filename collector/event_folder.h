// Folds floods: events of the same rule, kind, device and shape (the first line with its numbers
// blanked out) that keep coming in a burst become one event with a count and first/last time.
// A burst ends when no repeat came for `quiet` (record time) or once it spans `max_span`; memory
// stays flat however long it lasts (one event per distinct shape, lines capped).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model.h"

namespace triage::collector {

class EventFolder {
 public:
  EventFolder(int64_t quiet_usec, int64_t max_span_usec, size_t max_groups = 4096)
      : quiet_(quiet_usec), max_span_(max_span_usec), max_groups_(max_groups) {}

  // One occurrence of the flood `key`, at record times `first`/`last` (-1 = unknown) and our own
  // monotonic clock `wall`. If it starts a burst, `make()` builds its event, which is held;
  // otherwise `merge(event)` adds it to the earlier event of the burst. A burst this ends goes to
  // `out`. Returns the id of the event that stands for this occurrence (`merged`: an earlier one).
  std::string add(const std::string& key, int64_t first, int64_t last, int64_t wall,
                  std::vector<KernelEvent>& out, bool& merged,
                  const std::function<KernelEvent()>& make,
                  const std::function<void(KernelEvent&)>& merge);
  // Emits bursts that are over at record time `now`.
  void expire(int64_t now, std::vector<KernelEvent>& out);
  // Emits bursts whose last event came at least `idle_usec` ago on our clock (all when 0).
  void flush(int64_t wall_now, int64_t idle_usec, std::vector<KernelEvent>& out);
  bool empty() const { return groups_.empty(); }

 private:
  struct Group {
    KernelEvent event;
    int64_t first = -1;
    int64_t last = -1;
    int64_t wall = 0;
    uint64_t order = 0;
  };
  int64_t deadline(const Group& g) const;  // record time after which the burst is over
  void emit(std::unordered_map<std::string, Group>::iterator it, std::vector<KernelEvent>& out);

  int64_t quiet_;
  int64_t max_span_;
  size_t max_groups_;
  uint64_t next_order_ = 0;
  int64_t next_expiry_ = INT64_MAX;
  std::unordered_map<std::string, Group> groups_;
};

}  // namespace triage::collector
