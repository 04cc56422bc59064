#include "agent/slurm/drain_steps.h"

namespace triage::agent {

namespace {

std::string described(const SlurmNodeState& n) {
  return n.state + (n.reason.empty() ? std::string() : " (reason: " + n.reason + ")");
}

}  // namespace

bool is_own_reason(const std::string& reason) {
  return reason.rfind("triage:", 0) == 0;
}

bool drain_in_steps(const DrainSteps& steps, const std::string& reason, std::string& error) {
  const std::optional<SlurmNodeState> before = steps.read(error);
  if (!before) return false;
  if ((before->drain || before->down) && !is_own_reason(before->reason)) {
    error = "node " + before->name + " is already " + described(*before) + "; not overriding it";
    return false;
  }
  if (before->drain) return true;  // drained by us already: nothing to add
  if (before->down) {
    error = "node " + before->name + " is DOWN; not draining it";
    return false;
  }
  if (!steps.drain_keeping_reason(error)) return false;
  const std::optional<SlurmNodeState> drained = steps.read(error);
  if (!drained) return false;
  // A reason that is not the one the node had when we looked (text, author or time) was written
  // since: somebody drained it in between, and the drain is theirs. A node with no DRAIN flag was
  // resumed in between.
  if (!drained->drain) {
    error = "node " + before->name + " is " + drained->state + " again right after our drain";
    return false;
  }
  const bool rewritten = drained->reason != before->reason ||
                         drained->reason_uid != before->reason_uid ||
                         drained->reason_time != before->reason_time;
  if (rewritten && !is_own_reason(drained->reason)) {
    error = "node " + before->name + " was drained by someone else meanwhile (" +
            described(*drained) + "); the drain is theirs";
    return false;
  }
  if (!steps.set_reason(reason, error)) return false;
  const std::optional<SlurmNodeState> after = steps.read(error);
  if (!after) return false;
  if (!after->drain || after->reason != reason) {
    error = "node " + before->name + " changed right after our drain (now " + described(*after) +
            "); not ours";
    return false;
  }
  return true;
}

namespace {

bool preflight_drain_reason(const std::string& reason) {
  return reason == kSlurmPrologErrorReason || reason.rfind("triage preflight:", 0) == 0;
}

}  // namespace

bool label_preflight_drain(const DrainSteps& steps, const std::string& reason, std::string& error) {
  const std::optional<SlurmNodeState> before = steps.read(error);
  if (!before) return false;
  if (before->drain && before->reason == reason) return true;
  if ((before->drain || before->down) &&
      !(before->drain && preflight_drain_reason(before->reason))) {
    error = "node " + before->name + " is already " + described(*before) + "; not overriding it";
    return false;
  }
  if (!before->drain) {
    if (!steps.drain_keeping_reason(error)) return false;
    const std::optional<SlurmNodeState> drained = steps.read(error);
    if (!drained) return false;
    const bool rewritten = drained->reason != before->reason ||
                           drained->reason_uid != before->reason_uid ||
                           drained->reason_time != before->reason_time;
    if (!drained->drain || (rewritten && !preflight_drain_reason(drained->reason))) {
      error = "node " + before->name + " changed right after our drain (now " +
              described(*drained) + "); not ours";
      return false;
    }
  }
  if (!steps.set_reason(reason, error)) return false;
  const std::optional<SlurmNodeState> after = steps.read(error);
  if (!after) return false;
  if (!after->drain || after->reason != reason) {
    error =
        "node " + before->name + " changed right after our reason (now " + described(*after) + ")";
    return false;
  }
  return true;
}

}  // namespace triage::agent
