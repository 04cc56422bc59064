// The agent's settings: /etc/slurm/triage.conf (Slurm-style Key=Value, common/kv_config.h) mapped
// onto one struct. Every key, its default and its meaning are listed in config.cpp (the single
// source for --check-config, triage.conf.example and docs/agent.md).
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
  std::string node_name;  // this node's Slurm name; default: the short host name
  std::string slurm_user = "slurm";

  std::string spool_dir = "/var/spool/slurm-triage";
  std::string inbox_dir;  // default: <spool_dir>/inbox
  int64_t spool_retention_sec = int64_t{14} * 86400;
  int64_t spool_max_bytes = 256LL << 20;
  size_t max_node_events = 20000;

  std::string socket_path = "/run/slurm-triage/agent.sock";
  int64_t socket_timeout_ms = 10000;
  size_t socket_max_clients = 256;

  std::string http_address = "0.0.0.0";
  int http_port = 6829;  // 0: any free port (tests)
  int64_t http_timeout_ms = 10000;
  size_t http_max_connections = 128;
  size_t http_max_header_bytes = size_t{16} * 1024;
  std::string munge_socket;  // empty: libmunge's default

  std::string drain_policy = "recommend";  // recommend | auto

  std::string kernel_source = "journal";  // journal | kmsg | file | none
  std::string kernel_path;                // journal directory, kmsg device or text file
  std::string rules_dir;                  // extra kernel-rule layer (after /etc/slurm/triage.d)

  std::string proc_root = "/proc";
  std::string sysfs_root = "/sys";
  int64_t dstate_interval_ms = 5000;
  int64_t dstate_read_timeout_ms = 2000;
  int64_t dstate_persistent_after_sec = 60;
  int64_t sysfs_interval_ms = 30000;
  int64_t sysfs_read_timeout_ms = 5000;
  size_t max_stuck_readers = 8;

  std::string analyzer_path;  // default: the installed slurm-triage
  int64_t analysis_timeout_sec = 600;
  size_t analysis_concurrency = 2;
  size_t analysis_output_max = 1 << 20;
  std::string report_path;  // ReportPath pattern; empty: the analyzer's own placement
  int64_t evidence_settle_ms = 2000;
  int64_t peer_fetch_timeout_ms = 10000;
  int64_t attribution_grace_sec = 60;

  std::string log_level = "info";

  collector::HealthPolicy health;
};

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
