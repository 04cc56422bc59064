// The node's health and what follows from it: evaluates the node's verdict from its events and
// samples (collector/health/node_health.h), logs and announces changes, and under DrainPolicy=auto
// drains the node in Slurm when the verdict is drain-recommended (never touching a drain somebody
// else made).
//
// Loop thread only; the Slurm calls run on a worker and post their result back.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "agent/config.h"
#include "agent/event_loop.h"
#include "agent/node_state.h"
#include "agent/shared_slurm.h"
#include "agent/worker_pool.h"
#include "common/model.h"

namespace triage::agent {

// What the drain controller remembers of its attempts.
struct DrainAttempts {
  bool in_flight = false;
  int64_t last_attempt_usec = 0;
  std::string settled_for;  // the reason a drain is already in place for
};

// The reason an auto-drain would give for `verdict`.
std::string drain_reason_for(const NodeVerdict& verdict);

// Whether to try draining now: DrainPolicy=auto, the verdict is drain-recommended, no attempt is
// under way, its reason is not already settled, and the last attempt is at least a minute old.
bool drain_attempt_due(const std::string& policy, const NodeVerdict& verdict,
                       const DrainAttempts& attempts, int64_t now_usec);

// Whether two verdicts tell the same story (the same verdict, actions and events behind each
// reason; the reasons' live counts aside), so that a flood's repeats do not log the verdict again.
bool same_story(const NodeVerdict& a, const NodeVerdict& b);

class DrainController {
 public:
  using Notify = std::function<void(const std::string& state)>;  // systemd status lines

  DrainController(const AgentConfig& cfg, EventLoop& loop, const NodeState& node,
                  WorkerPool& workers, SharedSlurm& slurm, Notify notify);
  DrainController(const DrainController&) = delete;
  DrainController& operator=(const DrainController&) = delete;

  // Evaluates soon, once for a burst of changes.
  void schedule();
  // Evaluates now, and drains when that is due.
  void evaluate();

  const NodeVerdict& verdict() const { return verdict_; }
  const std::string& drain_state() const { return drain_state_; }
  const std::string& drain_reason() const { return drain_reason_; }

 private:
  void maybe_drain();
  void drain_done(const std::string& state, bool settled, const std::string& why,
                  const std::string& reason);

  const AgentConfig& cfg_;
  EventLoop& loop_;
  const NodeState& node_;
  WorkerPool& workers_;
  SharedSlurm& slurm_;
  Notify notify_;

  NodeVerdict verdict_;
  bool scheduled_ = false;
  std::string drain_state_ = "none";
  std::string drain_reason_;
  DrainAttempts attempts_;
};

}  // namespace triage::agent
