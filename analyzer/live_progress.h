// The running state of one job's log while the job runs, fed chunk by chunk as the log grows. Each
// chunk is scanned by the post-mortem scanner (scan_log, the same catalog and step extraction), so
// a step line or a failure line means the same live as after the job. What the chunks add up to:
// the last step and when it arrived, the steady step time, the longest healthy silence between
// steps, the last checkpoint save and evaluation announced, and the first line of each failure
// class (an early warning). Memory is bounded whatever the log's length: the scanner bounds each
// chunk's findings, and this keeps one warning per catalog class.
//
// Dating: a line that carries its own timestamp is dated by it (but never later than its arrival:
// a clock or zone mismatch must not put it in the future); a line without one is dated by when the
// follower read it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "analyzer/log_facts.h"
#include "analyzer/log_scanner.h"
#include "analyzer/progress_projection.h"
#include "analyzer/signature_catalog.h"

namespace triage {

// A line the log announced something with; `line` 0 = none seen.
struct LiveLine {
  int64_t line = 0;  // 1-based in the whole log
  int64_t usec = 0;  // its date (see above)
  std::string text;  // bounded by the scanner
};

// The first line of a failure class seen while the job runs.
struct EarlyWarning {
  std::string cls;
  int64_t line = 0;
  std::string text;
  bool truncated = false;
  int64_t arrived_usec = 0;
};

class LiveProgress {
 public:
  explicit LiveProgress(const SignatureCatalog& catalog);

  // The log's first `lines` lines were read by an earlier follower (an agent that restarted):
  // numbering continues after them. Their steps are not known, so the job is in warm-up again
  // until its next steps give a steady step time (a restart never causes a flag).
  void resume_after(int64_t lines) { lines_ = std::max<int64_t>(lines, 0); }

  // How to scan the next chunk: numbered after the lines already absorbed, continuing the open
  // step segment, without head and tail copies (a chunk has no head or tail worth keeping). The
  // caller positions the fd at the chunk and sets max_bytes to its length; chunks must end at a
  // line break.
  ScanOptions next_scan_options() const;

  // Adds one chunk: `chunk` is scan_log() over the newly appended lines with next_scan_options(),
  // read by the follower at `arrived_usec`.
  void absorb(const ScanResult& chunk, int64_t arrived_usec);

  bool has_steps() const { return steps_.first_step >= 0; }
  int64_t last_step() const { return steps_.last_step; }
  int64_t last_step_line() const { return steps_.last_line; }
  int64_t last_step_usec() const { return last_step_usec_; }
  const std::string& last_step_text() const { return steps_.last_text; }
  // The current run's steps (a restart in the log starts a new segment), as the scanner keeps them.
  const StepSegment& segment() const { return steps_; }
  // The current run's step time (see step_time_of); `steady` is false during warm-up.
  const StepTime& step_time() const { return step_time_; }
  // Distinct steps seen, over every run in the log.
  uint64_t steps_seen() const { return earlier_steps_ + steps_.distinct_steps; }
  uint64_t restarts() const { return restarts_; }
  // The longest silence so far that ended with new steps arriving (current run only): checkpoint
  // pauses and buffered output that the job survived.
  double longest_healthy_gap_s() const { return static_cast<double>(longest_gap_usec_) / 1e6; }
  const LiveLine& last_checkpoint_save() const { return checkpoint_save_; }
  const LiveLine& last_evaluation() const { return evaluation_; }
  // In log order; at most one per catalog class.
  const std::vector<EarlyWarning>& warnings() const { return warnings_; }
  int64_t lines() const { return lines_; }

 private:
  void absorb_steps(const LogFacts& facts, int64_t arrived_usec);
  void absorb_pause(const PauseAnnouncement& seen, int64_t arrived_usec, LiveLine& kept) const;
  void absorb_warnings(const ScanResult& chunk, int64_t arrived_usec);

  const SignatureCatalog* catalog_;
  int64_t lines_ = 0;
  StepSegment steps_;
  int64_t first_step_usec_ = 0;
  int64_t last_step_usec_ = 0;
  StepTime step_time_;
  uint64_t earlier_steps_ = 0;
  uint64_t restarts_ = 0;
  int64_t longest_gap_usec_ = 0;
  LiveLine checkpoint_save_;
  LiveLine evaluation_;
  std::vector<EarlyWarning> warnings_;
  std::vector<bool> warned_;  // by catalog class index
};

}  // namespace triage
