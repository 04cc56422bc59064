// Whether NVIDIA Xid 31s (GPU memory page faults) repeat on one GPU, the pattern NVIDIA's
// investigatory workflow for Xid 31 says points at the GPU rather than at the application.
//
// The Xid catalog (docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html) gives Xid 31 the
// immediate action RESTART_APP and the investigatory action WORKFLOW_XID_31: "Repeat MMU faults to
// same GPU (via PCI-ID): RUN_DCGMEUD (possible HW issue); if pass RUN_FIELDDIAGS. Repeat MMU faults
// to diff GPU (via PCI-ID): CHECK_APP/CUDA. Solo, no burst: CHECK_APP/CUDA" (quoted in NVIDIA's
// NVSentinel, docs/designs/014-workflow-XID-13-and-31.md). NVSentinel implements it in its
// health-events-analyzer rules RepeatedXID31OnSameGPU ("XID 31 occurred 2 or more times on the
// same GPU within 24 hours where the burst window is 3 minutes": RUN_DCGMEUD) and
// RepeatedXID31OnDifferentGPU (on 2 or more GPUs: NONE, the application).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/model.h"

namespace triage::collector {

// NVSentinel's burst window: Xid 31s less than this apart are one burst (one fault, many lines).
inline constexpr int64_t kXid31BurstGapUsec = 180LL * 1000000;

struct Xid31Repeat {
  std::string device;            // the GPU's PCI address as the driver printed it
  uint64_t bursts = 0;           // separate bursts of Xid 31 on it
  std::vector<std::string> ids;  // the events, oldest first
};

// The GPU on which `xids` (Xid events of one boot within the health window; others are ignored)
// put Xid 31 in at least `min_bursts` separate bursts, provided no other GPU had an Xid 31: faults
// spread over several GPUs are the application's (WORKFLOW_XID_31), and where both patterns show
// this sides with the application, as the catalog's own "typically these are application-level
// bugs" does. Nothing when `min_bursts` is 0.
std::optional<Xid31Repeat> repeated_xid31_on_one_gpu(const std::vector<const KernelEvent*>& xids,
                                                     uint64_t min_bursts);

}  // namespace triage::collector
