// The running state of one job's log while the job runs, fed chunk by chunk as the log grows. Each
// chunk is scanned by the post-mortem scanner (scan_log, the same catalog and step extraction), so
// a step line or a failure line means the same live as after the job. What the chunks add up to:
// the last step and when it arrived, the steady step time, the longest healthy silence between
// steps, the last checkpoint save and evaluation announced, and the first line of each failure
// class (an early warning). Memory is bounded whatever the log's length: the scanner bounds each
// chunk's findings, and this keeps one warning per catalog class.
//
// Time as the job lived it (issue 30): every duration the verdict uses (the silence since the
// last step, a healthy gap) is measured on the agent's monotonic clock from when the follower read
// the line, so neither a job's own TZ, a daylight-saving change nor a step of the wall clock can
// make a job look silent. A line's own timestamp only refines that: one that names its zone (`Z`,
// `+02:00`) dates the line back from its arrival, but never before the follower's previous read
// (the line was not in the file then); a naive one (no zone) is used only for differences between
// the log's own step lines (the step time), each such difference checked against what the reads
// allow, never against the agent's wall clock. The wall clock is kept beside for what is shown.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/line_text.h"
#include "analyzer/live_pace.h"
#include "analyzer/log_facts.h"
#include "analyzer/log_scanner.h"
#include "analyzer/progress_projection.h"
#include "analyzer/signature_catalog.h"

namespace triage {

// One moment as the agent saw it: the wall clock (for what is shown and recorded) and the
// monotonic clock (for every duration), read together.
struct LiveInstant {
  int64_t wall_usec = 0;
  int64_t mono_usec = 0;
};

// The agent's clocks now: the wall clock and CLOCK_MONOTONIC (steady_clock), which no clock step,
// zone or NTP slew moves, and which stands still while the node is suspended (so do its jobs).
LiveInstant live_now();

// A line the log announced something with; `line` 0 = none seen.
struct LiveLine {
  int64_t line = 0;  // 1-based in the whole log
  int64_t usec = 0;  // the wall clock when the follower read it (for display)
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

// How step lines are dated (see the top of this file).
enum class LineDating {
  // By when the follower read them, on the monotonic clock (the agent; `follow` while polling).
  kByReads,
  // By their own timestamps, zoned or naive (taken in this machine's zone), never after their
  // arrival: for a log read once, long after it was written (`slurm-triage follow --once`), where
  // the reader has nothing else to go by and names the moment it is judged at.
  kByOwnStamps,
};

class LiveProgress {
 public:
  explicit LiveProgress(const SignatureCatalog& catalog, LineDating dating = LineDating::kByReads);

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
  // read by the follower at `arrived`; `previous_read_mono` is the monotonic time of the
  // follower's previous read of the file (0: none, the chunk may hold lines of any age).
  void absorb(const ScanResult& chunk, const LiveInstant& arrived, int64_t previous_read_mono);

  bool has_steps() const { return steps_.first_step >= 0; }
  int64_t last_step() const { return steps_.last_step; }
  int64_t last_step_line() const { return steps_.last_line; }
  // When the last step was printed, on the monotonic clock (see the top of this file).
  int64_t last_step_mono() const { return last_step_mono_; }
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
  // The run's step times and rhythm so far, for the pace warning (analyzer/live_pace.h).
  const LivePace& pace() const { return pace_; }

 private:
  void absorb_steps(const LogFacts& facts, const LiveInstant& arrived, int64_t previous_read_mono);
  // How long before its arrival a step line was printed, by its own timestamp (see the top).
  int64_t printed_before_arrival(const std::optional<LineTimestamp>& stamp,
                                 const LiveInstant& arrived, int64_t previous_read_mono) const;
  void absorb_pause(const PauseAnnouncement& seen, int64_t arrived_wall, LiveLine& kept) const;
  void absorb_warnings(const ScanResult& chunk, int64_t arrived_wall);

  const SignatureCatalog* catalog_;
  LineDating dating_;
  int64_t lines_ = 0;
  StepSegment steps_;
  // The current run's last step: when it was printed (monotonic), its own timestamp when it has
  // one (0: none), and the read before the one that brought it (0: none).
  int64_t last_step_mono_ = 0;
  std::optional<LineTimestamp> last_step_stamp_;
  int64_t last_step_not_before_mono_ = 0;
  // The current run's time from its first step to its last, for the step time: the step lines'
  // own differences where the reads allow them, else the differences of their arrivals.
  int64_t span_usec_ = 0;
  StepTime step_time_;
  uint64_t earlier_steps_ = 0;
  uint64_t restarts_ = 0;
  int64_t longest_gap_usec_ = 0;
  LiveLine checkpoint_save_;
  LiveLine evaluation_;
  std::vector<EarlyWarning> warnings_;
  std::vector<bool> warned_;  // by catalog class index
  LivePace pace_;
};

}  // namespace triage
