// Turns successive port readings (SysfsSnapshot::ib) into node events, by the judgements of
// ib_judgement.h:
//   ib-port-down    a port went down (or was down when first read); the same event is updated when
//                   it comes back, with how long it was down, and when it stays down so long that
//                   it will not come up by itself (stuck-down-s): then with the stuck action and
//                   the remedy (a reboot resets the adapter) until it comes back
//   ib-port-flap    the port came back from enough long-enough downs within the window (GPUd)
//   ib-port-errors  an error counter rose faster than its limit (NVSentinel's defaults)
//   ib-port-rate    an up port runs slower than its peers on the node (GCM's rate check)
// Every event names the port ("mlx5_0/1") in `device` and in fields["port"]. Ids carry the boot id
// and what identifies the episode, so a rising counter supersedes its event and a restarted agent
// reading the same state makes the same ids. The flap history lives in memory: a restarted agent
// starts counting again.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "collector/sysfs/hw_counters.h"
#include "collector/sysfs/ib_judgement.h"
#include "common/model.h"

namespace triage::collector {

class IbPortWatch {
 public:
  IbPortWatch(std::string host, std::string boot_id, IbThresholds thresholds);
  std::vector<KernelEvent> update(const SysfsSnapshot& snapshot);

 private:
  struct PortMemory {
    bool down = false;
    int64_t down_since_usec = 0;
    std::string down_id;
    int64_t still_since_usec = 0;         // down without a break since (link_downed unmoved)
    std::optional<uint64_t> link_downed;  // its value at still_since_usec
    bool stuck = false;                   // the down event says it will not come up
    std::vector<int64_t> flaps_usec;      // when each flap ended (the port came back)
    std::map<std::string, uint64_t> counters;
    int64_t counters_usec = 0;
  };

  std::string host_;
  std::string boot_id_;
  IbThresholds thresholds_;
  std::map<std::string, PortMemory> ports_;  // by port name
  std::set<std::string> slow_reported_;      // "port@rate" already reported
};

}  // namespace triage::collector
