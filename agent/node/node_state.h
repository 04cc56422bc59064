// What the agent knows about its node: the crash-safe spool, the node's kernel and hardware events,
// the jobs it has heard of, the collectors' latest samples and the durable kernel position. It
// turns raw input (kernel events, D-state samples, sysfs snapshots, spool replay) into that state
// and keeps it bounded (maintain()).
//
// Everything here lives on the event-loop thread, except what is marked thread-safe: ingest(),
// durable_position() and running_pids() are how the kernel reader and the collector threads reach
// it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/node/event_store.h"
#include "agent/node/job_table.h"
#include "agent/node/spool.h"
#include "collector/proc/dstate_sampler.h"
#include "collector/proc/gpu_holders.h"
#include "collector/sysfs/hw_counters.h"
#include "common/model.h"

namespace triage::agent {

class NodeState {
 public:
  struct Stats {
    std::map<std::string, uint64_t> events_by_kind;
    uint64_t oom_kills = 0;
    uint64_t gpu_errors = 0;
    uint64_t duplicates_dropped = 0;
    uint64_t spool_dropped_events = 0;  // pending events given up on (spool full too long)
    uint64_t spool_torn_lines = 0;
    uint64_t spool_bad_lines = 0;
    SpoolUsage spool_usage;
  };

  NodeState(const AgentConfig& cfg, EventLoop& loop);
  NodeState(const NodeState&) = delete;
  NodeState& operator=(const NodeState&) = delete;

  // Replays the spool (events, kernel position, the newest jobs). Throws when the spool cannot be
  // used at all.
  void open(std::string boot_id);
  // Called (on the loop) whenever the node's evidence changed: the health check should look again.
  void set_on_change(std::function<void()> fn) { on_change_ = std::move(fn); }

  // Thread-safe, not for the loop thread: hands kernel events and the source position they cover
  // to the loop and waits until they are durable (true) or kept for a retry (false).
  bool ingest(std::vector<KernelEvent> events, std::string position);
  // Thread-safe: the durable kernel position a restarted reader resumes from.
  std::string durable_position();
  // Thread-safe: pid -> job of the running tasks, for the D-state sampler.
  std::map<int64_t, uint64_t> running_pids();

  // Loop thread: applies events and makes them durable with `position` ("" keeps the position).
  // `durable` (when not null) tells whether that worked.
  void apply(std::vector<KernelEvent> events, const std::string& position, bool* durable);
  void on_dstate_sample(collector::DStateSample sample);
  void on_sysfs_snapshot(collector::SysfsSnapshot snapshot, std::vector<KernelEvent> events);
  // Keeps the latest walk for GPU holders, and logs each holder whose job is not running here
  // (once per pid and job): the process the preflight will name once LeftoverGrace has passed.
  void on_gpu_holders(collector::GpuHolderScan scan);
  // Refreshes the running-pid snapshot after a lifecycle message changed the tasks.
  void publish_pids();

  // A job, loaded from the spool on demand when it was evicted from memory.
  JobRecord* job(uint64_t job_id);
  // Expires old events and jobs and keeps the spool under SpoolMaxSize; `busy` jobs (in the
  // job-end pipeline) are kept.
  void maintain(const std::function<bool(uint64_t job_id)>& busy);
  // This node's evidence for a job in a window (0: the job's own), with the node's verdict.
  NodeEvidence evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec,
                        const NodeVerdict& verdict);

  const std::string& boot_id() const { return boot_id_; }
  Spool& spool() { return spool_; }
  const Spool& spool() const { return spool_; }
  JobTable& jobs() { return jobs_; }
  const JobTable& jobs() const { return jobs_; }
  const EventStore& events() const { return events_; }
  const std::string& kernel_position() const { return kernel_position_; }
  size_t pending_events() const { return pending_events_.size(); }
  const std::optional<collector::DStateSample>& dstate() const { return dstate_; }
  const std::optional<collector::SysfsSnapshot>& sysfs() const { return sysfs_; }
  const std::optional<collector::GpuHolderScan>& gpu_holders() const { return gpu_holders_; }
  const Stats& stats() const { return stats_; }

  // The InfiniBand/RoCE ports of this node that are down right now ("mlx5_0/1"), from the latest
  // sysfs snapshot (at most SysfsSampleInterval old); empty before the first one. Loop thread.
  std::vector<std::string> ib_ports_down_now() const;

 private:
  void normalize(KernelEvent& e) const;
  void count_event(const KernelEvent& e, const KernelEvent* previous);
  void load_jobs_from_spool();
  void changed();

  const AgentConfig& cfg_;
  EventLoop& loop_;
  std::function<void()> on_change_;
  std::string boot_id_;

  Spool spool_;
  EventStore events_;
  JobTable jobs_;
  std::string kernel_position_;
  std::vector<KernelEvent> pending_events_;  // applied but not yet durable
  std::string pending_position_;
  bool retry_scheduled_ = false;
  std::mutex position_mu_;
  std::string durable_position_copy_;  // guarded by position_mu_
  std::mutex pids_mu_;
  std::map<int64_t, uint64_t> pids_snapshot_;  // guarded by pids_mu_

  std::optional<collector::DStateSample> dstate_;
  std::optional<collector::SysfsSnapshot> sysfs_;
  std::optional<collector::GpuHolderScan> gpu_holders_;
  std::map<std::string, int64_t> pileup_emitted_;  // dstate-pileup id -> last emission (usec)
  Stats stats_;
};

}  // namespace triage::agent
