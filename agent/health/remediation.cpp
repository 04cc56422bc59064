#include "agent/health/remediation.h"

#include "agent/health/drain_hygiene.h"
#include "collector/kernel_rules.h"
#include "common/text.h"

namespace triage::agent {

namespace {

constexpr std::string_view kRebootPrefix = "triage: reboot: ";
constexpr std::string_view kNeedsHandsPrefix = "triage: needs hands: ";
// What slurmctld appends to a rebooting node's reason (22.05 node_mgr.c set_node_reboot_reason).
constexpr std::string_view kSlurmSuffixes[] = {" : reboot issued", " : reboot complete",
                                               " : reboot timed out"};

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string tagged(std::string_view prefix, std::string_view text, std::string_view boot_id) {
  return std::string(prefix) + tagged_drain_why(text, boot_id);
}

}  // namespace

std::optional<RebootFault> reboot_fault(const std::vector<KernelEvent>& events,
                                        std::string_view boot_id) {
  const KernelEvent* latest = nullptr;
  for (const KernelEvent& e : events) {
    if (e.boot_id != boot_id) continue;
    const auto it = e.fields.find(collector::kRemedyField);
    if (it == e.fields.end() || it->second != "reboot") continue;
    if (latest == nullptr || e.time_usec >= latest->time_usec) latest = &e;
  }
  if (latest == nullptr) return std::nullopt;
  RebootFault f;
  f.event_id = latest->id;
  f.summary = latest->summary.empty() ? latest->kind : latest->summary;
  f.key = latest->kind + "@" + (latest->device.empty() ? "node" : latest->device);
  return f;
}

std::string reboot_reason(std::string_view summary, std::string_view boot_id) {
  return tagged(kRebootPrefix, summary, boot_id);
}

std::string needs_hands_reason(std::string_view evidence, std::string_view boot_id) {
  return tagged(kNeedsHandsPrefix, evidence, boot_id);
}

std::optional<OwnRemediationReason> parse_remediation_reason(std::string_view reason) {
  OwnRemediationReason out;
  if (starts_with(reason, kRebootPrefix)) {
    out.kind = OwnReasonKind::kReboot;
  } else if (starts_with(reason, kNeedsHandsPrefix)) {
    out.kind = OwnReasonKind::kNeedsHands;
  } else {
    return std::nullopt;
  }
  // Slurm appends each step in turn (" : reboot issued : reboot complete"); the suffixes are kept
  // in the order written.
  for (bool more = true; more;) {
    more = false;
    for (const std::string_view suffix : kSlurmSuffixes) {
      if (ends_with(reason, suffix)) {
        out.slurm_suffix.insert(0, suffix);
        reason.remove_suffix(suffix.size());
        more = true;
      }
    }
  }
  std::optional<std::string> tag = drain_reason_boot(reason);
  if (!tag) return std::nullopt;
  out.boot_tag = std::move(*tag);
  return out;
}

std::vector<std::string> reboot_argv(const std::string& node, const std::string& reason) {
  return {"scontrol", "reboot", "ASAP", "nextstate=DOWN", "reason=" + reason, node};
}

std::vector<std::string> resume_argv(const std::string& node) {
  return {"scontrol", "update", "NodeName=" + node, "State=RESUME"};
}

std::vector<std::string> down_reason_argv(const std::string& node, const std::string& reason) {
  return {"scontrol", "update", "NodeName=" + node, "State=DOWN", "Reason=" + reason};
}

std::string format_reboot_record(const RebootRecord& r) {
  return std::to_string(r.time_sec) + " " + r.boot_tag + " " + r.fault_key + "\n";
}

std::vector<RebootRecord> parse_reboot_records(std::string_view text) {
  std::vector<RebootRecord> out;
  for (const std::string_view line : split(text, '\n')) {
    const std::vector<std::string_view> parts = split(trim(line), ' ');
    if (parts.size() != 3 || parts[1].empty() || parts[2].empty()) continue;
    const std::optional<int64_t> t = parse_int(parts[0]);
    if (!t) continue;
    out.push_back({*t, std::string(parts[1]), std::string(parts[2])});
  }
  return out;
}

FaultDecision decide_fault_step(const FaultInputs& in) {
  if (!in.remediate_reboot) return {FaultStep::kDrain, "Remediate is off"};
  if (!in.fault) return {FaultStep::kDrain, "no fault a reboot clears"};
  const RebootFault& f = *in.fault;
  if (in.node) {
    const SlurmNodeState& n = *in.node;
    const std::optional<OwnRemediationReason> own = parse_remediation_reason(n.reason);
    if (own && own->kind == OwnReasonKind::kNeedsHands)
      return {FaultStep::kNothing, "the node already waits for hands (" + n.reason + ")"};
    if (own && own->boot_tag == boot_tag(in.boot_id))
      return {FaultStep::kNothing, "our reboot is already asked for (" + n.reason + ")"};
    // DOWN after our reboot: the first health pass on this boot decides (decide_return).
    if (own && n.down)
      return {FaultStep::kNothing, "back from our reboot; the return decides (" + n.reason + ")"};
    // Up again with our old reason: from Slurm 23.11 on, a cluster without accounting storage
    // keeps a resumed node's reason, so that is a finished reboot, and whether this fault is the
    // one it was for is the reboot records' question below. Draining under our old reason is
    // not a state our cycle leaves, so it is left to an admin.
    if (own && n.drain) {
      return {FaultStep::kNeedsHands,
              "rebooted once already (" + n.reason + "); a second reboot is not tried"};
    }
    if ((n.drain || n.down) && !n.reason.empty() && !starts_with(n.reason, kOwnDrainPrefix))
      return {FaultStep::kNothing,
              "the node is " + n.state + " by someone else (" + n.reason + ")"};
  }
  for (const RebootRecord& r : in.reboots) {
    if (r.fault_key == f.key && in.now_sec - r.time_sec < kSameFaultWindowSec &&
        r.boot_tag != boot_tag(in.boot_id)) {
      return {FaultStep::kNeedsHands, "the same fault (" + f.key +
                                          ") came back after our reboot (boot " + r.boot_tag +
                                          "); a second reboot is not tried"};
    }
  }
  return {FaultStep::kReboot, f.summary};
}

ReturnDecision decide_return(const ReturnInputs& in) {
  if (!in.node) return {ReturnStep::kNone, "Slurm's view of the node is not known yet", ""};
  const SlurmNodeState& n = *in.node;
  const std::optional<OwnRemediationReason> own = parse_remediation_reason(n.reason);
  if (!own) return {ReturnStep::kNone, "not a reboot of ours", ""};
  if (own->kind == OwnReasonKind::kNeedsHands)
    return {ReturnStep::kNone, "needs hands: left for an admin", ""};
  if (own->boot_tag == boot_tag(in.boot_id))
    return {ReturnStep::kNone, "our reboot has not happened yet", ""};
  if (!n.down)
    return {ReturnStep::kNone, "the node is " + n.state + ", not DOWN after our reboot", ""};
  if (!in.health_fresh) return {ReturnStep::kWait, "waiting for a health pass on this boot", ""};
  std::string evidence;
  if (in.fault) {
    evidence = in.fault->summary;
  } else if (in.drain_recommended_this_boot || in.verdict != "healthy") {
    evidence = in.evidence.empty() ? "the node is " + in.verdict + " on this boot" : in.evidence;
  }
  if (evidence.empty()) {
    return {ReturnStep::kResume,
            "rebooted for our fault (boot " + own->boot_tag + ") and healthy on this boot", ""};
  }
  std::string reason = needs_hands_reason(evidence + " after our reboot", in.boot_id);
  return {ReturnStep::kNeedsHands, "not clean after our reboot: " + evidence, std::move(reason)};
}

}  // namespace triage::agent
