// Playbook 6 (network health) in two halves: `gather_network` sums each host's RDMA, NIC and TCP
// error counters and measures how long its retransmit and congestion rates stayed above their
// thresholds; `judge_network` ranks the hosts for exclusion from those plain numbers alone. RDMA
// carries the collectives, so its errors rank above everything; TCP retransmits alone (NFS, gRPC)
// never justify excluding a node.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct NetHost {
  double retry_excd = 0, ack_timeouts = 0, cqe = 0, nic_errors = 0, tcp_aborts = 0;
  double retx_max = 0, retx_sustained_s = 0;  // RDMA retransmit rate: peak, time above threshold
  double cnp_max = 0, cnp_sustained_s = 0;    // congestion notifications
  double tcp_max = 0, tcp_sustained_s = 0;    // TCP retransmits outside checkpoint writes
  bool port_down = false;
  std::optional<double> first;  // earliest RDMA trouble
  std::vector<std::string> devices;
  std::vector<double> retx_times;  // when the RDMA retransmit rate was above its threshold
};

struct NetworkMetrics {
  double start = 0, end = 0;  // the job's window
  size_t job_hosts = 0;
  bool source_trusted = false;
  std::map<std::string, NetHost> hosts;  // hosts with any reading
  // Only when some host's links degraded: mean tokens/s per device over time, and the checkpoint
  // saves to leave out of the comparison.
  std::vector<Point> tokens_per_s;
  std::vector<Interval> checkpoints;
};

// Exclusion priority: 1 hard link failure, 2 link degradation, 3 congestion, 4 TCP only, 0 none.
int exclusion_priority(const NetHost& n, double sustained_s);

// The queries. Query records go to `evidence`.
NetworkMetrics gather_network(Context& ctx, std::vector<QueryRecord>* evidence);

struct NetworkJudgement {
  PlaybookResult result;
  std::vector<HardwareVerdict> verdicts;  // link verdicts not already in `earlier`
};

// The exclusion ranking, link verdicts and the playbook's verdict. `earlier` are the verdicts
// other playbooks reached (a port already reported down is not reported twice). Pure.
NetworkJudgement judge_network(const NetworkMetrics& m, const NetworkThresholds& nt,
                               const std::vector<HardwareVerdict>& earlier);

}  // namespace triage::tsdb
