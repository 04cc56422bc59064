#include "collector/proc/gpu_holders.h"

#include <algorithm>
#include <memory>
#include <mutex>

#include "collector/proc/dstate_sampler.h"
#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::collector {

namespace {

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// A process holds a few thousand descriptors at most; a runaway one is not read past this.
constexpr size_t kMaxDescriptors = 65536;

}  // namespace

std::string gpu_device_of_target(std::string_view target, std::string_view dev_dir) {
  while (dev_dir.size() > 1 && dev_dir.back() == '/')
    dev_dir.remove_suffix(1);
  if (!starts_with(target, dev_dir) || target.size() <= dev_dir.size() + 1 ||
      target[dev_dir.size()] != '/') {
    return "";
  }
  const std::string_view name = target.substr(dev_dir.size() + 1);
  constexpr std::string_view kNvidia = "nvidia";
  constexpr std::string_view kRender = "dri/renderD";
  const bool gpu = name == "kfd" ||
                   (starts_with(name, kNvidia) && all_digits(name.substr(kNvidia.size()))) ||
                   (starts_with(name, kRender) && all_digits(name.substr(kRender.size())));
  return gpu ? "/dev/" + std::string(name) : "";
}

GpuHolderScanner::GpuHolderScanner(Options options)
    : options_(std::move(options)),
      reader_(GuardedReader::Options{options_.read_timeout, options_.max_stuck}) {}

GpuHolderScan GpuHolderScanner::scan() {
  GpuHolderScan out;
  out.time_usec = now_usec();
  std::shared_ptr<UniqueFd> proc;
  try {
    proc = std::make_shared<UniqueFd>(open_dir(options_.proc_root, false));
  } catch (const std::exception& e) {
    out.error = e.what();
    return out;
  }
  auto pids = std::make_shared<const std::vector<int64_t>>(list_proc_pids(proc->get()));

  // Shared with the worker, which may outlive this scan (see GuardedReader).
  struct Collected {
    std::mutex mu;
    uint64_t processes = 0;
    std::vector<GpuHolder> holders;
    std::vector<int64_t> skipped;
  };
  auto collected = std::make_shared<Collected>();
  const std::string root = options_.proc_root;
  const std::string dev_dir = options_.dev_dir;
  const GuardedReader::EachReport report = reader_.run_each(
      pids->size(), [proc, collected, root, dev_dir, pids](GuardedReader::Reads& reads, size_t i) {
        using Status = GuardedReader::Reads::Status;
        const int64_t pid = (*pids)[i];
        const std::string dir = std::to_string(pid);
        auto skipped = [&] {
          std::lock_guard<std::mutex> l(collected->mu);
          collected->skipped.push_back(pid);
        };
        const auto cgroup =
            reads.read_at(proc->get(), dir + "/cgroup", root + "/" + dir + "/cgroup", 8192);
        if (cgroup.status == Status::kAbandoned) return;
        if (cgroup.status == Status::kSkipped) return skipped();
        if (cgroup.status != Status::kOk) return;  // the process exited meanwhile
        {
          std::lock_guard<std::mutex> l(collected->mu);
          ++collected->processes;
        }
        const std::optional<uint64_t> job = job_id_from_cgroup(cgroup.data);
        if (!job) return;  // not a Slurm job's: never a job's leftover
        const auto fds = reads.read_links_at(proc->get(), dir + "/fd", root + "/" + dir + "/fd",
                                             kMaxDescriptors);
        if (fds.status == Status::kAbandoned) return;
        if (fds.status == Status::kSkipped) return skipped();
        if (fds.status != Status::kOk) return;
        GpuHolder h;
        size_t start = 0;
        while (start < fds.data.size()) {
          size_t end = fds.data.find('\0', start);
          if (end == std::string::npos) end = fds.data.size();
          std::string device =
              gpu_device_of_target(std::string_view(fds.data).substr(start, end - start), dev_dir);
          if (!device.empty() &&
              std::find(h.devices.begin(), h.devices.end(), device) == h.devices.end()) {
            h.devices.push_back(std::move(device));
          }
          start = end + 1;
        }
        if (h.devices.empty()) return;
        const auto stat =
            reads.read_at(proc->get(), dir + "/stat", root + "/" + dir + "/stat", 4096);
        if (stat.status == Status::kAbandoned) return;
        if (stat.status == Status::kOk) {
          if (const auto st = parse_proc_stat(stat.data)) h.comm = st->comm;
        }
        h.pid = pid;
        h.job_id = *job;
        std::lock_guard<std::mutex> l(collected->mu);
        collected->holders.push_back(std::move(h));
      });

  {
    std::lock_guard<std::mutex> l(collected->mu);
    out.processes = collected->processes;
    out.holders = collected->holders;
    out.skipped_pids = collected->skipped;
  }
  for (size_t i : report.stuck)
    out.skipped_pids.push_back((*pids)[i]);
  for (size_t i : report.not_reached)
    out.skipped_pids.push_back((*pids)[i]);
  std::sort(out.skipped_pids.begin(), out.skipped_pids.end());
  std::sort(out.holders.begin(), out.holders.end(),
            [](const GpuHolder& a, const GpuHolder& b) { return a.pid < b.pid; });
  return out;
}

}  // namespace triage::collector
