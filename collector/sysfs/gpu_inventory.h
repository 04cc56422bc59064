// Which GPUs this node has right now, as the indices Slurm's gres gives jobs (SLURM_JOB_GPUS): the
// preflight refuses a job whose GPU is not there (issue 27, part 2). Two sources, the union taken:
//   - NVIDIA: the driver's device files <dev_dir>/nvidia<N> (nvidia-modprobe makes one per GPU the
//     driver found, N its minor; gres.conf names them File=/dev/nvidia[0-7], AutoDetect=nvml
//     likewise);
//   - AMD (and NVIDIA with nvidia-drm): the DRM render nodes <sysfs>/class/drm/renderD<128+N>
//     whose PCI device's vendor is 0x1002 or 0x10de, index N (agent/health/preflight.h
//     gpu_index_of_device; render nodes, not cardN: a BMC's VGA takes card0 and has no render
//     node).
// A GPU that fell off the bus and was removed from the PCI tree loses its render node; one the
// driver did not find at boot has no device file.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "collector/io/guarded_reader.h"

namespace triage::collector {

// The GPU index of a render node's name ("renderD129" -> "1"); nullopt for anything else.
std::optional<std::string> render_node_index(std::string_view name);

// The GPU indices present, read through `reader` (a sysfs vendor file can block like any other
// sysfs read); nullopt when neither source shows a GPU at all (a CPU node: the preflight does not
// judge presence there). A render node whose vendor read is stuck counts as present: a read that
// hangs is no evidence that the GPU is missing (it is a stuck-sysfs-read of its own); one without a
// vendor file is no PCI GPU (vgem, a virtual display).
std::optional<std::set<std::string>> read_gpu_inventory(GuardedReader& reader,
                                                        const std::string& sysfs_root,
                                                        const std::string& dev_dir);

}  // namespace triage::collector
