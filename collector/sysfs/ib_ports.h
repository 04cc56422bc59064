// InfiniBand / RoCE ports as sysfs shows them under /sys/class/infiniband/<dev>/ports/<n>/: the
// port's logical state, physical state, link layer and rate, and its error counters (counters/*
// by name, hw_counters/* where the driver has them). The files are read through the node's one
// GuardedReader (collector/io/guarded_reader.h), as the RAS counters are: a driver can stall a
// sysfs read as well in mlx5 as in amdgpu.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "collector/io/guarded_reader.h"

namespace triage::collector {

struct IbPort {
  std::string device;      // "mlx5_0"
  std::string port;        // "1"
  std::string state;       // "ACTIVE", "DOWN", "INIT", "ARMED", ... ("" when unreadable)
  std::string phys_state;  // "LinkUp", "Disabled", "Polling", ... ("" when unreadable)
  std::string link_layer;  // "InfiniBand" | "Ethernet" ("" when the file is absent)
  std::optional<double> rate_gbps;
  // counters/<name> by name; hw_counters/<name> as "hw_counters/<name>".
  std::map<std::string, uint64_t> counters;
  std::string path;  // the port's directory

  // "mlx5_0/1": how the report, the events and the metrics name a port.
  std::string name() const { return device + "/" + port; }
};

// The error counters read from counters/ (NVSentinel nic-health-monitor and GCM check_ib_counters
// read the same files); an absent one is left out of the port's map, not an error.
extern const std::vector<std::string> kIbPortCounters;

// "4: ACTIVE" -> "ACTIVE", "5: LinkUp" -> "LinkUp" (the kernel prints the number and the name);
// a bare word is taken as it is; nullopt for an empty or malformed value.
std::optional<std::string> parse_ib_state(std::string_view text);
// "400 Gb/sec (4X NDR)" -> 400, "2.5 Gb/sec (1X SDR)" -> 2.5; nullopt when it is not "N Gb/sec".
std::optional<double> parse_ib_rate(std::string_view text);

struct IbRead {
  std::vector<IbPort> ports;
  std::vector<std::string> skipped;  // files not read because a reader is stuck on them
  std::vector<std::string> errors;   // "path: problem"
};

// Reads every port under `infiniband_dir` (a missing directory has no ports) through `reader`.
// A port whose state file could not be read is still listed, with an empty state.
IbRead read_ib_ports(GuardedReader& reader, const std::string& infiniband_dir);

}  // namespace triage::collector
