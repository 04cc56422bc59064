// What a training log says about each rank's own pace, apart from the step time every rank shares
// (in synchronous training every rank waits for the slowest in each collective, so each prints the
// same step time; a slow rank shows only in what it measures outside the collectives). Three
// shapes are read, each from its published source:
// - nvidia-resiliency-ext / NeMo / Megatron-Bridge straggler reports: "GPU relative performance:"
//   then "  Rank=76 Node=h100-001-253-012 Score=0.94" lines, scores 0-1 against the fastest rank
//   (NVIDIA/nvidia-resiliency-ext straggler_det_callback.py _format_gpu_scores;
//   NVIDIA-NeMo/Megatron-Bridge docs/training/resiliency.md "Expected Output").
// - Megatron's timers with --timing-log-option all: "times across ranks (ms):", then "  <timer>:"
//   and "     rank  3: 123.45" per rank (megatron/core/timers.py _get_all_ranks_time_string); the
//   compute timers (forward-compute, backward-compute) are the rank's own work. The default
//   "(min, max) time across ranks" form names no rank and is not read.
// - per-rank TFLOP/s on a task-labelled step line ("3: ... completed step: 9, ... TFLOP/s/device:
//   171.2"), where a program measures it per rank.
// The samples are kept per window of rounds (a round is a step, a timer print or a report), per
// rank, as sums, so a 1 GiB log of 64 ranks costs kilobytes; straggler_verdict.h judges them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/line_text.h"

namespace triage {

// Where a rank's pace came from. Ids as in triage.json's "basis".
enum class RhythmBasis : uint8_t { kRelativeScore, kComputeTime, kTflops };
const char* rhythm_basis_id(RhythmBasis b);

inline constexpr size_t kMaxRhythmWindows = 1024;
inline constexpr int64_t kMaxRhythmRank = 16383;
// The largest value read: over 1e12 (TFLOP/s, ms or a score) is not a measurement.
inline constexpr double kMaxRhythmValue = 1e12;
inline constexpr uint64_t kMaxRhythmThousandths = 1000000000000000;
// An open window's integer sum is folded into its double one before it could wrap.
inline constexpr uint64_t kFoldThousandthsAbove = UINT64_MAX - kMaxRhythmThousandths;
// Steps per window of per-rank TFLOP/s: a window's mean smooths one noisy step.
inline constexpr int64_t kStepsPerRhythmWindow = 10;
// One window of rounds: per rank the sum and count of what the rank measured in it.
struct RhythmWindow {
  int64_t first_round = 0;
  int64_t first_line = 0;
  int64_t first_time_usec = 0;  // 0 = no timestamp seen yet
  std::vector<double> sum;      // indexed by rank
  std::vector<uint32_t> count;
  // While the window is open: the part of each rank's sum that came in thousandths, summed as
  // integers and folded into `sum` once, when the window closes (RhythmSeries::settle). A
  // division per value cost a tenth of the analysis of a 64-rank log; one per rank and window
  // costs nothing, and the integer sum is exact.
  std::vector<uint64_t> thousandths;
};

// One basis's samples over the run. Rounds are grouped `rounds_per_window` at a time; when the run
// has more than kMaxRhythmWindows windows, neighbours merge and the window doubles, so the whole
// run is kept at a bounded cost.
struct RhythmSeries {
  RhythmBasis basis = RhythmBasis::kTflops;
  bool higher_is_faster = true;
  int64_t rounds_per_window = 1;
  std::vector<RhythmWindow> windows;
  void add(int64_t round, int64_t rank, double value, int64_t line, int64_t time_usec);
  // The same for a value of `milli` thousandths (at most kMaxRhythmThousandths). Inline: every
  // rank's every step line comes here, nearly always into the open window.
  void add_thousandths(int64_t round, int64_t rank, uint64_t milli, int64_t line,
                       int64_t time_usec) {
    if (!windows.empty()) {
      RhythmWindow& w = windows.back();
      const auto r = static_cast<size_t>(rank);
      if (round >= w.first_round && round - w.first_round < rounds_per_window &&
          r < w.thousandths.size() && w.thousandths[r] <= kFoldThousandthsAbove &&
          milli <= kMaxRhythmThousandths && (w.first_time_usec != 0 || time_usec == 0)) {
        w.thousandths[r] += milli;
        ++w.count[r];
        return;
      }
    }
    add_thousandths_slowly(round, rank, milli, line, time_usec);
  }
  // Whether a sample of `round` is read at all. A window that widened by merging reads only its
  // first rounds, as many as a window held before any merge (first_width): the verdicts judge
  // a long run's windows on the same number of samples as a short run's, and reading a long log
  // costs a bounded number of values per window and rank (at most kMaxRhythmWindows windows).
  bool wants(int64_t round) const {
    if (windows.empty()) return true;
    const int64_t since = round - windows.back().first_round;
    if (since < 0) return false;  // a lagging rank's earlier round: its window is closed
    return since % rounds_per_window < first_width(basis);
  }
  // The rounds per window before any merge.
  static int64_t first_width(RhythmBasis b) {
    return b == RhythmBasis::kTflops ? kStepsPerRhythmWindow : 1;
  }
  // Folds the open window's thousandths into its sums: what take() hands on is settled.
  void settle();
  bool empty() const { return windows.empty(); }

