// The HTTP endpoint: /metrics for Prometheus (no authentication), and the munge-authenticated /v1
// endpoints peers and `slurm-triage nodes` use (/v1/health, /v1/jobs/<id>/events, /v1/history).
// One request per connection.
//
// Loop thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/history/outcome_record.h"
#include "agent/net/http_message.h"
#include "agent/node/job_table.h"
#include "agent/node/node_state.h"
#include "agent/server/callers.h"
#include "agent/server/stream_server.h"
#include "common/model.h"

namespace triage::agent {

class HttpApi {
 public:
  // What the endpoint answers with, from the other parts of the agent.
  struct Hooks {
    std::function<nlohmann::json()> health;  // /v1/health
    std::function<std::string()> metrics;    // /metrics (Prometheus text)
    // /v1/jobs/<id>/events: this node's evidence for a job in a window (usec; 0: the job's own).
    std::function<NodeEvidence(const JobRecord&, int64_t start_usec, int64_t end_usec)> evidence;
    // GET /v1/history: the answer body for records that ended at or after `since` (epoch s).
    std::function<std::string(int64_t since)> history;
    // POST /v1/history: a peer hands over an outcome record (whether it is durable here).
    std::function<bool(const OutcomeRecord&)> record_outcome;
  };
  struct Stats {
    std::map<int, uint64_t> requests;  // status -> count
    uint64_t scrapes_refused = 0;      // /metrics answered 503: HttpMaxScrapes were in flight
  };

  HttpApi(const AgentConfig& cfg, EventLoop& loop, NodeState& node, const CallerPolicy& callers,
          Hooks hooks);
  HttpApi(const HttpApi&) = delete;
  HttpApi& operator=(const HttpApi&) = delete;

  // Binds HttpAddress:HttpPort and serves it. Throws when it cannot.
  void open();
  void stop();

  int port() const { return port_; }  // the bound port (HttpPort=0 picks one)
  const Stats& stats() const { return stats_; }
  const StreamServer* server() const { return server_.get(); }

 private:
  void on_input(StreamServer::Conn& conn);
  std::string handle(const HttpRequest& req);
  std::string job_events(uint64_t job_id, uid_t uid, const std::string& query);
  std::string history_post(uid_t uid, const std::string& carried);

  const AgentConfig& cfg_;
  EventLoop& loop_;
  NodeState& node_;
  const CallerPolicy& callers_;
  Hooks hooks_;
  // /metrics answers not yet fully sent; declared before server_, whose closing connections
  // count it down as the server goes away.
  size_t scrapes_in_flight_ = 0;
  std::unique_ptr<StreamServer> server_;
  int port_ = 0;
  Stats stats_;
};

}  // namespace triage::agent
