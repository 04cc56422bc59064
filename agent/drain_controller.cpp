#include "agent/drain_controller.h"

#include <spdlog/spdlog.h>

#include "collector/health/node_health.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxDrainReason = 160;
constexpr int64_t kDrainRetryUsec = 60LL * 1000000;

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
      notify_(std::move(notify)) {}

void DrainController::schedule() {
  if (scheduled_) return;
  scheduled_ = true;
  loop_.after(50, [this] {
    scheduled_ = false;
    evaluate();
  });
}

void DrainController::evaluate() {
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
                  cfg_.drain_policy == "auto" ? ", auto-drain" : ", recommendation only", r.reason);
    }
    notify_("STATUS=" + verdict_.verdict);
  }
  maybe_drain();
}

void DrainController::maybe_drain() {
  const int64_t now = now_usec();
  if (!drain_attempt_due(cfg_.drain_policy, verdict_, attempts_, now)) return;
  attempts_.last_attempt_usec = now;
  attempts_.in_flight = true;
  const std::string why = drain_reason_for(verdict_);
  const std::string node = cfg_.node_name;
  const std::string reason = std::string(truncate_utf8(printable(why), kMaxDrainReason));
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
  const auto level = state.rfind("failed", 0) == 0 ? spdlog::level::err : spdlog::level::warn;
  spdlog::log(level, "auto-drain of {}: {}", cfg_.node_name, state);
}

}  // namespace triage::agent
