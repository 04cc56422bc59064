// A running job's pace, judged while it runs (issue 28, part 4): the step times and each rank's
// rhythm (rank_rhythm.h) of the chunks a live follower has read so far, added up chunk by chunk
// (never rescanned from the log's start), and the early warning they give: the same straggler and
// slowdown verdicts as the post-mortem (straggler_verdict.h), on what has been read. The warning
// is a warning only: nothing here feeds the stall verdict or a hang action.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "analyzer/log_facts.h"
#include "analyzer/rank_rhythm.h"
#include "analyzer/straggler_verdict.h"

namespace triage {

// The current run's step times and rhythm, grown chunk by chunk. Bounded as the post-mortem's
// are: step times thin out past kMaxStepTimes, rhythm windows merge past kMaxRhythmWindows.
class LivePace {
 public:
  // Adds one chunk's facts (scanned with LiveProgress::next_scan_options, so its steps continue
  // the open segment). A restart in the chunk starts a new run: its own warm-up, its own pace.
  void absorb(const LogFacts& chunk);
  const std::vector<StepPace>& steps() const { return steps_; }
  const RankRhythm& rhythm() const { return rhythm_; }
  // Bumped whenever a chunk added a step time or a rank's sample: the verdict is worth re-judging.
  uint64_t generation() const { return generation_; }

 private:
  void add_step(StepPace s);

  std::vector<StepPace> steps_;
  int64_t stride_ = 1;
  RankRhythm rhythm_;
  // The straggler reports' and Megatron timer blocks' rounds so far: a chunk numbers its own
  // from 1, and they continue after these.
  int64_t score_rounds_ = 0;
  int64_t timer_rounds_ = 0;
  uint64_t generation_ = 0;
};

// The early warning: empty `line` when the job's pace gives none.
struct PaceWarning {
  std::vector<Straggler> stragglers;
  Slowdown slowdown;
  std::string line;  // "Pace (live): ..." for the interim report and the agent's log
  // What the warning is about, without its measured numbers: it changes only when a slowdown or a
  // straggler appears or clears (not when the measured step time moves by a hair).
  std::string key;
};

// The stragglers are judged on each basis's last `sustained_windows` windows only (a straggler is
// one now, and its warning clears once it caught up), the slowdown on the run so far.
RankRhythm recent_rhythm(const RankRhythm& all, int64_t windows);

// Contract: the live pace warning of a run whose step times and rhythm so far are `steps` and
// `rhythm`: find_stragglers over recent_rhythm(rhythm, policy.sustained_windows) and find_slowdown
// over `steps` (warm-up, checkpoint and evaluation pauses left out by it), one line naming what,
// since when, the rank or node, and the basis; none when neither finds anything.
PaceWarning judge_pace(const std::vector<StepPace>& steps, const RankRhythm& rhythm,
                       const std::map<int64_t, std::string>& rank_node = {},
                       const StragglerPolicy& policy = {});

}  // namespace triage
