// Playbook 2 (heartbeat) in two halves: `gather_heartbeat` reads the accused hosts' GPU, network
// and I/O readings at the moment the heartbeats stopped (the crash minus the heartbeat timeout);
// `judge_heartbeat` decides from those plain numbers whether the tasks were really dead (a true
// positive) or alive and the heartbeat mechanism was wrong (a false positive, and why).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

struct HeartbeatMetrics {
  double start = 0, end = 0;  // the analysed window
  double scrape_s = 15;
  std::vector<std::string> job_hosts;
  std::optional<double> failure_time;       // the crash, from the log
  std::optional<double> timeout_s;          // the log's heartbeat timeout
  std::vector<std::string> accused_in_log;  // the hosts of the tasks declared dead
  std::string coordinator_host;             // task 0's host
  // Per checked host at the heartbeat-stop time: mean GPU utilisation and power over two minutes,
  // I/O pressure, dirty pages and host memory (max over five minutes), TCP retransmits per second
  // and their earlier baseline.
  std::map<std::string, double> util, power, io, dirty, mem, tcp, tcp_base;
  double listen_drops = 0;  // the coordinator's listen-queue drops in the five minutes before
  std::optional<int64_t> step_at_stop, step_at_crash;
  std::vector<std::string> ghost_at_stop;  // hosts whose hw_* data was ghost data then
  bool stop_in_checkpoint = false;
};

// The heartbeat timeout: the log's, else JAX's default of 100 s.
double heartbeat_timeout(const HeartbeatMetrics& m);
// When the heartbeats stopped: the crash minus the timeout, kept inside the window.
double heartbeat_stop(const HeartbeatMetrics& m);
// The hosts to check: the accused ones that have metrics, else every host of the job.
std::vector<std::string> heartbeat_hosts(const HeartbeatMetrics& m);
// Whether there is anything to judge: a crash time and a window of at least four scrapes.
bool heartbeat_judgeable(const HeartbeatMetrics& m);

// The queries. Query records go to `evidence`.
HeartbeatMetrics gather_heartbeat(Context& ctx, std::vector<QueryRecord>* evidence);

// The verdict (true-positive, false-positive[-network|-io], inconclusive) for the readings. Pure.
PlaybookResult judge_heartbeat(const HeartbeatMetrics& m, const GpuThresholds& g,
                               const NetworkThresholds& net, const HostThresholds& host);

}  // namespace triage::tsdb
