#include "analyzer/rank_rhythm.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <optional>

#include "common/text.h"

namespace triage {
namespace {

// The reported nodes kept (a report lists at most the worst and best few ranks each time).
constexpr size_t kMaxReportedNodes = 4096;

// Megatron's timers that time the rank's own work, not its waits (megatron/training/training.py
// and core/pipeline_parallel/schedules.py name them): a slow GPU makes these longer on its ranks.
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool is_compute_timer(std::string_view name) {
  return name == "forward-compute" || name == "backward-compute";
}

std::string_view ltrim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  return s;
}

std::string_view rtrim(std::string_view s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// 10^k for k <= 22: every one exact in a double.
constexpr double kPow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                             1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

constexpr uint64_t kPow10Int[] = {1, 10, 100};

// A non-negative decimal number at the start of `s`; `used` gets its length.
std::optional<double> leading_number(std::string_view s, size_t* used = nullptr) {
  // The usual "171.25", read in one pass: at most 15 digits and one point. The digits as an
  // integer are exact in a double, and so is 10^k, so their quotient is the correctly rounded
  // value, the same double from_chars gives, at a fraction of its cost (every rank's step line
  // comes through here). Anything else goes to from_chars.
  const size_t limit = std::min<size_t>(s.size(), 32);
  uint64_t digits = 0;
  size_t n = 0;
  size_t point = SIZE_MAX;
  for (; n < limit; ++n) {
    const auto d = static_cast<unsigned>(static_cast<unsigned char>(s[n]) - '0');
    if (d < 10) {
      digits = digits * 10 + d;
    } else if (s[n] == '.' && point == SIZE_MAX) {
      point = n;
    } else {
      break;
    }
  }
  const size_t count = point == SIZE_MAX ? n : n - 1;
  const bool plain = (n == limit || s[n] != '.') && count > 0 && count <= 15 && point + 1 != n;
  if (plain) {
    const size_t decimals = point == SIZE_MAX ? 0 : n - point - 1;
    // Over 1e12 takes 13 digits before the point, so at most two after it (15 in all), and is
    // told from the integer, not from the quotient (which the loop need not wait for).
    if (decimals <= 2 && digits > uint64_t{1000000000000} * kPow10Int[decimals])
      return std::nullopt;
    const double v = static_cast<double>(digits) / kPow10[decimals];
    if (used != nullptr) *used = n;
    return v;
  }
  while (n < limit && (is_digit(s[n]) || s[n] == '.'))
    ++n;
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + n, d);
  if (ec != std::errc() || end != s.data() + n || n == 0 || !(d >= 0) || d > 1e12)
    return std::nullopt;
  if (used != nullptr) *used = n;
  return d;
}

std::optional<int64_t> leading_rank(std::string_view s, size_t* used = nullptr) {
  size_t n = 0;
  int64_t v = 0;
  while (n < s.size() && n < 6 && is_digit(s[n])) {
    v = v * 10 + (s[n] - '0');
    ++n;
  }
  if (n == 0 || v > kMaxRhythmRank) return std::nullopt;
  if (used != nullptr) *used = n;
  return v;
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

}  // namespace

const char* rhythm_basis_id(RhythmBasis b) {
  switch (b) {
    case RhythmBasis::kRelativeScore:
      return "straggler-report-score";
    case RhythmBasis::kComputeTime:
      return "megatron-compute-time";
    case RhythmBasis::kTflops:
      return "per-rank-tflops";
  }
  return "?";
}

void RhythmSeries::add(int64_t round, int64_t rank, double value, int64_t line, int64_t time_usec) {
  if (rank < 0 || rank > kMaxRhythmRank || !(value >= 0)) return;
  if (windows.empty() || round >= windows.back().first_round + rounds_per_window) {
    if (!windows.empty() && round < windows.back().first_round) return;
    if (windows.size() >= kMaxRhythmWindows) {
      // Merge neighbours: the windows double, the run stays whole.
      std::vector<RhythmWindow> merged;
      merged.reserve(windows.size() / 2 + 1);
      for (size_t i = 0; i < windows.size(); i += 2) {
        RhythmWindow w = std::move(windows[i]);
        if (i + 1 < windows.size()) {
          const RhythmWindow& b = windows[i + 1];
          if (w.sum.size() < b.sum.size()) {
            w.sum.resize(b.sum.size(), 0);
            w.count.resize(b.count.size(), 0);
          }
          for (size_t k = 0; k < b.sum.size(); ++k) {
            w.sum[k] += b.sum[k];
            w.count[k] += b.count[k];
          }
          if (w.first_time_usec == 0) w.first_time_usec = b.first_time_usec;
        }
        merged.push_back(std::move(w));
      }
      windows = std::move(merged);
      rounds_per_window *= 2;
    }
    if (windows.empty() || round >= windows.back().first_round + rounds_per_window) {
      RhythmWindow w;
      w.first_round = windows.empty()
                          ? round
                          : windows.back().first_round + (round - windows.back().first_round) /
                                                             rounds_per_window * rounds_per_window;
      w.first_line = line;
      w.first_time_usec = time_usec;
      windows.push_back(std::move(w));
    }
  }
  RhythmWindow& w = windows.back();
  if (round < w.first_round) return;  // a lagging rank's earlier round: its window is closed
  const auto r = static_cast<size_t>(rank);
  if (w.sum.size() <= r) {
    w.sum.resize(r + 1, 0);
    w.count.resize(r + 1, 0);
  }
  w.sum[r] += value;
  ++w.count[r];
  if (w.first_time_usec == 0) w.first_time_usec = time_usec;
}

void RankRhythmReader::on_block_start(const LineText& lt, int64_t line_no) {
  flush_timers();
  const std::string lower = to_lower(lt.text);
  if (lower.find("gpu relative performance:") != std::string::npos) {
    block_ = Block::kScores;
    ++score_round_;
  } else if (lower.find("times across ranks (ms):") != std::string::npos) {
    block_ = Block::kTimers;
    ++timer_round_;
    compute_timer_ = false;
  } else {
    return;
  }
  block_line_ = line_no;
}

void RankRhythmReader::on_block_line(const LineText& lt, int64_t line_no) {
  if (block_ == Block::kNone || line_no == block_line_) return;
  const std::string_view t = rtrim(ltrim(lt.text));
  if (block_ == Block::kScores) {
    // "Rank=76 Node=h100-001-253-012 Score=0.94", between "Worst/Best performing N/M ranks:".
    if (t.empty() || starts_with(t, "Worst performing") || starts_with(t, "Best performing"))
      return;
    if (!starts_with(t, "Rank=")) {
      block_ = Block::kNone;
      return;
    }
    const auto rank = leading_rank(t.substr(5));
    const size_t sc = t.find(" Score=");
    if (!rank || sc == std::string_view::npos) return;
    const auto score = leading_number(t.substr(sc + 7));
    if (!score || *score > 1.5) return;
    r_.scores.add(score_round_, *rank, *score, line_no, last_time_usec_);
    const size_t nd = t.find(" Node=");
    if (nd != std::string_view::npos && nd < sc && r_.reported_node.size() < kMaxReportedNodes)
      r_.reported_node[*rank] = std::string(t.substr(nd + 6, sc - nd - 6));
    return;
  }
  // Timers: "forward-compute:" names the timer, "rank  3: 123.45" gives one rank's time.
  if (starts_with(t, "rank ")) {
    size_t used = 0;
    const auto rank = leading_rank(ltrim(t.substr(5)), &used);
    const std::string_view after = ltrim(t.substr(5));
    if (rank && after.size() > used && after[used] == ':') {
      const auto ms = leading_number(ltrim(after.substr(used + 1)));
      if (ms && compute_timer_) {
        const auto r = static_cast<size_t>(*rank);
        if (pending_ms_.size() <= r) pending_ms_.resize(r + 1, -1);
        if (pending_ms_[r] < 0) {
          pending_ms_[r] = 0;
          pending_ranks_.push_back(*rank);
        }
        pending_ms_[r] += *ms;
      }
      if (ms) return;
    }
  } else if (!t.empty() && t.back() == ':' && t.find(' ') == std::string_view::npos) {
    compute_timer_ = is_compute_timer(t.substr(0, t.size() - 1));
    return;
  }
  flush_timers();
  block_ = Block::kNone;
  (void)line_no;
}

void RankRhythmReader::flush_timers() {
  std::sort(pending_ranks_.begin(), pending_ranks_.end());
  for (const int64_t rank : pending_ranks_) {
    double& ms = pending_ms_[static_cast<size_t>(rank)];
    r_.compute.add(timer_round_, rank, ms, block_line_, last_time_usec_);
    ms = -1;  // -1: no value in the open block
  }
  pending_ranks_.clear();
}

void RankRhythmReader::on_step_line(const LineText& lt, int64_t step, int64_t line_no) {
  if (lt.rank < 0) return;
  const size_t at = lt.text.find("TFLOP/s");
  if (at == std::string_view::npos) return;
  std::string_view rest = lt.text.substr(at + 7);
  // "TFLOP/s/device: 171.2", "TFLOP/s per GPU: 171.2", "TFLOP/s=171.2"
  size_t sep = 0;
  while (sep < rest.size() && sep <= 16 && rest[sep] != ':' && rest[sep] != '=')
    ++sep;
  if (sep > 16 || sep == rest.size()) return;  // no separator close behind the unit
  const auto v = leading_number(ltrim(rest.substr(sep + 1)));
  if (!v) return;
  r_.tflops.add(step, lt.rank, *v, line_no, last_time_usec_);
}

RankRhythm RankRhythmReader::take() {
  flush_timers();
  block_ = Block::kNone;
  return std::move(r_);
}

}  // namespace triage
