// The node's memory of job outcomes (agent/history/outcome_record.h): bounded by a window
// (HistoryDays, HistoryMaxJobs, whichever is smaller), kept in the spool so that it survives
// restarts, served at GET /v1/history.
//
//   <SpoolDir>/history/outcomes.jsonl
//       {"r":"outcome-history","v":1}     the header: which format the lines below are in
//       {"v":1,"job_id":...}              one record a line (nodes as a hostlist), appended and
//                                         fdatasynced; rewritten (temp + rename) when trimmed
//
// A file this agent cannot read whole (no header, another version, a line that does not parse or
// is not a valid record) is never fatal and never silently lost: its readable records are kept, the
// file is renamed beside (outcomes.jsonl.set-aside-<epoch>), logged, and counted in the answer. A
// torn last line (kill -9 mid-write) is cut off and counted.
//
// Loop thread only.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

#include "agent/history/outcome_record.h"
#include "common/safe_io.h"

namespace triage::agent {

struct HistoryWindow {
  int64_t days = 30;
  size_t max_jobs = 10000;
};

// Whether the oldest of `count` records, which ended at `oldest_end`, falls out of the window at
// `now` (all in epoch seconds): older than the window's days, or one too many.
bool history_drops_oldest(int64_t oldest_end, size_t count, int64_t now, HistoryWindow window);

// Whether a file holding `lines` records, of which `kept` are still in the window, should be
// rewritten: only once the dead lines are a good share, so that a full history does not rewrite
// megabytes for every job that ends.
bool history_needs_rewrite(size_t lines, size_t kept);

struct HistoryCounts {
  size_t kept = 0;
  uint64_t dropped = 0;                      // left the window (age, count) since the agent started
  uint64_t unreadable = 0;                   // lines of a set-aside file that held no valid record
  uint64_t torn = 0;                         // incomplete last lines cut off
  uint64_t set_aside = 0;                    // files renamed beside
  uint64_t write_failures = 0;               // appends or rewrites that did not reach the disk
  std::vector<std::string> set_aside_files;  // the newest few, with why
};

class OutcomeHistory {
 public:
  struct Options {
    std::string dir;  // <SpoolDir>/history
    HistoryWindow window;
  };

  explicit OutcomeHistory(Options options);

  // Creates the directory (0700) and reads the file back; at `now` (epoch s) trims to the window.
  // Throws std::system_error only when the directory cannot be created or opened.
  void open(int64_t now);

  // Adds (or replaces: same job and end time) a record and makes it durable. False when the disk
  // write failed: the record is kept in memory and written with the next rewrite.
  bool add(const OutcomeRecord& record, int64_t now);
  // Trims by age and rewrites the file when it holds many dead lines (the agent's maintenance).
  void maintain(int64_t now);

  // The served answer (docs/protocol.md), records that ended at or after `since`, oldest first.
  // Written record by record: a full history never exists twice in memory as JSON.
  std::string answer(const std::string& host, int64_t since) const;

  const std::deque<OutcomeRecord>& records() const { return records_; }
  const HistoryCounts& counts() const { return counts_; }
  // What the records hold in memory: the containers and every heap block of their strings.
  size_t memory_bytes() const;

 private:
  struct FileScan {
    bool header = false;        // a first JSON line was there
    bool wrong_header = false;  // ... and it names no format this agent reads
    size_t records = 0;         // record lines after the header
    uint64_t unreadable = 0;    // lines that held no valid record
    bool torn = false;
    std::string problem;  // why the file must be set aside ("" when it reads whole)
  };
  void load(int64_t now);
  FileScan read_records(std::string_view data);
  void keep(const OutcomeRecord& record);
  void set_aside(const std::string& why);
  void trim(int64_t now);
  bool rewrite();
  bool append_line(const std::string& line);

  Options options_;
  UniqueFd dir_;
  std::deque<OutcomeRecord> records_;  // by end time, then job id
  size_t file_lines_ = 0;              // records in the file, live or not
  bool dirty_ = false;                 // memory holds what the file lacks (a failed write)
  HistoryCounts counts_;
};

}  // namespace triage::agent
