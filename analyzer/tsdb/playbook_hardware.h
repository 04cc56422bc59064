// Playbook 4 (hardware) in two halves: `gather_hardware` reads the hardware counters that rose
// during the job (RAS, PCIe AER, the kernel's GPU error count, RDMA port state, temperature) and
// the GPU plugin's own scrape health; `judge_hardware` turns those plain numbers into per-host
// verdicts (hardware fault, driver fault, link fault, degrading) and the playbook's verdict.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct CounterSpec {
  const char* metric;
  const char* what;
  bool fatal;  // a single increment means a bad part
};

// The hardware counters the playbook reads, in report order.
const std::vector<CounterSpec>& hardware_counters();

// Whether a counter's rise is worth the query for when it was first seen: a fault, or errors at
// a degrading rate.
bool worth_first_seen(const CounterSpec& c, double per_hour, const GpuThresholds& g);

struct HardwareMetrics {
  double start = 0, end = 0;  // the job's window
  std::vector<std::string> hosts;
  std::optional<double> failure_time;
  bool source_trusted = false;  // an admin-run cluster Prometheus
  struct Counter {
    std::string metric;
    std::string host;
    std::string gpu;  // "" for a host-level counter
    double increase = 0;
    std::optional<double> first_seen;
  };
  std::vector<Counter> counters;               // hardware_counters() order
  std::map<std::string, double> dmesg_errors;  // host -> hw_dmesg_gpu_errors_total increase
  // The GPU plugin's scrape health per host: the share of slow and of fast scrapes, the p90
  // duration, and the share of GPU power samples missing.
  std::map<std::string, double> slow_fraction, fast_fraction, scrape_p90, power_gaps;
  struct PortDown {
    std::string host;
    std::string device;
    std::optional<double> first_down;
  };
  std::vector<PortDown> ports_down;
  struct HotGpu {
    std::string host;
    std::string gpu;
    double max_c = 0;
    std::optional<double> first_hot;  // first time above the throttling temperature
  };
  std::vector<HotGpu> hot_gpus;
  struct Ghost {
    std::string host;
    std::vector<Interval> intervals;  // flat-lined collection
    bool power_flat = false;          // GPU power held the exact same value in the first one
  };
  std::vector<Ghost> ghosts;
};

// The queries. Query records go to `evidence`.
HardwareMetrics gather_hardware(Context& ctx, std::vector<QueryRecord>* evidence);

struct HardwareJudgement {
  PlaybookResult result;
  std::vector<HardwareVerdict> verdicts;  // per host and component, for drain recommendations
};

// The per-component verdicts and the playbook's verdict for the counters. Pure.
HardwareJudgement judge_hardware(const HardwareMetrics& m, const GpuThresholds& g,
                                 const MonitoringThresholds& mt);

}  // namespace triage::tsdb
