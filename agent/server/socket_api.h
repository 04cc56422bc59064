// The local Unix socket (JSON lines; who asks is SO_PEERCRED's uid) for the SPANK plugin, the CLI
// and users, and the inbox directory the plugin falls back to when the socket does not answer.
// Lifecycle messages are made durable in the spool before they are applied to the job table.
//
// Loop thread only.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/node/job_table.h"
#include "agent/node/node_state.h"
#include "agent/server/callers.h"
#include "agent/server/stream_server.h"
#include "common/model.h"
#include "common/safe_io.h"

namespace triage::agent {

// The root-only socket beside SocketPath: SocketPath with this appended, mode 0600, served like
// SocketPath but to root alone. The SPANK plugin (root in slurmd and slurmstepd) sends there
// first, so that no user's connection flood, which fills SocketPath's listen queue before the
// agent can refuse it, stands between Slurm and the agent. spank/plugin_config.h has the same
// rule (the plugin shares no code with the agent; a test checks that the two agree).
inline constexpr std::string_view kRootSocketSuffix = ".root";

class SocketApi {
 public:
  // What the socket answers with or hands on, from the other parts of the agent.
  struct Hooks {
    std::function<nlohmann::json()> health;                  // the "health" op's answer
    std::function<NodeEvidence(const JobRecord&)> evidence;  // the "get_job" op's node evidence
    std::function<void(JobRecord&)> job_ended;               // after a job_end is durable
    // The "preflight" op's answer for a job id and its SLURM_JOB_GPUS ("" when not sent).
    std::function<nlohmann::json(uint64_t job_id, const std::string& gpus)> preflight;
  };
  struct Stats {
    std::map<std::string, uint64_t> lifecycle;  // op -> accepted
    std::map<std::string, uint64_t> rejected;   // reason -> count
    uint64_t inbox_applied = 0;
    uint64_t inbox_refused = 0;
  };

  SocketApi(const AgentConfig& cfg, EventLoop& loop, NodeState& node, const CallerPolicy& callers,
            Hooks hooks);
  SocketApi(const SocketApi&) = delete;
  SocketApi& operator=(const SocketApi&) = delete;

  // Binds SocketPath (anyone may connect) and serves it; throws when it cannot. Then the root
  // socket (SocketPath + kRootSocketSuffix); without it (a path too long, a bind that fails) the
  // plugin uses SocketPath's reserved slots, so that is only logged.
  void open();
  // Creates and watches the inbox (a 30 s scan is the backstop when it cannot be watched).
  void watch_inbox();
  // Applies and removes the inbox's files.
  void scan_inbox();
  void stop();

  const Stats& stats() const { return stats_; }
  const StreamServer* server() const { return server_.get(); }
  const StreamServer* root_server() const { return root_server_.get(); }

 private:
  bool on_input(StreamServer& server, StreamServer::Conn& conn);
  void open_root_socket(const StreamServer::Options& options);
  nlohmann::json handle_request(uid_t uid, const nlohmann::json& request);
  nlohmann::json handle_lifecycle(uid_t uid, const nlohmann::json& request);
  void apply_inbox_file(int dir_fd, const std::string& name);

  const AgentConfig& cfg_;
  EventLoop& loop_;
  NodeState& node_;
  const CallerPolicy& callers_;
  Hooks hooks_;
  std::unique_ptr<StreamServer> server_;
  std::unique_ptr<StreamServer> root_server_;
  UniqueFd inotify_;
  bool inbox_scan_scheduled_ = false;
  Stats stats_;
};

}  // namespace triage::agent
