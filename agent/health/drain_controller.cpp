#include "agent/health/drain_controller.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "collector/health/node_health.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxDrainReason = 160;
constexpr int64_t kDrainRetryUsec = 60LL * 1000000;
// Whose drain the node carries changes by hand, rarely: a look every few minutes is enough, and
// costs slurmctld one node-table read per node per interval.
constexpr int64_t kSlurmCheckUsec = 5LL * 60 * 1000000;

// The metric's result for a drain round's state.
const char* drain_result(const std::string& state) {
  if (state.rfind("failed", 0) == 0) return "failed";
  if (state.rfind("left alone", 0) == 0) return "refused";
  return "done";
}

// One Slurm round: leave a drain or down state somebody else made alone, recognise our own, else
// drain. Returns the drain state to report; `settled` when a drain is in place afterwards.
std::string drain_in_slurm(SlurmClient* slurm, const std::string& node, const std::string& reason,
                           bool& settled) {
  if (slurm == nullptr) return "failed: no Slurm client";
  std::string error;
  const std::optional<SlurmNodeState> n = slurm->load_node(node, error);
  if (n && (n->drain || n->down)) {
    // Never touch a drain somebody else made, and never undo one.
    settled = true;
    return n->reason.rfind("triage:", 0) == 0
               ? "drained by triage"
               : "left alone: already " + n->state + " (" + n->reason + ")";
  }
  if (n && slurm->drain_node(node, reason, error)) {
    settled = true;
    return "drained by triage";
  }
  // Somebody drained the node while we did (the client refuses to replace their reason): theirs.
  std::string again;
  const std::optional<SlurmNodeState> now = n ? slurm->load_node(node, again) : std::nullopt;
  if (now && (now->drain || now->down) && drain_owner(*now) != DrainOwner::kOurs) {
    settled = true;
    return "left alone: drained by someone else meanwhile, " + now->state + " (" + now->reason +
           ")";
  }
  return "failed: " + error;
}

}  // namespace

std::string drain_reason_for(const NodeVerdict& verdict) {
  return verdict.reasons.empty() ? "drain recommended" : verdict.reasons.front().reason;
}

bool drain_attempt_due(const std::string& policy, const NodeVerdict& verdict,
                       const DrainAttempts& attempts, int64_t now_usec) {
  if (policy != "auto" || verdict.verdict != "drain-recommended" || attempts.in_flight)
    return false;
  if (attempts.settled_for == drain_reason_for(verdict)) return false;
  return now_usec - attempts.last_attempt_usec >= kDrainRetryUsec;
}

// A reason's text carries live counts ("286000 GPU ring timeouts"), which change with every folded
// repeat of a flood: comparing the text would log the verdict on every event.
bool same_story(const NodeVerdict& a, const NodeVerdict& b) {
  if (a.verdict != b.verdict || a.reasons.size() != b.reasons.size()) return false;
  for (size_t i = 0; i < a.reasons.size(); ++i) {
    const VerdictReason& x = a.reasons[i];
    const VerdictReason& y = b.reasons[i];
    if (x.action != y.action || x.event_ids.empty() != y.event_ids.empty()) return false;
    if (!x.event_ids.empty() && x.event_ids.front() != y.event_ids.front()) return false;
  }
  return true;
}

DrainController::DrainController(const AgentConfig& cfg, EventLoop& loop, const NodeState& node,
                                 WorkerPool& workers, SharedSlurm& slurm, Notify notify)
    : cfg_(cfg),
      loop_(loop),
      node_(node),
      workers_(workers),
      slurm_(slurm),
      notify_(std::move(notify)) {
  for (const char* action : {"drain", "lift"}) {
    for (const char* result : {"done", "refused", "failed"})
      actions_[{action, result}] = 0;
  }
}

void DrainController::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  loop_.after(50, [this] {
    scheduled_ = false;
    evaluate();
  });
}

void DrainController::evaluate() {
  // Asked before the verdict: events handed over before the reader caught up are in it then.
  const bool fresh = health_fresh_ && health_fresh_();
  collector::HealthInputs in;
  in.host = cfg_.node_name;
  in.boot_id = node_.boot_id();
  in.now_usec = now_usec();
  in.events = &node_.events().events();
  in.dstate = node_.dstate() ? &*node_.dstate() : nullptr;
  in.stuck_sysfs_reads = node_.sysfs() ? node_.sysfs()->stuck.size() : 0;
  NodeVerdict v = collector::evaluate_node_health(in, cfg_.health);
  const bool changed = !same_story(v, verdict_);
  verdict_ = std::move(v);
  if (changed) {
    if (verdict_.verdict == "healthy") {
      spdlog::info("node health: healthy");
    } else {
      const auto& r = verdict_.reasons.front();
      const auto log =
          verdict_.verdict == "drain-recommended" ? spdlog::level::warn : spdlog::level::info;
      spdlog::log(log, "node health: {} ({}{}): {}", verdict_.verdict, r.action,
                  cfg_.drain_policy == "auto" ? ", auto-drain" : ", recommendation only",
                  log_text(r.reason));
    }
    notify_("STATUS=" + verdict_.verdict);
  }
  if (verdict_.verdict == "drain-recommended") drain_recommended_this_boot_ = true;
  maybe_drain();
  const int64_t now = now_usec();
  maybe_check_slurm(now);
  maybe_lift(now, fresh);
}

