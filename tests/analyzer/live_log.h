// A job's log as the live follower sees it: real-shaped lines appended to a file, and each newly
// appended range scanned by scan_log (the follower's code path) and absorbed by a LiveProgress.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>

#include "analyzer/live_progress.h"
#include "analyzer/log_scanner.h"
#include "common/safe_io.h"
#include "test_support.h"

namespace triage::test {

inline constexpr int64_t kSec = 1000000;
inline constexpr int64_t kT0 = int64_t{1795860000} * kSec;  // when the job's log starts growing

// A moment on a node whose wall clock and monotonic clock read the same (the usual test clock);
// the time tests give them apart.
inline LiveInstant at(int64_t usec) {
  return LiveInstant{usec, usec};
}

// A MaxText step line as `srun -l` prints it (rank 0), without a timestamp of its own.
inline std::string step_line(int64_t step, double seconds) {
  char buf[200];
  (void)std::snprintf(buf, sizeof buf,
                      "0: completed step: %lld, seconds: %.3f, TFLOP/s/device: 401.2, "
                      "Tokens/s/device: 3411.0, total_weights: 1048576, loss: 9.100\n",
                      static_cast<long long>(step), seconds);
  return buf;
}

class GrowingLog {
 public:
  GrowingLog() : dir_("live-log"), path_(dir_ / "slurm-4242.out") { write_file(path_, ""); }

  const std::filesystem::path& path() const { return path_; }
  uint64_t size() const { return size_; }

  void append(const std::string& text) {
    std::ofstream(path_, std::ios::binary | std::ios::app) << text;
    size_ += text.size();
  }

  // Scans bytes [from, to) of the log into `p` as one chunk read at `arrived`, the follower's
  // previous read having been at `previous_read_mono` (0: none).
  void scan_range(LiveProgress& p, uint64_t from, uint64_t to, const LiveInstant& arrived,
                  int64_t previous_read_mono = 0) const {
    if (to == from) return;  // nothing new (max_bytes 0 would mean the whole file)
    UniqueFd fd(::open(path_.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd || ::lseek(fd.get(), static_cast<off_t>(from), SEEK_SET) < 0)
      throw std::runtime_error("cannot open the test log");
    ScanOptions opt = p.next_scan_options();
    opt.max_bytes = to - from;
    p.absorb(scan_log(fd.get(), shipped_plan(), opt), arrived, previous_read_mono);
  }
  void scan_range(LiveProgress& p, uint64_t from, uint64_t to, int64_t arrived_usec) const {
    scan_range(p, from, to, at(arrived_usec));
  }

  // Appends `text` and lets the follower read it at `arrived` (one follower per log: its previous
  // read is the previous arrival).
  void arrive(LiveProgress& p, const std::string& text, const LiveInstant& arrived) {
    const uint64_t from = size_;
    append(text);
    scan_range(p, from, size_, arrived, last_read_mono_);
    last_read_mono_ = arrived.mono_usec;
  }
  void arrive(LiveProgress& p, const std::string& text, int64_t arrived_usec) {
    arrive(p, text, at(arrived_usec));
  }
  // A read that found nothing new (the follower polled a silent log).
  void read_nothing(const LiveInstant& when) { last_read_mono_ = when.mono_usec; }

 private:
  ScratchDir dir_;
  std::filesystem::path path_;
  uint64_t size_ = 0;
  int64_t last_read_mono_ = 0;
};

}  // namespace triage::test
