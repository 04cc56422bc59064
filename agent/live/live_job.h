// One running job's log read into its live progress: the follower hands out the complete lines
// appended since the last poll (opened as the job's owner, agent/live/log_follower.h), each run of
// them is scanned with the one shared ScanPlan (the post-mortem's catalog and step facts), and the
// stall is judged. A poll forks for the owner's open now and then, so it runs off the event loop
// (on a worker), one poll at a time per job; nothing here touches the agent's state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "agent/live/log_follower.h"
#include "analyzer/live_pace.h"
#include "analyzer/live_progress.h"
#include "analyzer/log_scanner.h"
#include "analyzer/stall_verdict.h"
#include "common/privilege.h"

namespace triage::agent {

// What one poll found.
struct LiveObservation {
  uint64_t job_id = 0;
  LiveInstant at;
  LogStatus status = LogStatus::kNotYet;
  std::string error;  // kUnreadable: why
  StallVerdict verdict;
  std::vector<EarlyWarning> new_warnings;  // first lines of failure classes not reported before
  bool new_steps = false;                  // steps arrived in this poll
  FollowState follow;                      // where the follower stands after the poll
  int64_t lines = 0;                       // lines read so far (numbering of the whole log)
  uint64_t bytes = 0;                      // bytes scanned in this poll
  // NCCL watchdog lines (analyzer/collective_progress.h) arrived in this poll.
  bool new_watchdog_lines = false;
  // The pace warning, judged again when this poll added step times or rank samples (nullopt: the
  // pace did not move, the last judgement stands). Never part of the stall verdict.
  std::optional<PaceWarning> pace;
};

class LiveJob {
 public:
  // `lines_before`: lines of the log an earlier follower already read (`state` resumes after them).
  LiveJob(uint64_t job_id, FollowState state, Identity owner, const ScanPlan& plan,
          int64_t lines_before = 0, const FollowLimits& limits = {});

  // Reads what was appended and judges the stall at `now`. Throws std::system_error when the open
  // descriptor cannot be read or the owner's child cannot be run.
  LiveObservation poll(const LiveInstant& now, const LiveStallPolicy& policy);

  const LiveProgress& progress() const { return progress_; }

 private:
  void scan(const LogChunk& chunk, const LiveInstant& now, LiveObservation& obs);

  uint64_t job_id_;
  LogFollower follower_;
  const ScanPlan& plan_;
  LiveProgress progress_;
  size_t warnings_reported_ = 0;
  int last_fd_ = -1;  // the descriptor of the last chunk scanned: another one is another file
  // The previous poll's read (monotonic; 0: none): what a poll finds was not in the file then.
  int64_t last_read_mono_ = 0;
  // The pace's generation last judged (LivePace::generation); a new log is judged afresh.
  uint64_t pace_generation_ = 0;
};

// The scan options for one chunk: the progress's continuation, the plan's shared searcher, and a
// read buffer sized to the chunk (a few KiB every poll, not the post-mortem's 1 MiB block).
ScanOptions chunk_scan_options(const LiveProgress& progress, uint64_t length);

}  // namespace triage::agent
