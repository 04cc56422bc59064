// The node's health and what follows from it: evaluates the node's verdict from its events and
// samples (collector/health/node_health.h), logs and announces changes, and under DrainPolicy=auto
// drains the node in Slurm when the verdict is drain-recommended (never touching a drain somebody
// else made) and lifts its own drain once the node has rebooted and is healthy again
// (agent/health/drain_hygiene.h). It asks Slurm every few minutes whose drain the node carries.
//
// Loop thread only; the Slurm calls run on a worker and post their result back.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/base/worker_pool.h"
#include "agent/health/drain_hygiene.h"
#include "agent/health/drain_limit.h"
#include "agent/health/remediation.h"
#include "agent/node/node_state.h"
#include "agent/slurm/shared_slurm.h"
#include "agent/slurm/slurm_command_runner.h"
#include "common/model.h"

namespace triage::agent {

// Auto-drain actions by (action: drain|lift|reboot|needs-hands|resume, result: done|refused|failed|
// limited|dry-run).
using DrainActionCounts = std::map<std::pair<std::string, std::string>, uint64_t>;

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

  // `commands` runs scontrol and sinfo (reboot, resume, the partition count); empty: the real ones.
  DrainController(const AgentConfig& cfg, EventLoop& loop, const NodeState& node,
                  WorkerPool& workers, SharedSlurm& slurm, Notify notify,
                  SlurmCommandRunner commands = {});
  DrainController(const DrainController&) = delete;
  DrainController& operator=(const DrainController&) = delete;

  // Evaluates soon, once for a burst of changes.
  void schedule();
  // Evaluates now, and drains when that is due.
  void evaluate();

  // Whether a health pass now would judge this boot's evidence (agent/health/drain_hygiene.h
  // health_pass_fresh); without it the controller never lifts a drain.
  void set_health_fresh(std::function<bool()> fresh) { health_fresh_ = std::move(fresh); }

  const NodeVerdict& verdict() const { return verdict_; }
  const std::string& drain_state() const { return drain_state_; }
  const std::string& drain_reason() const { return drain_reason_; }
  // Whose drain the node carries, as Slurm last said (kUnknown before the first answer).
  DrainOwner owner() const;
  const DrainActionCounts& actions() const { return actions_; }

  // The preflight refused a job (agent/health/preflight.h): its prolog fails and Slurm drains the
  // node; this gives the drain `reason` ("triage preflight: ...") on a worker, whichever write
  // reaches slurmctld first (agent/slurm/drain_steps.h label_preflight_drain). Logged; tried
  // again a few times a second apart while slurmctld has not drained the node yet.
  void label_preflight_drain(const std::string& reason);
  // Whether the last drain or reboot was held back by the partition limit (the alert's gauge).
  bool limited() const { return limited_; }
  // Adds the owner, Slurm's state and reason, and the last lift decision to the health report's
  // "drain" object.
  void describe_owner(nlohmann::json& drain) const;

 private:
  void maybe_drain();
  void drain_done(const std::string& state, bool settled, const std::string& why,
                  const std::string& reason, const std::string& action);
  void maybe_check_slurm(int64_t now);
  void maybe_lift(int64_t now, bool health_fresh);
  void lift_done(bool ok, const std::string& error, const std::string& why);
  void maybe_return(int64_t now, bool health_fresh);
  // One step of the node's remediation: counted, logged, kept for the health report.
  void record_step(const std::string& action, const std::string& result, const std::string& text);
  void load_reboot_records();
  void append_reboot_record(const RebootRecord& r);

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

  std::function<bool()> health_fresh_;
  bool drain_recommended_this_boot_ = false;
  std::optional<SlurmNodeState> slurm_node_;
  int64_t slurm_checked_usec_ = 0;
  bool slurm_check_in_flight_ = false;
  bool lift_in_flight_ = false;
  bool return_in_flight_ = false;
  bool limited_ = false;
  int64_t last_lift_attempt_usec_ = 0;
  int64_t last_return_attempt_usec_ = 0;
  std::string lift_decision_;  // why the last decision kept or lifted the drain
  DrainActionCounts actions_;

  SlurmCommandRunner commands_;
  std::vector<RebootRecord> reboots_;  // <SpoolDir>/remediation.log
  std::string return_decision_;
  std::deque<std::string> steps_;  // the latest remediation steps, newest last
};

}  // namespace triage::agent
