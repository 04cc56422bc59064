// The agent's crash-safe memory: append-only JSON-lines files, fsynced before anything that
// depends on them is acknowledged.
//
//   <dir>/events/<NNNNNNNN>.jsonl   node events and the kernel-log position they cover
//       {"r":"ev","e":<KernelEvent>}      an event; a later line with the same id supersedes it
//       {"r":"pos","p":"<cursor>"}        where the kernel source resumes after a restart
//   <dir>/jobs/<jobid>.jsonl        one job's records (read on demand): lifecycle messages and
//   analysis results
//       {"r":"msg","m":<message>,"peer_uid":N}   job_start / task_start / task_exit / job_end
//       {"r":"analysis", ...}                    the root-owned summary of the analysis
//
// Events and the position they cover go out in one write, so a crash leaves either both, or the
// events without the position (they are re-read and dropped as duplicates), or neither. A torn
// last line (kill -9, power loss mid-write) is cut off at replay. A failed write (ENOSPC) is
// rolled back to the last complete line, counted, and reported to the caller, which keeps the
// data and tries again later.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/model.h"
#include "common/safe_io.h"

namespace triage::agent {

struct SpoolReplay {
  std::vector<KernelEvent> events;  // every line in order; the caller applies supersession
  std::string kernel_position;
  size_t torn_lines = 0;  // incomplete last lines that were cut off
  size_t bad_lines = 0;   // complete lines that did not parse (skipped)
};

struct SpoolUsage {
  int64_t event_bytes = 0;
  int64_t job_bytes = 0;
  size_t event_segments = 0;
  size_t job_files = 0;
};

class Spool {
 public:
  struct Options {
    std::string dir;
    int64_t segment_bytes = 4LL << 20;  // a new events segment starts past this size
  };

  explicit Spool(Options options);

  // Creates the layout (0700) and reads everything back. Throws std::system_error when the spool
  // directory cannot be created or opened.
  SpoolReplay open();

  // One write + fsync. Returns false (and counts a failure) when the data is not durable.
  bool append_events(const std::vector<KernelEvent>& events, const std::string& position);
  bool append_job(uint64_t job_id, const nlohmann::json& record);

  // Rewrites the live event set into a fresh segment and drops the older segments.
  bool compact_events(const std::vector<KernelEvent>& live, const std::string& position);
  // Removes event segments (never the current one) last written before `cutoff_usec`.
  size_t expire_event_segments(int64_t cutoff_usec);
  bool remove_job(uint64_t job_id);

  // Job files, newest first (by last write), and one job's records (a torn tail is cut off).
  struct JobFile {
    uint64_t job_id = 0;
    int64_t mtime_usec = 0;
    int64_t bytes = 0;
  };
  std::vector<JobFile> list_jobs() const;
  std::vector<nlohmann::json> read_job(uint64_t job_id, size_t* torn = nullptr,
                                       size_t* bad = nullptr);

  SpoolUsage usage() const;
  uint64_t write_failures() const { return write_failures_; }
  const std::string& last_error() const { return last_error_; }
  const std::string& dir() const { return options_.dir; }

 private:
  bool append_line_block(int dirfd, const std::string& name, UniqueFd* keep_open,
                         const std::string& block);
  bool open_segment(uint64_t number);
  void fail(const std::string& what, int err);

  Options options_;
  UniqueFd root_;
  UniqueFd events_dir_;
  UniqueFd jobs_dir_;
  UniqueFd segment_;
  uint64_t segment_number_ = 0;
  int64_t segment_size_ = 0;
  uint64_t write_failures_ = 0;
  std::string last_error_;
};

// Reads one JSON-lines file: complete lines in order. A final line without '\n' (or that does not
// parse) is torn: `good_size` is where the complete lines end.
struct JsonLines {
  std::vector<nlohmann::json> records;
  size_t bad_lines = 0;
  bool torn = false;
  size_t good_size = 0;
};
JsonLines read_json_lines(int fd);

}  // namespace triage::agent