void DrainController::maybe_drain() {
  const int64_t now = now_usec();
  if (!drain_attempt_due(cfg_.drain_policy, verdict_, attempts_, now)) return;
  attempts_.last_attempt_usec = now;
  attempts_.in_flight = true;
  const std::string why = drain_reason_for(verdict_);
  const std::string node = cfg_.node_name;
  const std::string reason =
      tagged_drain_why(truncate_utf8(printable(why), kMaxDrainReason), node_.boot_id());
  const bool submitted = workers_.submit([this, node, why, reason] {
    bool settled = false;
    const std::string state =
        slurm_.with([&](SlurmClient* c) { return drain_in_slurm(c, node, reason, settled); });
    loop_.post([this, state, settled, why, reason] { drain_done(state, settled, why, reason); });
  });
  if (!submitted) attempts_.in_flight = false;
}

void DrainController::drain_done(const std::string& state, bool settled, const std::string& why,
                                 const std::string& reason) {
  attempts_.in_flight = false;
  drain_state_ = state;
  drain_reason_ = "triage: " + reason;
  if (settled) attempts_.settled_for = why;
  ++actions_[{"drain", drain_result(state)}];
  slurm_checked_usec_ = 0;  // look at whose drain it is now
  const auto level = state.rfind("failed", 0) == 0 ? spdlog::level::err : spdlog::level::warn;
  spdlog::log(level, "auto-drain of {}: {}", cfg_.node_name, log_text(state));
}

void DrainController::label_preflight_drain(const std::string& reason) {
  const std::string node = cfg_.node_name;
  const bool submitted = workers_.submit([this, node, reason] {
    std::string error;
    const bool ok = slurm_.with([&](SlurmClient* c) {
      if (c == nullptr) {
        error = "no Slurm client";
        return false;
      }
      return c->label_preflight_drain(node, reason, error);
    });
    if (ok) {
      spdlog::warn("preflight: {} drained: {}", node, log_text(reason));
    } else {
      // Slurm drains the node for the failed prolog anyway ("Prolog error"); only the reason is
      // missing, and the agent's log has it.
      spdlog::error("preflight: could not give {}'s drain the reason '{}': {}", node,
                    log_text(reason), log_text(error));
    }
    loop_.post([this] { slurm_checked_usec_ = 0; });  // look at whose drain it is now
  });
  if (!submitted) spdlog::error("preflight: no worker free to label {}'s drain", node);
}

DrainOwner DrainController::owner() const {
  return slurm_node_ ? drain_owner(*slurm_node_) : DrainOwner::kUnknown;
}

void DrainController::describe_owner(nlohmann::json& drain) const {
  drain["owner"] = drain_owner_name(owner());
  if (slurm_node_) {
    drain["slurm_state"] = slurm_node_->state;
    drain["slurm_reason"] = slurm_node_->reason;
  }
  if (!lift_decision_.empty()) drain["lift"] = lift_decision_;
}

void DrainController::maybe_check_slurm(int64_t now) {
  if (slurm_check_in_flight_) return;
  if (slurm_checked_usec_ != 0 && now - slurm_checked_usec_ < kSlurmCheckUsec) return;
  slurm_checked_usec_ = now;
  slurm_check_in_flight_ = true;
  const std::string node = cfg_.node_name;
  const bool submitted = workers_.submit([this, node] {
    std::string error;
    std::optional<SlurmNodeState> n = slurm_.with([&](SlurmClient* c) {
      std::optional<SlurmNodeState> state;
      if (c != nullptr) state = c->load_node(node, error);
      return state;
    });
    loop_.post([this, n = std::move(n), error] {
      slurm_check_in_flight_ = false;
      if (n) {
        slurm_node_ = n;
      } else {
        spdlog::debug("whose drain {} carries is unknown: {}", cfg_.node_name, log_text(error));
      }
    });
  });
  if (!submitted) slurm_check_in_flight_ = false;
}

void DrainController::maybe_lift(int64_t now, bool health_fresh) {
  if (lift_in_flight_ || now - last_lift_attempt_usec_ < kDrainRetryUsec) return;
  LiftInputs in;
  in.policy = cfg_.drain_policy;
  in.node = slurm_node_;
  in.boot_id = node_.boot_id();
  in.health_fresh = health_fresh;
  in.verdict = verdict_.verdict;
  in.drain_recommended_this_boot = drain_recommended_this_boot_;
  const LiftDecision d = decide_drain_lift(in);
  lift_decision_ = d.why;
  if (!d.lift) return;
  last_lift_attempt_usec_ = now;
  lift_in_flight_ = true;
  const std::string node = cfg_.node_name;
  const std::string reason = slurm_node_->reason;
  const bool submitted = workers_.submit([this, node, reason, why = d.why] {
    std::string error;
    const bool ok = slurm_.with([&](SlurmClient* c) {
      if (c == nullptr) {
        error = "no Slurm client";
        return false;
      }
      return c->undrain_node(node, reason, error);
    });
    loop_.post([this, ok, error, why] { lift_done(ok, error, why); });
  });
  if (!submitted) lift_in_flight_ = false;
}

void DrainController::lift_done(bool ok, const std::string& error, const std::string& why) {
  lift_in_flight_ = false;
  ++actions_[{"lift", ok ? "done" : "failed"}];
  slurm_checked_usec_ = 0;  // whatever happened, Slurm's view is stale now
  if (ok) {
    if (slurm_node_) {
      slurm_node_->drain = false;
      slurm_node_->reason.clear();
    }
    attempts_.settled_for.clear();
    drain_state_ = "lifted by triage: " + why;
    spdlog::warn("auto-drain of {} lifted: {}", cfg_.node_name, log_text(why));
  } else {
    slurm_node_.reset();
    drain_state_ = "lift failed: " + error;
    spdlog::error("auto-drain of {} not lifted: {}", cfg_.node_name, log_text(error));
  }
}

}  // namespace triage::agent
