#include "agent/health/drain_hygiene.h"

#include <cctype>

namespace triage::agent {

namespace {

constexpr std::string_view kTagOpen = " [boot ";
constexpr size_t kTagLength = 8;

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool tag_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '-' || c == '_';
}

}  // namespace

const char* drain_owner_name(DrainOwner owner) {
  switch (owner) {
    case DrainOwner::kNone:
      return "none";
    case DrainOwner::kOurs:
      return "ours";
    case DrainOwner::kAdmin:
      return "admin";
    case DrainOwner::kUnknown:
      break;
  }
  return "unknown";
}

DrainOwner drain_owner(const SlurmNodeState& node) {
  if (!node.drain) return DrainOwner::kNone;
  return starts_with(node.reason, kOwnDrainPrefix) ? DrainOwner::kOurs : DrainOwner::kAdmin;
}

std::string boot_tag(std::string_view boot_id) {
  return std::string(boot_id.substr(0, kTagLength));
}

std::string tagged_drain_why(std::string_view why, std::string_view boot_id) {
  std::string out(why);
  out += kTagOpen;
  out += boot_tag(boot_id);
  out += ']';
  return out;
}

std::optional<std::string> drain_reason_boot(std::string_view reason) {
  if (!starts_with(reason, kOwnDrainPrefix) || reason.back() != ']') return std::nullopt;
  const size_t open = reason.rfind(kTagOpen);
  if (open == std::string_view::npos) return std::nullopt;
  const std::string_view tag =
      reason.substr(open + kTagOpen.size(), reason.size() - 1 - open - kTagOpen.size());
  if (tag.empty() || tag.size() > kTagLength) return std::nullopt;
  for (const char c : tag) {
    if (!tag_char(c)) return std::nullopt;
  }
  return std::string(tag);
}

bool health_pass_fresh(bool kernel_reader_on, int64_t kernel_caught_up_usec, bool collectors_on,
                       bool have_dstate_sample, bool have_sysfs_snapshot) {
  if (kernel_reader_on && kernel_caught_up_usec <= 0) return false;
  return !collectors_on || (have_dstate_sample && have_sysfs_snapshot);
}

LiftDecision decide_drain_lift(const LiftInputs& in) {
  if (in.policy != "auto")
    return {false, "DrainPolicy is " + in.policy + ": drains are not lifted"};
  if (!in.node) return {false, "Slurm's view of the node is not known yet"};
  const SlurmNodeState& n = *in.node;
  const DrainOwner owner = drain_owner(n);
  if (owner == DrainOwner::kNone) return {false, "the node is not drained"};
  if (owner == DrainOwner::kAdmin) return {false, "the drain is not ours (" + n.reason + ")"};
  const std::optional<std::string> boot = drain_reason_boot(n.reason);
  if (!boot) return {false, "our drain names no boot; lift it by hand"};
  if (*boot == boot_tag(in.boot_id)) return {false, "the node has not rebooted since our drain"};
  if (n.down) return {false, "the node is " + n.state + "; only the drain would be ours to lift"};
  if (!in.health_fresh) return {false, "waiting for a health pass on this boot"};
  if (in.drain_recommended_this_boot)
    return {false, "the node was drain-recommended again on this boot"};
  if (in.verdict != "healthy") return {false, "the node is " + in.verdict + " on this boot"};
  return {true, "rebooted since our drain (boot " + *boot + ") and healthy on this boot"};
}

}  // namespace triage::agent
