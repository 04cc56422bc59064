#include "collector/health/node_health.h"

#include <algorithm>
#include <map>

#include "collector/health/rcu_stall_repeats.h"
#include "collector/health/xid31_repeats.h"

namespace triage::collector {

namespace {

constexpr int kDegraded = 1;
constexpr int kDrain = 2;
constexpr size_t kMaxIdsPerReason = 16;

struct Finding {
  int level = 0;
  std::string action;
  std::vector<std::string> ids;
  size_t order = 0;
};

class Findings {
 public:
  void add(int level, const std::string& reason, const std::string& action,
           const std::string& event_id = "") {
    auto [it, fresh] = items_.try_emplace(reason);
    Finding& f = it->second;
    if (fresh) f.order = items_.size();
    if (level > f.level) {
      f.level = level;
      f.action = action;
    }
    if (!event_id.empty() && f.ids.size() < kMaxIdsPerReason &&
        std::find(f.ids.begin(), f.ids.end(), event_id) == f.ids.end()) {
      f.ids.push_back(event_id);
    }
  }

  NodeVerdict verdict(const std::string& host, int64_t now) const {
    NodeVerdict v;
    v.host = host;
    v.time_usec = now;
    std::vector<std::pair<std::string, const Finding*>> sorted;
    int worst = 0;
    for (const auto& [reason, f] : items_) {
      sorted.emplace_back(reason, &f);
      worst = std::max(worst, f.level);
    }
    std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
      if (a.second->level != b.second->level) return a.second->level > b.second->level;
      return a.second->order < b.second->order;
    });
    for (const auto& [reason, f] : sorted)
      v.reasons.push_back({reason, f->action, f->ids});
    v.verdict = worst == kDrain ? "drain-recommended" : worst == kDegraded ? "degraded" : "healthy";
    return v;
  }

 private:
  std::map<std::string, Finding> items_;
};

// Events counted against a threshold over the health window.
struct Tally {
  uint64_t count = 0;
  std::vector<std::string> ids;
  void add(const KernelEvent& e) {
    count += std::max<uint64_t>(e.count, 1);
    if (ids.size() < kMaxIdsPerReason) ids.push_back(e.id);
  }
};

std::string describe(const KernelEvent& e) {
  if (!e.summary.empty()) return e.summary;
  std::string s = e.kind;
  if (e.code) s.append(" ").append(std::to_string(*e.code));
  if (!e.block.empty()) s += " in " + e.block;
  if (!e.device.empty()) s += " on " + e.device;
  return s;
}

void apply_tally(Findings& f, const Tally& t, uint64_t degraded_at, uint64_t drain_at,
                 const std::string& what) {
  if (t.count == 0) return;
  const std::string reason = std::to_string(t.count) + " " + what + " in the health window";
  int level = 0;
  std::string action;
  if (drain_at > 0 && t.count >= drain_at) {
    level = kDrain;
    action = "drain";
  } else if (degraded_at > 0 && t.count >= degraded_at) {
    level = kDegraded;
    action = "investigate";
  }
  if (level == 0) return;
  for (const auto& id : t.ids)
    f.add(level, reason, action, id);
}

}  // namespace

bool is_gpu_wchan(const std::string& wchan, const HealthPolicy& policy) {
  return std::any_of(
      policy.gpu_wchan_markers.begin(), policy.gpu_wchan_markers.end(),
      [&](const std::string& m) { return !m.empty() && wchan.find(m) != std::string::npos; });
}

