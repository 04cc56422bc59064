// The preflight: whether this node is fit to take the job whose prolog is asking (opt-in by the
// plugstack's preflight=on; docs/agent.md, "Preflight"). Decided from what the agent already
// holds, never from a new probe: the prolog waits at most 50 ms for the answer and goes ahead
// without one.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/node/job_table.h"
#include "collector/proc/dstate_sampler.h"
#include "collector/proc/gpu_holders.h"
#include "common/model.h"

namespace triage::agent {

// A process of a job that has ended on this node and is still there: holding a GPU device open,
// or stuck in D state (uninterruptible sleep) since at least the sampler's persistence threshold.
struct LeftoverTask {
  int64_t pid = 0;
  std::string comm;
  uint64_t job_id = 0;
  std::string device;  // the GPU device it holds open ("/dev/nvidia0"), "" when none
  bool stuck_in_d = false;
  std::string wchan;  // where it sleeps, when it is in D
};

// The plain facts the decision reads.
struct PreflightFacts {
  NodeVerdict verdict;                  // the node's current health verdict
  std::vector<std::string> ports_down;  // network ports down right now ("mlx5_0/1")
  std::vector<LeftoverTask> leftovers;  // processes of ended jobs still on the node
  // The GPU indices Slurm's gres gave the job on this node (SLURM_JOB_GPUS: "0,1"), and those the
  // agent last saw present (nullopt: the agent holds no inventory, so presence is not judged).
  std::vector<std::string> gpus_expected;
  std::optional<std::set<std::string>> gpus_present;
};

struct PreflightAnswer {
  bool fit = true;
  std::vector<std::string> evidence;  // one line per reason the node is unfit
};

// The node is fit unless its verdict is drain-recommended, a port is down, a process of an ended
// job holds a GPU or is stuck in D state, or a GPU Slurm gave the job is missing; each such fact
// is one line of evidence, in that order.
PreflightAnswer decide_preflight(const PreflightFacts& facts);

// The reason the failed prolog gives Slurm (which puts it on the drained node): "triage preflight:
// " and the evidence joined by "; ", cut to `max_bytes` (Slurm's reasons are one line; the agent's
// log keeps the whole evidence).
std::string preflight_reason(const PreflightAnswer& answer, size_t max_bytes = 256);

// The GPU indices in SLURM_JOB_GPUS ("0,1,3"); an empty or malformed list gives none.
std::vector<std::string> parse_job_gpus(const std::string& text);

// The GPU index a device file stands for: /dev/nvidia<N> is N, /dev/dri/renderD<128+N> is N (the
// order Slurm's gres.conf lists them in when it was generated with AutoDetect); nullopt for
// anything else (/dev/nvidiactl, /dev/kfd).
std::optional<std::string> gpu_index_of_device(const std::string& device_name);

// The tasks of the D-state sampler's latest `sample` that belong to a job `jobs` knows as ended
// on this node and have stayed in D for the sampler's persistence threshold
// (DStatePersistentAfter): a task in D for a moment while its job is torn down is not a leftover.
std::vector<LeftoverTask> stuck_leftovers(const collector::DStateSample& sample,
                                          const JobTable& jobs);

// The GPU holders of the latest `scan` whose job `jobs` knows as ended on this node at least
// `grace_usec` before `now_usec` (LeftoverGrace): a process still closing its GPU while its job is
// torn down is not a leftover. A process holding several GPUs names them all ("/dev/nvidia0,
// /dev/nvidia1").
std::vector<LeftoverTask> gpu_leftovers(const collector::GpuHolderScan& scan, const JobTable& jobs,
                                        int64_t now_usec, int64_t grace_usec);

// `stuck` and `gpu` as one list by pid: a process in both is one leftover that holds a GPU and is
// stuck in D state.
std::vector<LeftoverTask> merge_leftovers(std::vector<LeftoverTask> stuck,
                                          const std::vector<LeftoverTask>& gpu);

}  // namespace triage::agent
