// A job's on-disk Prometheus TSDB (<job dir>/prometheus/): what it holds, whether a live server
// owns it, and a private copy of it for a read-only server. Nothing here writes to the job's
// directory, follows a symlink inside it, or touches the `lock` file beyond a stat.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace triage::tsdb {

// A persisted block (a ULID-named directory with a meta.json).
struct BlockInfo {
  std::string ulid;
  int64_t min_ms = 0;  // inclusive
  int64_t max_ms = 0;  // exclusive, as Prometheus writes it
  int64_t num_samples = 0;
  uint64_t bytes = 0;
};

struct TsdbDirScan {
  std::string path;  // <job dir>/prometheus
  bool exists = false;
  std::string error;              // why it could not be read (permissions, not a directory, ...)
  std::vector<BlockInfo> blocks;  // sorted by min_ms
  std::vector<std::string> problems;  // unreadable or malformed entries, symlinks skipped
  bool has_wal = false;
  uint64_t wal_bytes = 0;
  bool has_chunks_head = false;
  uint64_t chunks_head_bytes = 0;
  bool has_lock = false;
  // A process on this machine holding the lock (from /proc/locks); a remote holder (the head node
  // of a live job on shared storage) is invisible here.
  std::optional<pid_t> lock_holder;
  uint64_t total_bytes = 0;

  // No block and no write-ahead log data: Prometheus never scraped, or the directory was wiped.
  bool empty() const { return blocks.empty() && wal_bytes == 0 && chunks_head_bytes == 0; }
  std::optional<int64_t> blocks_min_ms() const;
  std::optional<int64_t> blocks_max_ms() const;
};

// Looks at `<job_dir>/prometheus`. Never throws: problems land in `error` / `problems`.
TsdbDirScan scan_tsdb_dir(const std::string& job_dir);

// Who holds an flock/POSIX lock on the file with this device and inode, according to /proc/locks
// (`proc_locks_text` is its content; a parameter so tests can feed it).
std::optional<pid_t> lock_holder_from_proc_locks(const std::string& proc_locks_text, dev_t dev,
                                                 ino_t ino);

struct CopyOptions {
  bool include_wal = true;  // wal/ and chunks_head/: the recent, not yet persisted samples
  // Only blocks overlapping [min_ms, max_ms) (absent = all).
  std::optional<int64_t> min_ms;
  std::optional<int64_t> max_ms;
  uint64_t max_bytes = UINT64_MAX;  // refuse (throw) rather than fill the scratch filesystem
};

struct CopyReport {
  uint64_t bytes = 0;
  int files = 0;
  std::vector<std::string> blocks;  // ULIDs copied
  bool wal_copied = false;
  std::vector<std::string> skipped;  // names deliberately left out, with the reason
};

// Copies the TSDB at `scan.path` into the empty directory `dest` (created 0700 beforehand):
// blocks, and with `include_wal` also wal/ and chunks_head/. `lock`, `queries.active`, logs and
// anything that is not a regular file or directory are skipped. Throws std::system_error naming
// the file on a read or write failure, and std::runtime_error when the copy would exceed
// `max_bytes` or the free space of the destination filesystem.
CopyReport copy_tsdb(const TsdbDirScan& scan, const std::string& dest, const CopyOptions& options);

}  // namespace triage::tsdb
