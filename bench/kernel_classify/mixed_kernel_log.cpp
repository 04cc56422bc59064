#include "mixed_kernel_log.h"

#include <cstdio>
#include <random>
#include <stdexcept>
#include <vector>

namespace triage::bench {

namespace {

// Routine lines: what a healthy node prints all day.
const std::vector<const char*> kRoutine = {
    "audit: type=1400 audit(1763726400.%03d:%d): apparmor=\"ALLOWED\" operation=\"open\" pid=%d",
    "IPv6: ADDRCONF(NETDEV_CHANGE): ens1f%dnp0: link becomes ready",
    "EXT4-fs (nvme0n1p%d): mounted filesystem with ordered data mode. Quota mode: none.",
    "systemd[1]: Started session-%d.scope - Session %d of User alice.",
    "usb 1-%d: new high-speed USB device number %d using xhci_hcd",
    "amdgpu 0000:c1:00.0: amdgpu: SMU is initialized successfully! (%d/%d)",
    "[drm] Initialized amdgpu 3.57.0 20150101 for 0000:c1:00.0 on minor %d (%d)",
    "amdgpu 0000:c1:00.0: amdgpu: RAS: optional ras ta ucode is not available (%d %d)",
    "nvme nvme%d: %d/0/0 default/read/poll queues",
    "mlx5_core 0000:41:00.%d: E-Switch: Total vports %d, per vport: max uc(128) max mc(2048)",
    "perf: interrupt took too long (%d > %d), lowering kernel.perf_event_max_sample_rate to 79000",
    "TCP: request_sock_TCP: Possible SYN flooding on port %d. Sending cookies. (%d)",
    "device-mapper: uevent: version 1.0.3 (%d %d)",
    "bond0: (slave ens1f%dnp0): Enslaving as a backup interface with an up link (%d)",
    "kauditd_printk_skb: %d callbacks suppressed (%d)",
    "xfs filesystem being remounted at /scratch%d supports timestamps until 2038 (0x7fffffff) %d",
    "docker0: port %d(veth%d) entered forwarding state",
    "Lustre: Mounted scratch-client (%d/%d)",
    "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.%02d  Sat Aug 19 01:15:15 UTC 2023",
    "nfs: server fs%02d OK (%d)",
};

// Events: (lines of one report, printed together).
const std::vector<std::vector<const char*>> kEvents = {
    {"NVRM: Xid (PCI:0000:3b:00): 13, pid=%d, name=python3, Graphics SM Warp Exception on (GPC 0, "
     "TPC 1, SM 0): Out Of Range Address"},
    {"amdgpu 0000:9d:00.0: {%d}socket: 6, die: 1, %d new correctable hardware errors detected in "
     "xgmi_wafl block",
     "amdgpu 0000:9d:00.0: {%d}socket: 6, die: 1, %d correctable hardware errors detected in total "
     "in xgmi_wafl block"},
    {"amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:%d)",
     "amdgpu 0000:03:00.0: amdgpu:  Process python3 pid %d thread python3 pid %d",
     "amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007ff3409a%04d from client 10",
     "amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800830 (%d)"},
    {"pcieport 0000:00:03.1: AER: Corrected error received: 0000:41:00.0 (%d %d)",
     "mlx5_core 0000:41:00.0: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver "
     "ID) (%d)",
     "mlx5_core 0000:41:00.0:   device [15b3:101d] error status/mask=00000001/00000000 (%d)"},
    {"INFO: task gpu_metrics:%d blocked for more than %d seconds.",
     "task:gpu_metrics     state:D stack:0     pid:%d  ppid:1      flags:0x00004002",
     "Call Trace:", " __schedule+0x2f5/0x8b0", " amdgpu_cper_ring_write+0x6a/0x1f0 [amdgpu]",
     " amdgpu_ras_aca_sysfs_read+0x44/0x90 [amdgpu]"},
    {"nfs: server fs%02d not responding, still trying (%d)"},
    {"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/"
     "system.slice/slurmstepd.scope/job_%d,task_memcg=/system.slice/slurmstepd.scope/job_%d/step_0/"
     "user/task_0,task=python3,pid=777,uid=1000",
     "Memory cgroup out of memory: Killed process 777 (python3) total-vm:80000000kB, "
     "anon-rss:64000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:127000kB "
     "oom_score_adj:%d"},
};

// Replaces each "%d" / "%0Nd" in `tmpl` with the next number (the templates are data, so they do
// not go through printf).
std::string fill(const char* tmpl, std::mt19937& rng) {
  std::uniform_int_distribution<int> number(0, 9999);
  std::string out;
  for (const char* p = tmpl; *p != '\0'; ++p) {
    if (p[0] != '%') {
      out.push_back(*p);
      continue;
    }
    int width = 0;
    const char* q = p + 1;
    if (*q == '0') {
      ++q;
      while (*q >= '0' && *q <= '9')
        width = width * 10 + (*q++ - '0');
    }
    if (*q != 'd') {
      out.push_back(*p);
      continue;
    }
    std::string n = std::to_string(number(rng));
    while (static_cast<int>(n.size()) < width)
      n.insert(n.begin(), '0');
    out += n;
    p = q;
  }
  return out;
}

}  // namespace

uint64_t write_mixed_kernel_log(const std::string& path, uint64_t lines, uint32_t seed) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(0, 9999);
  uint64_t usec = 5'000'000;
  uint64_t written = 0;
  uint64_t bytes = 0;
  auto emit = [&](const char* tmpl) {
    const std::string msg = fill(tmpl, rng);
    const int n =
        std::fprintf(f, "[%5llu.%06llu] %s\n", static_cast<unsigned long long>(usec / 1000000),
                     static_cast<unsigned long long>(usec % 1000000), msg.c_str());
    bytes += static_cast<uint64_t>(n);
    ++written;
  };
  while (written < lines) {
    usec += 1000 + static_cast<uint64_t>(small(rng)) * 10;
    const int roll = small(rng);
    if (roll < 60) {
      // ~0.6% of steps start an event report.
      for (const char* l : kEvents[static_cast<size_t>(roll) % kEvents.size()]) {
        if (written >= lines) break;
        emit(l);
        usec += 3;
      }
    } else if (roll < 62) {
      // A short flood: the same correctable error a few hundred times.
      for (int i = 0; i < 300 && written < lines; ++i) {
        emit(
            "amdgpu 0000:9d:00.0: {%d}socket: 6, die: 1, 1 new correctable hardware errors "
            "detected in xgmi_wafl block");
        usec += 50;
      }
    } else {
      emit(kRoutine[static_cast<size_t>(roll) % kRoutine.size()]);
    }
  }
  (void)std::fclose(f);
  return bytes;
}

}  // namespace triage::bench
