// The threads that feed NodeState: the D-state and sysfs collectors (one PeriodicThread each) and
// the kernel log reader (KernelIngest). They never touch the node's state themselves; they post to
// the loop or go through NodeState's thread-safe entry points.
#pragma once

#include <memory>
#include <string>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/base/periodic_thread.h"
#include "agent/node/kernel_ingest.h"
#include "agent/node/node_state.h"
#include "collector/proc/dstate_sampler.h"
#include "collector/proc/gpu_holders.h"
#include "collector/sysfs/hw_counters.h"
#include "collector/sysfs/ib_port_watch.h"

namespace triage::agent {

// This boot's id in the journal's spelling (the one kernel events carry), read from <ProcRoot>'s
// fixture tree when it has one, else from the real /proc; "unknown-boot" when neither reads.
std::string read_agent_boot_id(const std::string& proc_root);
// The same from `boot_id_file` (BootIdFile) when it is set, else from under `proc_root`.
std::string read_agent_boot_id(const std::string& proc_root, const std::string& boot_id_file);

// The port thresholds from the agent's rule layers ([ib-port-thresholds default]); errors are
// logged and leave those thresholds at their defaults.
collector::IbThresholds load_ib_thresholds(const AgentConfig& cfg);

class NodeFeeds {
 public:
  NodeFeeds(const AgentConfig& cfg, EventLoop& loop, NodeState& node);
  ~NodeFeeds();
  NodeFeeds(const NodeFeeds&) = delete;
  NodeFeeds& operator=(const NodeFeeds&) = delete;

  // Starts the collector threads (their first samples are taken at once).
  void start_collectors();
  // Starts the configured KernelSource, unless it is "none" or `wanted` is false (tests that feed
  // NodeState::ingest() themselves).
  void start_kernel_ingest(bool wanted);
  // Asks the kernel reader to end and returns at once.
  void stop_kernel_ingest();
  // Ends the kernel reader (waiting for it), then the collector threads.
  void shut_down();

  // The kernel reader's state; source "none" when it is not running.
  KernelIngestStatus kernel_status() const;
  // Asks the kernel reader to look at its source now (nothing when it is not running).
  void kernel_look_again();

 private:
  const AgentConfig& cfg_;
  EventLoop& loop_;
  NodeState& node_;
  std::unique_ptr<collector::DStateSampler> sampler_;
  std::unique_ptr<collector::HwCounterReader> hw_reader_;
  std::unique_ptr<collector::HwCounterWatch> hw_watch_;
  std::unique_ptr<collector::IbPortWatch> ib_watch_;
  std::unique_ptr<PeriodicThread> dstate_thread_;
  std::unique_ptr<PeriodicThread> sysfs_thread_;
  // The walk for processes holding a GPU (the preflight's leftovers), on a thread of its own.
  std::unique_ptr<collector::GpuHolderScanner> gpu_scanner_;
  std::unique_ptr<PeriodicThread> gpu_holder_thread_;
  std::unique_ptr<KernelIngest> kernel_ingest_;
};

}  // namespace triage::agent
