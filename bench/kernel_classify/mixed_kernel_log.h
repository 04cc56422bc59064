// A realistic kernel log of a busy GPU node for benchmarks: mostly routine kernel chatter (network,
// storage, systemd, audit, USB, the GPU driver's informational lines), with the occasional real
// event (OOM reports, Xids, RAS counts, page faults with their detail lines, hung-task traces,
// AER bursts, NFS trouble) and a few floods, as raw dmesg lines.
#pragma once

#include <cstdint>
#include <string>

namespace triage::bench {

// Writes `lines` lines to `path`; the same seed gives the same file. Returns the number of bytes.
uint64_t write_mixed_kernel_log(const std::string& path, uint64_t lines, uint32_t seed = 42);

}  // namespace triage::bench
