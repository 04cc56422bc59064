#include "agent/health/drain_controller.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <fstream>
#include <sstream>

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

constexpr size_t kMaxSteps = 20;

// The metric's result for a drain round's state.
const char* drain_result(const std::string& state) {
  if (state.rfind("failed", 0) == 0) return "failed";
  if (state.rfind("left alone", 0) == 0) return "refused";
  if (state.rfind("limited", 0) == 0) return "limited";
  if (state.rfind("dry run", 0) == 0) return "dry-run";
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

// What a fault round needs from the loop, copied for the worker.
struct FaultContext {
  std::string node;
  std::string boot_id;
  std::string drain_reason;  // tagged, for a plain drain
  std::optional<RebootFault> fault;
  bool remediate_reboot = false;
  bool dry_run = false;
  DrainLimits limits;
  std::vector<RebootRecord> reboots;
  int64_t now_sec = 0;
};

struct FaultRound {
  std::string action = "drain";  // drain | reboot | needs-hands
  std::string state;             // the drain state to report
  bool settled = false;          // a step is in place (or logged, in a dry run)
  std::string reason;            // the reason written (without the prefix for a drain)
  std::optional<RebootRecord> reboot;
};

std::string run_error(const SlurmCommandResult& r) {
  return r.error.empty() ? "exit status not 0" : r.error;
}

// Whether the partition limit leaves room for this node; `why` says the count either way.
bool limit_allows(const SlurmCommandRunner& run, const FaultContext& ctx, std::string& why) {
  const SlurmCommandResult r = run(partition_nodes_argv());
  if (!r.ok) {
    why = "the partitions' count is unknown (" + run_error(r) + ")";
    return false;
  }
  std::string error;
  const auto nodes = parse_partition_nodes(r.out, error);
  if (!nodes) {
    why = "the partitions' count is unknown (" + error + ")";
    return false;
  }
  const LimitDecision d = decide_drain_limit(*nodes, ctx.node, ctx.limits);
  why = d.why;
  return d.allowed;
}

// One round for a drain-recommended node: reboot, needs hands or drain (decide_fault_step), within
// the partition limit, or only logged in a dry run.
FaultRound fault_round(SlurmClient* slurm, const SlurmCommandRunner& run, const FaultContext& ctx) {
  FaultRound out;
  if (slurm == nullptr) {
    out.state = "failed: no Slurm client";
    return out;
  }
  std::string error;
  const std::optional<SlurmNodeState> n = slurm->load_node(ctx.node, error);
  if (!n) {
    out.state = "failed: " + error;
    return out;
  }
  FaultInputs in;
  in.remediate_reboot = ctx.remediate_reboot;
  in.node = n;
  in.boot_id = ctx.boot_id;
  in.fault = ctx.fault;
  in.reboots = ctx.reboots;
  in.now_sec = ctx.now_sec;
  const FaultDecision d = decide_fault_step(in);
  if (d.step == FaultStep::kNothing) {
    out.action = "reboot";
    out.settled = true;
    out.state = "left alone: " + d.why;
    return out;
  }
  std::vector<std::string> argv;
  if (d.step == FaultStep::kReboot) {
    out.action = "reboot";
    out.reason = reboot_reason(truncate_utf8(printable(d.why), kMaxDrainReason), ctx.boot_id);
    argv = reboot_argv(ctx.node, out.reason);
    out.reboot = RebootRecord{ctx.now_sec, boot_tag(ctx.boot_id), ctx.fault->key};
  } else if (d.step == FaultStep::kNeedsHands) {
    out.action = "needs-hands";
    out.reason = needs_hands_reason(
        truncate_utf8(printable(ctx.fault->summary + ": " + d.why), kMaxDrainReason), ctx.boot_id);
    if (n->down) argv = down_reason_argv(ctx.node, out.reason);
  } else {
    out.reason = ctx.drain_reason;
  }
  // A node already out of service takes nothing more from the partition.
  if (!n->drain && !n->down) {
    std::string why;
    if (!limit_allows(run, ctx, why)) {
      out.state = "limited: would " + out.action + " (" + why + ")";
      return out;
    }
  }
  if (ctx.dry_run) {
    out.settled = true;
    out.state = "dry run: would " + out.action + " with reason \"" + out.reason + "\"";
    out.reboot.reset();
    return out;
  }
  if (argv.empty()) {
    // A drain, or needs hands on a node still up: the drain path, which never overrides a drain
    // somebody else made.
    std::string why = out.reason;
    if (why.rfind(kOwnDrainPrefix, 0) == 0) why = why.substr(kOwnDrainPrefix.size());
    out.state = drain_in_slurm(slurm, ctx.node, why, out.settled);
    if (out.action == "needs-hands" && out.state == "drained by triage")
      out.state = "needs hands: drained by triage";
    return out;
  }
  const SlurmCommandResult r = run(argv);
  if (!r.ok) {
    out.state = "failed: " + command_line(argv) + ": " + run_error(r);
    out.reboot.reset();
    return out;
  }
  out.settled = true;
  out.state =
      out.action == "reboot" ? "reboot asked by triage" : "needs hands: left DOWN by triage";
  return out;
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
                                 WorkerPool& workers, SharedSlurm& slurm, Notify notify,
                                 SlurmCommandRunner commands)
    : cfg_(cfg),
      loop_(loop),
      node_(node),
      workers_(workers),
      slurm_(slurm),
      notify_(std::move(notify)),
      commands_(std::move(commands)) {
  for (const char* action : {"drain", "lift"}) {
    for (const char* result : {"done", "refused", "failed"})
      actions_[{action, result}] = 0;
  }
  actions_[{"drain", "limited"}] = 0;
  if (!commands_)
    commands_ = slurm_command_runner(std::chrono::milliseconds(cfg_.slurm_command_timeout_ms));
  load_reboot_records();
}

void DrainController::load_reboot_records() {
  if (cfg_.spool_dir.empty()) return;
  std::ifstream in(cfg_.spool_dir + "/remediation.log");
  if (!in) return;
  std::ostringstream text;
  text << in.rdbuf();
  reboots_ = parse_reboot_records(text.str());
}

void DrainController::append_reboot_record(const RebootRecord& r) {
  reboots_.push_back(r);
  if (cfg_.spool_dir.empty()) return;
  std::ofstream out(cfg_.spool_dir + "/remediation.log", std::ios::app);
  out << format_reboot_record(r);
  if (!out.flush())
    spdlog::error(
        "cannot record the reboot in {}/remediation.log: a second reboot for the same "
        "fault is then not recognised after the agent restarts",
        cfg_.spool_dir);
}

void DrainController::record_step(const std::string& action, const std::string& result,
                                  const std::string& text) {
  ++actions_[{action, result}];
  steps_.push_back(format_utc(now_usec()) + " " + action + " " + result + ": " + text);
  while (steps_.size() > kMaxSteps)
    steps_.pop_front();
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
  maybe_return(now, fresh);
}

void DrainController::maybe_drain() {
  const int64_t now = now_usec();
  if (!drain_attempt_due(cfg_.drain_policy, verdict_, attempts_, now)) return;
  attempts_.last_attempt_usec = now;
  attempts_.in_flight = true;
  const std::string why = drain_reason_for(verdict_);
  FaultContext ctx;
  ctx.node = cfg_.node_name;
  ctx.boot_id = node_.boot_id();
  ctx.drain_reason =
      tagged_drain_why(truncate_utf8(printable(why), kMaxDrainReason), node_.boot_id());
  ctx.fault = reboot_fault(node_.events().events(), node_.boot_id());
  ctx.remediate_reboot = cfg_.remediate == "reboot";
  ctx.dry_run = cfg_.remediate_dry_run;
  ctx.limits = {cfg_.max_triage_drain_fraction, cfg_.max_triage_drain_nodes};
  ctx.reboots = reboots_;
  ctx.now_sec = now / 1000000;
  const bool submitted = workers_.submit([this, ctx = std::move(ctx), why] {
    FaultRound round = slurm_.with([&](SlurmClient* c) { return fault_round(c, commands_, ctx); });
    loop_.post([this, round = std::move(round), why] {
      if (round.reboot) append_reboot_record(*round.reboot);
      drain_done(round.state, round.settled, why, round.reason, round.action);
    });
  });
  if (!submitted) attempts_.in_flight = false;
}

void DrainController::drain_done(const std::string& state, bool settled, const std::string& why,
                                 const std::string& reason, const std::string& action) {
  attempts_.in_flight = false;
  drain_state_ = state;
  if (!reason.empty())
    drain_reason_ = reason.rfind(kOwnDrainPrefix, 0) == 0 ? reason : "triage: " + reason;
  if (settled) attempts_.settled_for = why;
  const std::string result = drain_result(state);
  limited_ = result == "limited";
  record_step(action, result, state);
  slurm_checked_usec_ = 0;  // look at whose drain it is now
  if (limited_) {
    // The alert: the agent recommends instead of acting (triage_remediation_limited).
    spdlog::warn("triage limit: {} of {} held back, recommendation only: {}", action,
                 cfg_.node_name, log_text(state));
    return;
  }
  const auto level = state.rfind("failed", 0) == 0 ? spdlog::level::err : spdlog::level::warn;
  spdlog::log(level, "auto-{} of {}: {}", action, cfg_.node_name, log_text(state));
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
  nlohmann::json& r = drain["remediation"];
  r["remediate"] = cfg_.remediate;
  r["dry_run"] = cfg_.remediate_dry_run;
  r["limited"] = limited_;
  if (!return_decision_.empty()) r["return"] = return_decision_;
  r["steps"] = nlohmann::json::array();
  for (const std::string& step : steps_)
    r["steps"].push_back(step);
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
        slurm_checked_usec_ = now_usec();
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

namespace triage::agent {

void DrainController::maybe_return(int64_t now, bool health_fresh) {
  if (cfg_.remediate != "reboot" || return_in_flight_) return;
  if (now - last_return_attempt_usec_ < kDrainRetryUsec) return;
  ReturnInputs in;
  in.node = slurm_node_;
  in.boot_id = node_.boot_id();
  in.health_fresh = health_fresh;
  in.verdict = verdict_.verdict;
  in.drain_recommended_this_boot = drain_recommended_this_boot_;
  in.fault = reboot_fault(node_.events().events(), node_.boot_id());
  if (!verdict_.reasons.empty()) in.evidence = verdict_.reasons.front().reason;
  const ReturnDecision seen = decide_return(in);
  return_decision_ = seen.why;
  if (seen.step != ReturnStep::kResume && seen.step != ReturnStep::kNeedsHands) return;
  last_return_attempt_usec_ = now;
  return_in_flight_ = true;
  const bool dry_run = cfg_.remediate_dry_run;
  const std::string node = cfg_.node_name;
  const bool submitted = workers_.submit([this, in, node, dry_run] {
    // Decided again on Slurm's view of now: only a reason still ours is acted on.
    ReturnInputs fresh = in;
    std::string error;
    fresh.node = slurm_.with([&](SlurmClient* c) {
      std::optional<SlurmNodeState> n;
      if (c != nullptr) n = c->load_node(node, error);
      return n;
    });
    const ReturnDecision d = decide_return(fresh);
    std::string action = d.step == ReturnStep::kResume ? "resume" : "needs-hands";
    std::string result = "refused";
    std::string text = d.why;
    if (!fresh.node) {
      result = "failed";
      text = "Slurm's view of the node is unknown: " + error;
    } else if (d.step == ReturnStep::kResume || d.step == ReturnStep::kNeedsHands) {
      const std::vector<std::string> argv =
          d.step == ReturnStep::kResume ? resume_argv(node) : down_reason_argv(node, d.reason);
      if (dry_run) {
        result = "dry-run";
        text = "dry run: would run " + command_line(argv) + " (" + d.why + ")";
      } else if (const SlurmCommandResult r = commands_(argv); r.ok) {
        result = "done";
        text = d.step == ReturnStep::kResume ? d.why : d.why + "; reason now \"" + d.reason + "\"";
      } else {
        result = "failed";
        text = command_line(argv) + ": " + run_error(r);
      }
    }
    loop_.post([this, action, result, text] {
      return_in_flight_ = false;
      slurm_checked_usec_ = 0;
      record_step(action, result, text);
      if (action == "needs-hands" && result == "done") {
        spdlog::error("{} needs hands: {}", cfg_.node_name, log_text(text));
      } else {
        const auto level = result == "done" ? spdlog::level::warn : spdlog::level::err;
        spdlog::log(level, "after the reboot, {} of {} {}: {}", action, cfg_.node_name, result,
                    log_text(text));
      }
    });
  });
  if (!submitted) return_in_flight_ = false;
}

}  // namespace triage::agent
