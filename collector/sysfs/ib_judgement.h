// What an InfiniBand / RoCE port's readings mean: the thresholds (data, from the
// [ib-port-thresholds default] section of rules/ib-ports.rules, each citing its public source)
// and the judgements over plain values. IbPortWatch (ib_port_watch.h) applies them to successive
// snapshots; nothing here reads a file or a clock.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/sysfs/ib_ports.h"
#include "common/error.h"
#include "common/rules_file.h"

namespace triage::collector {

// An error counter's limit: more than `max_increase` in `per_s` seconds is too many (over a
// longer interval, proportionally more); a max_increase of 0 makes any increase too many.
struct IbCounterLimit {
  std::string counter;  // "symbol_error", "hw_counters/rnr_nak_retry_err", ...
  double max_increase = 0;
  double per_s = 1;
  std::string action = "investigate";  // what the node verdict does with it: investigate | drain
};

struct IbThresholds {
  int64_t flap_down_min_s = 25;  // GPUd scan_flaps.go: a flap is down >= 25 s, then back
  int64_t flap_count = 3;        // GPUd: 3 flaps ...
  int64_t flap_window_s = int64_t{12} * 3600;  // ... in 12 h
  std::string down_action = "investigate";
  std::string flap_action = "drain";
  std::string rate_action = "investigate";
  // A port down this long, with no new link_downed meanwhile, will not come up by itself (GPUd's
  // "drop", scan_drops.go: 4 min); what that does to the node verdict, and what clears it.
  int64_t stuck_down_s = 240;
  std::string stuck_action = "drain";
  std::string stuck_remedy = "reboot";  // reboot | none (the event's "remedy" field)
  std::vector<IbCounterLimit> counters;
};

struct IbThresholdsLoad {
  IbThresholds thresholds;
  std::vector<InputError> errors;
};

// The thresholds from the loaded rule sections (the last [ib-port-thresholds default] wins);
// the built-in defaults when there is none. Errors name file, line and key.
IbThresholdsLoad ib_thresholds_from(const std::vector<RuleSection>& sections);

// A port is down when its logical state is known and not ACTIVE, or its physical state is known
// and not LinkUp.
bool ib_port_down(const IbPort& p);

// The names ("mlx5_0/1") of the ports in `ports` that are down, in the snapshot's order.
std::vector<std::string> ib_ports_down(const std::vector<IbPort>& ports);

struct IbSlowPort {
  std::string port;  // "mlx5_0/1"
  double rate_gbps = 0;
  double peer_gbps = 0;  // the fastest up port of the same link layer on the node
};

// Up ports that run slower than the fastest up port of the same link layer on the node (GCM
// check-iblink's rate mismatch, against the node's own peers instead of a manifest).
std::vector<IbSlowPort> ib_ports_below_peers(const std::vector<IbPort>& ports);

// True when `down_s` seconds down, then back up, counts as a flap.
bool ib_is_flap(int64_t down_s, const IbThresholds& t);

// True when a port still down at `now_usec`, down without a break since `still_since_usec` (it
// went down then, or its link_downed last moved then: a link that retrained and fell again
// between two readings is trying), will not come up by itself.
bool ib_is_stuck_down(int64_t still_since_usec, int64_t now_usec, const IbThresholds& t);

// How many of the flap times (when the port came back, usec) fall in the window ending at now.
int64_t ib_flaps_in_window(const std::vector<int64_t>& flap_usec, int64_t now_usec,
                           const IbThresholds& t);

// True when a counter that rose by `delta` over `elapsed_s` seconds exceeds `limit`.
bool ib_counter_over_limit(uint64_t delta, double elapsed_s, const IbCounterLimit& limit);

}  // namespace triage::collector
