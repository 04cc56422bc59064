// A node's health verdict, from trusted evidence only: the kernel's events (classified by the
// kernel rule catalogs, which attach an `action`), the hardware counters in sysfs, and the D-state
// sampler. Nothing from a job's own files ever reaches this function.
//
//   drain-recommended  the node should take no new jobs (uncorrectable errors, fatal PCIe errors,
//                      a catalog action of drain, a GPU that needs a reset (reset-gpu at error
//                      severity or worse), repeated resets, D-state pile-up in amdgpu paths
//                      that only a reboot clears: action reboot-at-job-boundary, an RCU stall
//                      the kernel warned about again: its grace period is still not ending, see
//                      rcu_stall_repeats.h)
//   degraded           worth watching (correctable errors, one reset, stuck sysfs reads, an
//                      unreachable file system, an InfiniBand port down now, port errors, Xid 31
//                      repeating on one GPU (xid31_repeats.h), ...);
//                      the port events' actions come from rules/ib-ports.rules (a flapping
//                      port: drain)
//   healthy            nothing of the above
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "collector/proc/dstate_sampler.h"
#include "common/model.h"

namespace triage::collector {

// Every threshold is a triage.conf key (see docs/agent.md); a count of 0 disables that rule.
struct HealthPolicy {
  int64_t window_usec = 24LL * 3600 * 1000000;  // HealthWindow: counted rules look this far back
  uint64_t gpu_reset_degraded = 1;              // GpuResetDegradedCount
  uint64_t gpu_reset_drain = 3;                 // GpuResetDrainCount
  uint64_t ring_timeout_degraded = 1;           // RingTimeoutDegradedCount
  uint64_t ring_timeout_drain = 3;              // RingTimeoutDrainCount
  uint64_t hung_task_degraded = 1;              // HungTaskDegradedCount
  uint64_t hung_task_drain = 10;                // HungTaskDrainCount
  uint64_t ras_correctable_degraded = 10;       // CorrectableErrorDegradedCount
  uint64_t pcie_nonfatal_degraded = 1;          // PcieNonfatalDegradedCount
  uint64_t rcu_stall_repeat_drain = 1;          // RcuStallRepeatDrainCount (rcu_stall_repeats.h)
  uint64_t xid31_repeat_degraded = 2;           // Xid31RepeatDegradedCount (xid31_repeats.h)
  uint64_t dstate_gpu_reboot = 3;               // DStateGpuRebootCount (persistent, amdgpu wchan)
  uint64_t dstate_degraded = 20;                // DStateDegradedCount (persistent, any wchan)
  // DStateGpuWchan: a wchan containing any of these is an amdgpu path.
  std::vector<std::string> gpu_wchan_markers = {"amdgpu", "cper", "aca_", "kfd"};
};

struct HealthInputs {
  std::string host;
  std::string boot_id;  // events of other boots are history, not this node's current state
  int64_t now_usec = 0;
  const std::vector<KernelEvent>* events = nullptr;
  const DStateSample* dstate = nullptr;  // the latest sample, when there is one
  size_t stuck_sysfs_reads = 0;          // reads still stuck right now
};

NodeVerdict evaluate_node_health(const HealthInputs& in, const HealthPolicy& policy);

// True when `wchan` is one of the policy's GPU driver paths.
bool is_gpu_wchan(const std::string& wchan, const HealthPolicy& policy);

}  // namespace triage::collector
