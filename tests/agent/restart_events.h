// The kernel events the restart test feeds: a deterministic stream in which every fifth event is
// a later version of an earlier one (a flood that grew), so that exactly-once must hold for new
// events and for superseding versions alike.
#pragma once

#include <cstdint>
#include <string>

#include "common/model.h"

namespace triage::agent::testing {

inline KernelEvent restart_event(uint64_t i) {
  KernelEvent e;
  const bool update = i % 5 == 4;
  const uint64_t base = update ? i - 4 : i;
  e.id = "boot-r:" + std::to_string(base);
  e.kind = base % 2 == 0 ? "gpu-ring-timeout" : "hung-task";
  e.severity = Severity::kError;
  e.boot_id = "boot-r";
  e.time_usec = 1700000000000000LL + static_cast<int64_t>(base) * 1000;
  e.last_usec = e.time_usec + (update ? 500 : 0);
  e.count = update ? 2 : 1;
  e.lines = {"[" + std::to_string(base) + "] kernel line"};
  return e;
}

inline std::string restart_position(uint64_t i) {
  return "pos:" + std::to_string(i);
}

}  // namespace triage::agent::testing