 private:
  void add_thousandths_slowly(int64_t round, int64_t rank, uint64_t milli, int64_t line,
                              int64_t time_usec);
  // The window `round` belongs in, opened (and the older ones merged) as needed; null when the
  // round is older than the open window.
  RhythmWindow* window_for(int64_t round, int64_t line, int64_t time_usec);
};

struct RankRhythm {
  RhythmSeries scores{RhythmBasis::kRelativeScore, true, 1, {}};
  RhythmSeries compute{RhythmBasis::kComputeTime, false, 1, {}};
  RhythmSeries tflops{RhythmBasis::kTflops, true, kStepsPerRhythmWindow, {}};
  std::map<int64_t, std::string> reported_node;  // a straggler report's Node= per rank (bounded)
};

// Reads the rhythm lines. The log scanner hands it the lines that hold its trigger literals and,
// while lines_wanted() > 0, the lines that follow (the blocks continue on unlabelled lines).
class RankRhythmReader {
 public:
  // A "GPU relative performance:" or "times across ranks (ms):" line opens its block.
  void on_block_start(const LineText& lt, int64_t line_no);
  // A line while a block is open: a rank's value, a timer's name, or the block's end.
  void on_block_line(const LineText& lt, int64_t line_no);
  // The whole lines at the start of [data, data + size) that continue the open block, read in
  // one go rather than handed over one by one (a timer block lists every rank for every timer);
  // the first is line `first_line`. Returns the bytes taken and sets `lines` to their count; stops
  // before the first line that does not continue the block, which on_block_line then ends.
  size_t take_block_lines(const char* data, size_t size, int64_t first_line, int64_t* lines);
  // A task-labelled step line: its TFLOP/s, when it prints one. `step` is the line's step number.
  // `from`: where in the line the unit may start (past the step number).
  void on_step_line(const LineText& lt, int64_t step, int64_t line_no, size_t from = 0);
  // The latest timestamp the log showed (for the windows' times).
  void saw_time(int64_t usec) { last_time_usec_ = usec; }
  int64_t lines_wanted() const { return block_ == Block::kNone ? 0 : kBlockWindow; }
  RankRhythm take();

 private:
  enum class Block : uint8_t { kNone, kScores, kTimers };
  static constexpr int64_t kBlockWindow = 1;  // one line at a time: a block ends on a foreign line
  void flush_timers();
  // Reads one line of the open block; false, with nothing changed, when the line ends it.
  bool read_block_line(const LineText& lt, int64_t line_no);

  RankRhythm r_;
  Block block_ = Block::kNone;
  int64_t score_round_ = 0;
  int64_t timer_round_ = 0;
  int64_t block_line_ = 0;
  bool compute_timer_ = false;  // the timer being listed is a compute timer
  // The open timer block's compute time per rank in thousandths of a ms, indexed by rank (a map
  // cost a node per rank and block), and the ranks it holds, to hand them on in rank order.
  static constexpr uint64_t kNoPendingMs = UINT64_MAX;
  std::vector<uint64_t> pending_ms_;
  std::vector<int64_t> pending_ranks_;
  int64_t last_time_usec_ = 0;
};

}  // namespace triage
