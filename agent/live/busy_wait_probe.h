// Do a stalled job's nodes show the busy-wait signature of seed playbook 1 (GPU utilisation high,
// power near idle) right now? The question goes to the cluster's Prometheus (PrometheusURL): it is
// admin-run, so what it shows is trusted enough to corroborate a stall. The answer is the
// analyzer's own playbook 1 (analyzer/tsdb/tsdb.h), asked without a job directory, so the job's
// own TSDB (a user path) is never read. The live loop asks it when a stall is judged.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace triage::tsdb {
struct TsdbRequest;
struct TsdbResult;
}  // namespace triage::tsdb

namespace triage::agent {

struct AgentConfig;

// The longest one query may take: the probe answers within a few live-loop ticks, whatever
// TsdbQueryTimeout allows the post-mortem analysis.
inline constexpr int64_t kBusyWaitQueryTimeoutMaxSec = 20;

struct BusyWaitSettings {
  std::string prometheus_url;  // empty: never asked
  std::string host_label = "host";
  int64_t query_timeout_sec = kBusyWaitQueryTimeoutMaxSec;
  std::vector<std::string> rule_layers;  // the catalog (gpu-thresholds.rules); empty: the default
};

// Contract: the cluster Prometheus keys of triage.conf, the query timeout capped at
// kBusyWaitQueryTimeoutMaxSec, and the agent's rule layers (RulesDir last).
BusyWaitSettings busy_wait_settings(const AgentConfig& config);

struct StalledJob {
  std::vector<std::string> nodes;  // the job's nodes, as Slurm names them
  int64_t start_usec = 0;          // when the job started
  int64_t stall_start_usec = 0;    // the time of its last step
  std::string gpu_model;           // a hint such as "MI355X"; empty when unknown
};

struct BusyWaitReading {
  bool asked = false;      // the cluster Prometheus was queried
  bool busy_wait = false;  // the job's GPUs spin in a collective: the stall is corroborated
  std::string verdict;     // playbook 1's verdict; empty when it gave none
  std::string line;        // what the cluster Prometheus showed, one sentence (when it answered)
  std::string error;       // why there is no verdict; empty when there is one
};

// Contract: playbook 1 alone, against the cluster Prometheus only (no job directory), over the
// job's nodes from its start to `now_usec` with the hang starting at its last step, with the
// settings' host label, query timeout and rule layers.
tsdb::TsdbRequest busy_wait_request(const BusyWaitSettings& settings, const StalledJob& job,
                                    int64_t now_usec);

// Contract: busy_wait only when playbook 1 of an available result says the GPUs spin in a
// collective (busy-wait-hang, or network-triggered-hang: the same spin after a network event);
// every other verdict is false with its summary in `line`, no verdict is false with `error`.
BusyWaitReading read_busy_wait(const tsdb::TsdbResult& result);

// Asks the cluster Prometheus and reads the answer; without a URL nothing is sent (asked false).
// It blocks for the queries (each within the settings' timeout; an unreachable server fails at
// once): run it off the event loop. It never throws for an absent or failing server.
BusyWaitReading probe_busy_wait(const BusyWaitSettings& settings, const StalledJob& job,
                                int64_t now_usec);

}  // namespace triage::agent
