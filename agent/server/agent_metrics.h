// The agent's /metrics page: hardware counters (the hw_* names the offline analyzer's metrics
// playbooks query) and the agent's own health (triage_*), one small function per group of
// families, then the fleet families (agent/server/fleet_metrics.h). It reads the components' state
// and changes nothing. docs/metrics.md lists every family.
//
// Loop thread only (it reads loop-owned state).
#pragma once

#include <cstdint>
#include <string>

#include "agent/health/drain_controller.h"
#include "agent/job_end/job_end_pipeline.h"
#include "agent/live/live_monitor.h"
#include "agent/node/kernel_ingest.h"
#include "agent/node/node_state.h"
#include "agent/server/fleet_metrics.h"
#include "agent/server/http_api.h"
#include "agent/server/socket_api.h"

namespace triage::agent {

struct AgentMetricsSources {
  const std::string& host;
  const NodeState& node;
  const KernelIngestStatus& kernel;
  const DrainController& health;
  const SocketApi& socket;
  const HttpApi& http;
  const JobEndPipeline& analyses;
  int64_t started_usec = 0;
  // The fleet families (agent/server/fleet_metrics.h), when both are given.
  const FleetMetrics* fleet = nullptr;
  const OutcomeHistory* history = nullptr;
  const LiveMonitor* live = nullptr;  // the live hang loop, when there is one
};

// The Prometheus text (exposition format 0.0.4).
std::string render_agent_metrics(const AgentMetricsSources& in);

}  // namespace triage::agent