NodeVerdict evaluate_node_health(const HealthInputs& in, const HealthPolicy& policy) {
  Findings f;
  Tally resets, ring_timeouts, hung_tasks, correctable, pcie_nonfatal;
  // The agent's own pile-up events: evidence for the live D-state reason, or reasons of their own
  // when there is no live sample to judge from.
  std::vector<const KernelEvent*> pileups;
  std::vector<const KernelEvent*> rcu_stalls;
  std::vector<const KernelEvent*> xids;  // judged together: one Xid 31 is the application's fault
  const int64_t window_start = in.now_usec - policy.window_usec;

  if (in.events != nullptr) {
    for (const KernelEvent& e : *in.events) {
      // Another boot's events describe a node that has since been rebooted.
      if (!in.boot_id.empty() && !e.boot_id.empty() && e.boot_id != in.boot_id) continue;
      const int64_t last = std::max(e.last_usec, e.time_usec);
      const bool recent = last == 0 || last >= window_start;
      if (e.kind == "nvidia-xid" && recent) xids.push_back(&e);
      if (e.action == "none") continue;  // the catalog says this is not the node's fault
      // A port that came back counts no more; if it keeps going down, the flap rule says so.
      if (e.kind == "ib-port-down") {
        const auto st = e.fields.find("state");
        if (st != e.fields.end() && st->second == "ACTIVE") continue;
      }
      if (e.kind == "dstate-pileup") {
        pileups.push_back(&e);
        continue;
      }
      if (e.action == "drain") {
        f.add(kDrain, describe(e), "drain", e.id);
        continue;
      }
      if (e.action == "reboot-at-job-boundary") {
        f.add(kDrain, describe(e), "reboot-at-job-boundary", e.id);
        continue;
      }
      // A GPU that the catalog says needs a reset (an error, not a warning such as a pending row
      // remap) fails every job placed on it until then, and a reset needs the GPU idle.
      if (e.action == "reset-gpu" && e.severity >= Severity::kError) {
        f.add(kDrain, describe(e), "reset-gpu", e.id);
        continue;
      }
      if (e.kind == "gpu-ras-uncorrectable" || e.kind == "gpu-fallen-off-bus" ||
          e.kind == "gpu-init-failure") {
        f.add(kDrain, describe(e), "drain", e.id);
      } else if (e.kind == "pcie-aer") {
        if (e.severity == Severity::kCritical) {
          f.add(kDrain, describe(e), "drain", e.id);
        } else if (recent && e.severity == Severity::kError) {
          pcie_nonfatal.add(e);
        }
      } else if (!recent) {
        continue;
      } else if (e.kind == "gpu-reset") {
        resets.add(e);
      } else if (e.kind == "gpu-ring-timeout") {
        ring_timeouts.add(e);
      } else if (e.kind == "hung-task") {
        hung_tasks.add(e);
      } else if (e.kind == "gpu-ras-correctable") {
        correctable.add(e);
      } else if (e.kind == "nvidia-xid" || e.kind == "stuck-sysfs-read" ||
                 e.kind == "gpu-driver-oops" || e.kind == "gpu-hardware-error" ||
                 e.kind == "soft-lockup" || e.kind == "rcu-stall" || e.kind == "mce" ||
                 e.kind == "link-down" || e.kind == "nic-init-failure" || e.kind == "nfs-timeout" ||
                 e.kind == "lustre-error" || e.kind == "ib-port-down" || e.kind == "ib-port-flap" ||
                 e.kind == "ib-port-errors" || e.kind == "ib-port-rate") {
        // A file system this node cannot reach stalls the jobs placed on it as surely as a
        // failing part does, whoever's fault the outage is.
        f.add(kDegraded, describe(e), e.action.empty() ? "investigate" : e.action, e.id);
        if (e.kind == "rcu-stall") rcu_stalls.push_back(&e);
      }
      // oom-kill, gpu-page-fault, records-lost: about jobs, not this node.
    }
  }

  apply_tally(f, resets, policy.gpu_reset_degraded, policy.gpu_reset_drain, "GPU reset(s)");
  apply_tally(f, ring_timeouts, policy.ring_timeout_degraded, policy.ring_timeout_drain,
              "GPU ring timeout(s)");
  apply_tally(f, hung_tasks, policy.hung_task_degraded, policy.hung_task_drain,
              "hung task report(s)");
  apply_tally(f, correctable, policy.ras_correctable_degraded, 0, "correctable GPU RAS error(s)");
  apply_tally(f, pcie_nonfatal, policy.pcie_nonfatal_degraded, 0, "PCIe non-fatal error report(s)");

  // An Xid 31 alone is the application's; faults that keep coming back on one GPU, whichever
  // process runs there, are what NVIDIA's Xid 31 workflow sends to the GPU diagnostics.
  if (const auto x = repeated_xid31_on_one_gpu(xids, policy.xid31_repeat_degraded)) {
    const std::string reason = "Xid 31 (GPU memory page fault) in " + std::to_string(x->bursts) +
                               " separate bursts on GPU " + x->device +
                               " and no other: run DCGM diagnostics, then field diagnostics";
    for (const auto& id : x->ids)
      f.add(kDegraded, reason, "investigate", id);
  }

  // One stall warning may pass (a slow console, a time jump, a long loop that then ended); the
  // kernel warning again about the same grace period means it has still not ended several stall
  // timeouts later, which stallwarn.rst says ends in memory exhaustion and a hang.
  if (policy.rcu_stall_repeat_drain > 0) {
    const std::vector<const KernelEvent*> repeats = repeated_rcu_stalls(rcu_stalls);
    if (repeats.size() >= policy.rcu_stall_repeat_drain) {
      const std::string reason = std::to_string(repeats.size()) +
                                 " repeated RCU stall warning(s): a grace period still stalled "
                                 "several stall timeouts after its first warning";
      for (const KernelEvent* e : repeats)
        f.add(kDrain, reason, "drain", e->id);
    }
  }

  if (in.dstate != nullptr) {
    uint64_t gpu = 0;
    uint64_t any = 0;
    std::map<std::string, uint64_t> gpu_wchans;
    for (const DStateTask& t : in.dstate->tasks) {
      if (!t.persistent) continue;
      ++any;
      if (is_gpu_wchan(t.wchan, policy)) {
        ++gpu;
        ++gpu_wchans[t.wchan];
      }
    }
    if (policy.dstate_gpu_reboot > 0 && gpu >= policy.dstate_gpu_reboot) {
      std::string where;
      for (const auto& [w, n] : gpu_wchans) {
        where += (where.empty() ? "" : ", ") + w + " x" + std::to_string(n);
      }
      const std::string reason = std::to_string(gpu) +
                                 " task(s) stuck in D state in GPU driver paths (" + where +
                                 "); they cannot be killed, only a reboot clears them";
      f.add(kDrain, reason, "reboot-at-job-boundary");
      for (const KernelEvent* e : pileups) {
        if (e->action == "reboot-at-job-boundary")
          f.add(kDrain, reason, "reboot-at-job-boundary", e->id);
      }
    } else if (policy.dstate_degraded > 0 && any >= policy.dstate_degraded) {
      const std::string reason = std::to_string(any) + " task(s) stuck in D state";
      f.add(kDegraded, reason, "investigate");
      for (const KernelEvent* e : pileups)
        f.add(kDegraded, reason, "investigate", e->id);
    }
  } else {
    for (const KernelEvent* e : pileups) {
      const bool reboot = e->action == "reboot-at-job-boundary";
      f.add(reboot ? kDrain : kDegraded, describe(*e),
            reboot ? "reboot-at-job-boundary" : "investigate", e->id);
    }
  }
  if (in.stuck_sysfs_reads > 0) {
    f.add(kDegraded,
          std::to_string(in.stuck_sysfs_reads) + " sysfs read(s) stuck in the kernel right now",
          "investigate");
  }
  return f.verdict(in.host, in.now_usec);
}

}  // namespace triage::collector
