// Reading files that the kernel may never finish reading. A read of /proc/<pid>/wchan or of an
// amdgpu RAS counter can sleep forever inside a driver (the CPER bug in the seed is exactly that),
// and no signal or timeout can interrupt it. So reads run on a worker thread; when one takes longer
// than the read timeout, the caller abandons that worker (it stays blocked, holding one thread) and
// carries on with a fresh one. The path the abandoned worker is stuck in is skipped by later reads
// until the kernel returns, so there is at most one stuck thread per file, and the number of stuck
// threads is capped: beyond the cap nothing more is read until one comes back.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace triage::collector {

struct GuardShared;
struct GuardWorker;

struct StuckRead {
  std::string path;
  int64_t since_usec = 0;  // wall clock when the read began
};

class GuardedReader {
 public:
  struct Options {
    std::chrono::milliseconds read_timeout{2000};  // a single read slower than this is stuck
    size_t max_stuck = 8;                          // abandoned workers allowed at once
  };

  // The reads available to work running on the worker thread.
  class Reads {
   public:
    enum class Status {
      kOk,
      kError,      // open/read failed (errno in `error`); e.g. the process exited
      kSkipped,    // an earlier reader is still stuck on this path
      kAbandoned,  // this worker was given up on; stop working
    };
    struct Result {
      Status status = Status::kError;
      std::string data;
      int error = 0;
    };
    // Opens `path` (relative to `dirfd` when it is not AT_FDCWD; `key` names it for the stuck
    // list) and reads at most `max_bytes`.
    Result read_at(int dirfd, const std::string& path, const std::string& key, size_t max_bytes);
    Result read(const std::string& path, size_t max_bytes) {
      return read_at(kCwd, path, path, max_bytes);
    }
    // The targets of the symlinks in directory `dir` (relative to `dirfd`), each followed by a NUL
    // (no path holds one), at most `max_entries` of them: what /proc/<pid>/fd says a process holds
    // open. Listing it takes the process's file table, which a hung task can hold.
    Result read_links_at(int dirfd, const std::string& dir, const std::string& key,
                         size_t max_entries);
    bool abandoned() const;

    static constexpr int kCwd = -100;  // AT_FDCWD

   private:
    friend class GuardedReader;
    // Runs `op` (which fills the data and returns 0 or an errno) as a read of `key` that may hang.
    Result guarded(const std::string& key, const std::function<int(std::string&)>& op);
    GuardWorker* worker_ = nullptr;
    std::shared_ptr<GuardShared> shared_;
  };

  struct EachReport {
    size_t completed = 0;             // items whose work ran to the end
    std::vector<size_t> stuck;        // items during which a read got stuck (in this call)
    std::vector<size_t> not_reached;  // items never attempted: too many stuck readers
  };

  explicit GuardedReader(Options options);
  ~GuardedReader();
  GuardedReader(const GuardedReader&) = delete;
  GuardedReader& operator=(const GuardedReader&) = delete;

  // Calls fn(reads, i) for i in [0, count) on a worker. When a read inside item i gets stuck, item
  // i is reported stuck and the remaining items continue on a fresh worker. `fn` may keep running
  // on an abandoned worker after this returns, so it must own (capture by value) everything it
  // touches, and publish results only while reads are not abandoned.
  EachReport run_each(size_t count, const std::function<void(Reads&, size_t)>& fn);

  // What read_files gives back: each path's text (nullopt when it was not read), "path: strerror"
  // for each read that failed, and the paths skipped (an earlier reader still stuck there) or
  // never reached (too many stuck readers).
  struct FileReads {
    std::vector<std::optional<std::string>> data;
    std::vector<std::string> errors;
    std::vector<std::string> skipped;
  };

  // Reads each of `paths` (at most `max_bytes` each) through run_each: the sysfs readers' one way
  // to read a list of counter files that a driver may block in.
  FileReads read_files(std::vector<std::string> paths, size_t max_bytes);

  // Reads that are still stuck (their workers have not come back).
  std::vector<StuckRead> stuck_reads() const;
  size_t stuck_workers() const;

 private:
  std::shared_ptr<GuardWorker> start_worker();

  Options options_;
  std::shared_ptr<GuardShared> shared_;
  std::shared_ptr<GuardWorker> active_;
};

}  // namespace triage::collector
