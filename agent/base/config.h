// The agent's settings: /etc/slurm/triage.conf (Slurm-style Key=Value, common/kv_config.h) mapped
// onto one struct. Every key, its default and its meaning are listed once, in config.cpp's key
// table (the single source for --check-config, triage.conf.example and docs/agent.md); the struct
// holds no defaults of its own, so an AgentConfig worth using comes from load_agent_config().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collector/health/node_health.h"
#include "common/error.h"
#include "common/kv_config.h"

namespace triage::agent {

struct AgentConfig {
  std::string node_name;  // this node's Slurm name (NodeName empty: the short host name)
  std::string slurm_user;

  std::string spool_dir;
  std::string inbox_dir;  // InboxDir empty: <spool_dir>/inbox
  int64_t spool_retention_sec{};
  int64_t spool_max_bytes{};
  size_t max_node_events{};
  int64_t history_days{};  // job outcomes kept: this many days, at most history_max_jobs
  size_t history_max_jobs{};

  std::string socket_path;
  int64_t socket_timeout_ms{};  // a complete request must arrive within this
  int64_t socket_write_timeout_ms{};
  size_t socket_max_clients{};
  size_t socket_max_clients_per_user{};
  size_t socket_reserved_clients{};  // of socket_max_clients, kept for root and SlurmUser

  std::string http_address;
  int http_port{};  // 0: any free port (tests)
  int64_t http_timeout_ms{};
  int64_t http_write_timeout_ms{};
  size_t http_max_connections{};
  size_t http_max_connections_per_address{};
  size_t http_max_scrapes{};  // unauthenticated /metrics answers in flight at once
  size_t http_max_header_bytes{};
  std::string munge_socket;  // empty: libmunge's default

  std::string drain_policy;  // recommend | auto

  // Reboot and return, and the limits on what the agents take out (agent/health/remediation.h,
  // agent/health/drain_limit.h; docs/agent.md "A node's life").
  std::string remediate;                    // off | reboot
  bool remediate_dry_run = false;           // log what would be done, do nothing
  double max_triage_drain_fraction = 0.10;  // of a partition
  int64_t max_triage_drain_nodes = 0;       // absolute cap; 0: none
  std::string boot_id_file;                 // empty: <ProcRoot>/sys/kernel/random/boot_id

  std::string kernel_source;  // journal | kmsg | file | none
  std::string kernel_path;    // journal directory, kmsg device or text file
  std::string rules_dir;      // extra kernel-rule layer (after /etc/slurm/triage.d)

  std::string proc_root;
  std::string sysfs_root;
  std::string infiniband_dir;  // "" = <sysfs_root>/class/infiniband
  int64_t dstate_interval_ms{};
  int64_t dstate_read_timeout_ms{};
  int64_t dstate_persistent_after_sec{};
  int64_t dstate_whole_node_interval_sec{};
  std::string cgroup_root;
  int64_t sysfs_interval_ms{};
  int64_t sysfs_read_timeout_ms{};
  size_t max_stuck_readers{};

  // The preflight's GPU facts (agent/health/preflight.h): where the GPU device files are, how
  // often /proc is walked for their holders, how long after its job's end a holder is a leftover.
  std::string gpu_device_dir;
  int64_t gpu_holder_interval_ms{};
  int64_t leftover_grace_sec{};

  std::string analyzer_path;  // the slurm-triage program run for each ended job
  int64_t analysis_timeout_sec{};
  size_t analysis_concurrency{};
  size_t analysis_output_max{};
  std::string report_path;       // ReportPath pattern; empty: the analyzer's own placement
  int64_t evidence_settle_ms{};  // the longest wait for the kernel reader to catch up
  int64_t peer_fetch_timeout_ms{};
  int64_t attribution_grace_sec{};

  // AccountingComment: the job field the triage summary goes into (admincomment, comment, none).
  std::string accounting_comment;
  int64_t slurm_command_timeout_ms{};  // sacct, sacctmgr, scontrol for the summary and requeues

  int64_t hang_stall_min_sec{};  // the live stall rule (analyzer/stall_verdict.h)
  int64_t stall_after_sec{};     // the post-mortem one (analyze --stall-after)
  int64_t hang_stall_factor{};

  // The cluster's Prometheus (common/tsdb_config_keys.h), asked for the busy-wait signature of a
  // stalled job (agent/live/busy_wait_probe.h). Empty URL: not asked.
  std::string prometheus_url;
  std::string prometheus_host_label;
  int64_t tsdb_query_timeout_sec{};

  std::string log_level;

  collector::HealthPolicy health;
};

// The rules catalogs' layers the agent reads: the shipped ones, /etc/slurm/triage.d, then RulesDir.
std::vector<std::string> agent_rule_layers(const AgentConfig& cfg);

// The key specifications (names, types, defaults, help) of triage.conf.
std::vector<ConfigKeySpec> agent_config_specs();

struct ConfigLoad {
  AgentConfig config;
  std::vector<InputError> errors;
  std::string dump;  // "Key=Value" for every key (what --check-config prints)
};

// Parses the file (when `path` is not empty), applies `overrides` ("Key=Value", e.g. from --set),
// and maps the values. Errors name the file and line.
ConfigLoad load_agent_config(const std::string& path,
                             const std::vector<std::string>& overrides = {});
ConfigLoad load_agent_config_text(const std::string& text, const std::string& origin);

// triage.conf.example's body: every key with its default, commented.
std::string render_config_example();

}  // namespace triage::agent
