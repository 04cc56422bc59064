// Slow ranks and a slowing job. The rules, in one sentence each:
// - a rank is a straggler when, in `sustained_windows` consecutive windows of the run, its own pace
//   (a straggler report's score, or its compute time / TFLOP/s against the median of the other
//   ranks) is below `straggler_relative_speed`;
// - the job slowed down when its steady-state step time, warm-up and irregular steps (checkpoint
//   saves, evaluation pauses) left out, rose by `slowdown_ratio` or more from some window on and
//   every later window stayed there; the slowdown is the node's whose GPU clocks dropped by as
//   much at the same time (when exactly one did), else the node of the stragglers that began then
//   (when they all sit on one node).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/log_facts.h"
#include "analyzer/rank_rhythm.h"

namespace triage {

// The thresholds, each from a published reference:
// - straggler_relative_speed 0.75: nvidia-resiliency-ext's identify_stragglers flags a rank whose
//   score against the fastest rank is below 0.75 by default (docs/source/straggler_det/
//   usage_guide.rst); the same cut is used against the other ranks' median, which is gentler.
// - slowdown_ratio 1.10: Greyhound (USENIX ATC'25, preprint arXiv 2410.12588) counts a slowdown
//   once the mean iteration time shifts by 10% or more.
// - irregular_ratio 2.0: Holmes (NSDI'25) calls an iteration over 2x a normal one irregular; such
//   steps are pauses (a checkpoint save, an evaluation), not the job's pace.
// - clock_drop_ratio 0.90: the same 10% shift, on a node's GPU clocks.
// - sustained_windows 3, steps_per_window 10: a shift must hold for three windows of ten steps
//   (one noisy step or one slow report is not a straggler; Minder, NSDI'25, likewise asks for a
//   lasting deviation before it calls a machine abnormal).
struct StragglerPolicy {
  double straggler_relative_speed = 0.75;
  double slowdown_ratio = 1.10;
  double irregular_ratio = 2.0;
  double clock_drop_ratio = 0.90;
  int64_t sustained_windows = 3;
  int64_t steps_per_window = 10;
  int64_t warm_up_steps = kWarmUpSteps;
  // A straggler that began within ten minutes of the slowdown began "at the same time": a
  // straggler report comes every five minutes by default (nvidia-resiliency-ext
  // report_time_interval 300 s), a window of ten steps can span minutes.
  int64_t same_time_slack_usec = int64_t{600} * 1000000;
  // Node-only stragglers (full mode, find_node_stragglers): the GPU clocks are cut into windows
  // of one minute, Prometheus's default scrape_interval (prometheus.io/docs/prometheus/latest/
  // configuration/configuration/, `scrape_interval ... default = 1m`), so that every window holds
  // a sample at the default scrape; a node is slow when, in sustained_windows of them in a row,
  // its clocks are at or below clock_drop_ratio of the other nodes' median.
  int64_t node_window_usec = int64_t{60} * 1000000;
};

struct Straggler {
  std::optional<int64_t> rank;  // none when only a node is known
  std::string node;             // "" = unknown
  double relative_speed = 1;    // the rank's pace over the others' median (or the fastest's)
  int64_t since_usec = 0;       // 0 = unknown: see since_line
  int64_t since_line = 0;
  std::string basis;  // rhythm_basis_id()
};

// One node's GPU clock over the run (full mode, from the TSDB), for the slowdown's attribution.
struct NodeClockSeries {
  std::string host;
  std::vector<std::pair<int64_t, double>> samples;  // (usec, MHz, mean over the node's GPUs)
};

struct Slowdown {
  bool found = false;
  double from_s = 0;  // steady step time before
  double to_s = 0;    // and after
  int64_t since_step = 0;
  int64_t since_usec = 0;  // 0 = the step line had no time
  int64_t since_line = 0;
  std::string node;   // "" = not attributed
  std::string basis;  // why the node, when one is named
};

// The stragglers in a run's rhythm, slowest first. `rank_node` maps ranks to hosts (Slurm's task
// layout); a straggler report's own Node= fills in where the layout is unknown.
std::vector<Straggler> find_stragglers(const RankRhythm& rhythm,
                                       const std::map<int64_t, std::string>& rank_node,
                                       const StragglerPolicy& policy = {});

// The job's lasting slowdown, if any, attributed as the header says.
Slowdown find_slowdown(const std::vector<StepPace>& steps, const std::vector<Straggler>& stragglers,
                       const std::vector<NodeClockSeries>& clocks,
                       const StragglerPolicy& policy = {});

// Node-only stragglers (full mode): a node whose mean GPU core clock stayed at or below
// `clock_drop_ratio` of the other nodes' median for `sustained_windows` windows of
// `node_window_usec` in a row, as a Straggler with no rank, its relative_speed the clock ratio
// (a compute-bound GPU's pace follows its core clock), basis "gpu-core-clock"; slowest first.
// A node that already has a rank among `rank_stragglers` is left out (it is reported there).
std::vector<Straggler> find_node_stragglers(const std::vector<NodeClockSeries>& clocks,
                                            const std::vector<Straggler>& rank_stragglers,
                                            const StragglerPolicy& policy = {});

// `more` added to `list`, the whole kept slowest first and as long as find_stragglers allows.
void add_stragglers(std::vector<Straggler>& list, std::vector<Straggler> more);

// "2026-11-21T10:04:02Z", else "line N".
std::string since_text(int64_t usec, int64_t line);

}  // namespace triage
