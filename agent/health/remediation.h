// Reboot and return (issue 27, Remediate=reboot): a fault the kernel catalogs mark `remedy =
// reboot` gets `scontrol reboot ASAP nextstate=DOWN reason="triage: reboot: <fault> [boot <tag>]"`:
// Slurm drains the node, reboots it through RebootProgram once it is idle, and brings it back DOWN,
// so that no job lands before the agent has looked (mej/nhc #81, PR #115). The first health pass on
// the new boot decides: clean, and the reason still ours, the agent resumes the node; not clean,
// the node stays DOWN with "triage: needs hands: ..." and the new evidence, and no second reboot is
// tried for the same fault.
//
// Slurm keeps our reason across the reboot and appends " : reboot issued" when it sends the reboot
// (22.05 src/slurmctld/controller.c _queue_reboot_msg), then " : reboot complete" when the node
// returns with nextstate=DOWN (node_mgr.c validate_node_specs, set_node_reboot_reason), or
// " : reboot timed out" when it did not come back within ResumeTimeout.
//
// Everything here is a plain value: the controller (drain_controller.h) runs the commands.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/slurm/slurm_client.h"
#include "common/model.h"

namespace triage::agent {

// A fault of this boot that a reboot clears.
struct RebootFault {
  std::string event_id;
  std::string summary;  // the event's one line
  std::string key;  // what makes two faults "the same": kind and device ("nvidia-xid@0000:3b:00")
};

// The latest event on boot `boot_id` whose catalog remedy is "reboot" (the event's "remedy" field),
// or nullopt when this boot has none.
std::optional<RebootFault> reboot_fault(const std::vector<KernelEvent>& events,
                                        std::string_view boot_id);

// "triage: reboot: <summary> [boot <tag>]": the reason `scontrol reboot` is given.
std::string reboot_reason(std::string_view summary, std::string_view boot_id);
// "triage: needs hands: <evidence> [boot <tag>]": the reason a node keeps when a reboot did not
// clear it, or when the same fault came back after one.
std::string needs_hands_reason(std::string_view evidence, std::string_view boot_id);

enum class OwnReasonKind { kReboot, kNeedsHands };

struct OwnRemediationReason {
  OwnReasonKind kind = OwnReasonKind::kReboot;
  std::string boot_tag;      // the boot it was written on
  std::string slurm_suffix;  // what slurmctld appended (" : reboot complete"), or empty
};

// The reason parsed when it is one of ours from reboot_reason() or needs_hands_reason(), with only
// slurmctld's " : reboot issued" / " : reboot complete" / " : reboot timed out" after it; nullopt
// for any other text (an admin's edit makes the reason theirs).
std::optional<OwnRemediationReason> parse_remediation_reason(std::string_view reason);

// `scontrol reboot ASAP nextstate=DOWN reason=<reason> <node>`.
std::vector<std::string> reboot_argv(const std::string& node, const std::string& reason);
// `scontrol update NodeName=<node> State=RESUME`.
std::vector<std::string> resume_argv(const std::string& node);
// `scontrol update NodeName=<node> State=DOWN Reason=<reason>` (the node is DOWN already: only
// the reason changes).
std::vector<std::string> down_reason_argv(const std::string& node, const std::string& reason);

// One reboot the agent asked for, as kept in <SpoolDir>/remediation.log: when, on which boot, for
// which fault.
struct RebootRecord {
  int64_t time_sec = 0;
  std::string boot_tag;
  std::string fault_key;
};

// "<time> <boot tag> <fault key>\n".
std::string format_reboot_record(const RebootRecord& r);
// The records of a remediation log; lines that are not records (a torn last write) are skipped.
std::vector<RebootRecord> parse_reboot_records(std::string_view text);

// How long a reboot for a fault counts against the same fault: NVSentinel escalates to "contact
// support" at 5 remediations of one node in 7 days (health-events-analyzer.md); the agent stops at
// the second, within the same 7 days.
inline constexpr int64_t kSameFaultWindowSec = 7LL * 24 * 3600;

enum class FaultStep {
  kDrain,       // no reboot remedy (or Remediate is off): the drain path as before
  kReboot,      // ask Slurm for the reboot
  kNeedsHands,  // a reboot already ran for this fault: take the node out for a person instead
  kNothing,     // a step is already in place (our reboot pending, our needs-hands, an admin's)
};

struct FaultInputs {
  bool remediate_reboot = false;       // Remediate=reboot
  std::optional<SlurmNodeState> node;  // Slurm's view, when known
  std::string boot_id;
  std::optional<RebootFault> fault;   // this boot's reboot-clearable fault
  std::vector<RebootRecord> reboots;  // earlier reboots the agent asked for
  int64_t now_sec = 0;
};

struct FaultDecision {
  FaultStep step = FaultStep::kDrain;
  std::string why;
};

// For a drain-recommended node: reboot only under Remediate=reboot, for a reboot-clearable fault,
// on a node nobody else took out, when no reboot for the same fault ran in the last
// kSameFaultWindowSec and Slurm does not show our reboot of an earlier boot (then: needs hands);
// nothing when our reboot of this boot or a needs-hands is in place, or the node is DOWN back from
// our reboot (decide_return's case); the drain otherwise.
FaultDecision decide_fault_step(const FaultInputs& in);

enum class ReturnStep {
  kNone,        // not a node we rebooted (or not yet back from it)
  kWait,        // ours, rebooted, but the health pass on this boot has not run yet
  kResume,      // clean: return it to service
  kNeedsHands,  // not clean: keep it DOWN, say why
};

struct ReturnInputs {
  std::optional<SlurmNodeState> node;
  std::string boot_id;
  bool health_fresh = false;
  std::string verdict;  // this boot's health verdict
  bool drain_recommended_this_boot = false;
  std::optional<RebootFault> fault;  // a reboot-clearable fault on this boot
  std::string evidence;              // the verdict's first reason, when not healthy
};

struct ReturnDecision {
  ReturnStep step = ReturnStep::kNone;
  std::string why;
  std::string reason;  // for kNeedsHands: the reason to write
};

// After our reboot (Slurm shows the node DOWN with our reboot reason from an earlier boot):
// resumes once a fresh health pass on this boot is healthy, never drain-recommended and free of a
// reboot-clearable fault; keeps it DOWN with a needs-hands reason naming the new evidence when
// not; does nothing for any other node (another reason, our needs-hands, or the boot the reboot
// was asked on).
ReturnDecision decide_return(const ReturnInputs& in);

}  // namespace triage::agent
