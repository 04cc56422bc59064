// The processes of Slurm jobs that hold a GPU device file open (/dev/nvidia<N>,
// /dev/dri/renderD<N>, /dev/kfd): what the preflight needs to see a process of an ended job still
// holding a GPU (issue 27). Each process's job comes from /proc/<pid>/cgroup (job_id_from_cgroup,
// as the D-state sampler attributes its tasks), and only the processes in a job have their open
// files read
// (/proc/<pid>/fd), so a walk costs one small read per process plus the jobs' file tables.
//
// Reading a process's cgroup file or listing its file table can hang in the kernel (a task stuck
// holding its files lock, or cgroup_mutex), so every read goes through a GuardedReader, as the
// D-state sampler's do: a scan reports what it read and which pids it had to skip.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "collector/io/guarded_reader.h"

namespace triage::collector {

struct GpuHolder {
  int64_t pid = 0;
  std::string comm;
  uint64_t job_id = 0;               // the Slurm job its cgroup names
  std::vector<std::string> devices;  // "/dev/nvidia1", in the order of its descriptors, once each
};

struct GpuHolderScan {
  int64_t time_usec = 0;
  uint64_t processes = 0;             // processes whose cgroup could be read
  std::vector<GpuHolder> holders;     // by pid
  std::vector<int64_t> skipped_pids;  // not read: a reader is stuck on them or none was free
  std::string error;                  // why the scan is empty, when it is
};

// The GPU device a descriptor's target stands for, named as under /dev ("/dev/nvidia1",
// "/dev/dri/renderD129", "/dev/kfd"), when `target` is one inside `dev_dir` (the node's /dev, or
// the dev cluster's stand-in for it); "" for anything else (/dev/nvidiactl, /dev/nvidia-uvm, a
// deleted file, a regular file elsewhere).
std::string gpu_device_of_target(std::string_view target, std::string_view dev_dir);

class GpuHolderScanner {
 public:
  struct Options {
    std::string proc_root = "/proc";
    std::string dev_dir = "/dev";  // where the GPU device files are
    std::chrono::milliseconds read_timeout{2000};
    size_t max_stuck = 8;
  };

  explicit GpuHolderScanner(Options options);

  // One walk of the process table.
  GpuHolderScan scan();

  const GuardedReader& reader() const { return reader_; }

 private:
  Options options_;
  GuardedReader reader_;
};

}  // namespace triage::collector
