// Hardware error counters from sysfs: amdgpu RAS counters (per GPU and block, uncorrectable and
// correctable) and PCIe AER counters (per device, correctable / non-fatal / fatal). Reads go
// through a GuardedReader because the amdgpu RAS sysfs path is where the CPER bug hangs readers;
// such a read becomes a StuckRead in the snapshot instead of a stalled agent.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "collector/io/guarded_reader.h"
#include "collector/sysfs/ib_ports.h"
#include "common/model.h"

namespace triage::collector {

struct RasCounter {
  std::string card;    // "card0"
  std::string device;  // PCI address of the GPU ("0000:c1:00.0"), "" when unknown
  std::string block;   // file name without "_err_count": umc, xgmi_wafl, gfx, mmhub, sdma, ...
  uint64_t ue = 0;
  uint64_t ce = 0;
  std::string path;
};

struct AerCounter {
  std::string device;    // PCI address
  std::string card;      // "card0" when the device is a GPU, else ""
  std::string severity;  // correctable | nonfatal | fatal
  uint64_t total = 0;
  std::string path;
};

struct SysfsSnapshot {
  int64_t time_usec = 0;
  std::vector<RasCounter> ras;
  std::vector<AerCounter> aer;
  std::vector<IbPort> ib;  // InfiniBand / RoCE ports (collector/sysfs/ib_ports.h)
  // The GPU indices present (collector/sysfs/gpu_inventory.h); nullopt: no GPU information.
  std::optional<std::set<std::string>> gpus;
  std::vector<StuckRead> stuck;      // reads that have not returned (this snapshot or before)
  std::vector<std::string> skipped;  // files not read because a reader is stuck on them
  std::vector<std::string> errors;   // "path: problem" for unreadable or malformed files
};

// Parses "ue: 0\nce: 3\n" (extra lines such as "de: 0" are ignored). nullopt if neither is there.
std::optional<std::pair<uint64_t, uint64_t>> parse_ras_count(std::string_view text);
// Parses an aer_dev_* file ("RxErr 0\n...\nTOTAL_ERR_COR 2\n"): the TOTAL_ERR_* line, or the sum
// of the counters when the kernel prints no total.
std::optional<uint64_t> parse_aer_total(std::string_view text);
// The metric name part for a RAS block: xgmi_wafl -> xgmi; others unchanged.
std::string ras_metric_block(std::string_view block);

class HwCounterReader {
 public:
  struct Options {
    std::string sysfs_root = "/sys";
    std::chrono::milliseconds read_timeout{5000};
    size_t max_stuck = 8;
    // Where the InfiniBand devices are; "" means <sysfs_root>/class/infiniband.
    std::string infiniband_dir;
    // Where the GPU device files are, for the GPU inventory ("": no device files looked at).
    std::string gpu_device_dir;
  };
  explicit HwCounterReader(Options options);

  SysfsSnapshot read();

  const GuardedReader& reader() const { return reader_; }

 private:
  Options options_;
  GuardedReader reader_;
};

// Turns successive snapshots into node events. Counters are cumulative since boot, so each event
// carries the current value as its count and an id made of the boot id and the counter's name:
// a counter that keeps rising updates (supersedes) one event instead of making new ones, and a
// restarted agent reading the same values produces the same events again (the spool drops them).
class HwCounterWatch {
 public:
  HwCounterWatch(std::string host, std::string boot_id);
  std::vector<KernelEvent> update(const SysfsSnapshot& snapshot);

 private:
  std::string host_;
  std::string boot_id_;
  std::map<std::string, uint64_t> last_;  // counter key -> last value
};

}  // namespace triage::collector
