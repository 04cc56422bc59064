#include "analyzer/rank_rhythm.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>
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

constexpr uint64_t kPow10Int[] = {1, 10, 100, 1000};

// A decimal number as written: `digits` / 10^`decimals`, both exact.
struct Decimal {
  uint64_t digits = 0;
  size_t decimals = 0;
};

// The usual "171.25" at the start of `s`, read in one pass: at most 15 digits and one point, not
// ending in it; `used` gets its length. Anything else (more digits, "5.", ".5e3") is nullopt, for
// from_chars to read.
std::optional<Decimal> leading_decimal(std::string_view s, size_t* used) {
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
  if ((n < limit && s[n] == '.') || count == 0 || count > 15 || point + 1 == n) return std::nullopt;
  *used = n;
  return Decimal{digits, point == SIZE_MAX ? 0 : n - point - 1};
}

// A non-negative decimal number at the start of `s`, up to kMaxRhythmValue; `used` gets its
// length. The digits as an integer are exact in a double, and so is 10^k, so their quotient is
// the correctly rounded value, the same double from_chars gives.
std::optional<double> leading_number(std::string_view s, size_t* used = nullptr) {
  size_t n = 0;
  if (const auto d = leading_decimal(s, &n)) {
    // Over 1e12 with at most two decimals is told from the integer, not from the quotient.
    if (d->decimals <= 2 && d->digits > uint64_t{1000000000000} * kPow10Int[d->decimals])
      return std::nullopt;
    const double v = static_cast<double>(d->digits) / kPow10[d->decimals];
    if (v > kMaxRhythmValue) return std::nullopt;
    if (used != nullptr) *used = n;
    return v;
  }
  const size_t limit = std::min<size_t>(s.size(), 32);
  while (n < limit && (is_digit(s[n]) || s[n] == '.'))
    ++n;
  double d = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + n, d);
  if (ec != std::errc() || end != s.data() + n || n == 0 || !(d >= 0) || d > kMaxRhythmValue)
    return std::nullopt;
  if (used != nullptr) *used = n;
  return d;
}

// The usual "171.25" at the start of `s` in thousandths, exactly: leading_decimal's form with at
// most 3 digits after the point. False for anything else, which the slower readers take. No
// division: every rank's step line and every timer line comes through here.
bool short_thousandths(std::string_view s, uint64_t* milli) {
  size_t used = 0;
  const auto d = leading_decimal(s, &used);
  if (!d || d->decimals > 3) return false;
  // At most 15 digits, so the product stays far inside 64 bits.
  const uint64_t v = d->digits * kPow10Int[3 - d->decimals];
  if (v > kMaxRhythmThousandths) return false;
  *milli = v;
  return true;
}

// A time at the start of `s` in thousandths of its unit: exact for the usual "3000.12", to the
// nearest thousandth otherwise (a microsecond of a millisecond timer is below its noise).
std::optional<uint64_t> thousandths_at(std::string_view s) {
  uint64_t milli = 0;
  if (short_thousandths(s, &milli)) return milli;
  const auto v = leading_number(s);
  if (!v) return std::nullopt;
  return static_cast<uint64_t>(std::llround(*v * 1000));
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

RhythmWindow* RhythmSeries::window_for(int64_t round, int64_t line, int64_t time_usec) {
  if (windows.empty() || round >= windows.back().first_round + rounds_per_window) {
    if (!windows.empty() && round < windows.back().first_round) return nullptr;
    // The next window is as wide as this one, so the ranks that come every round find their
    // place ready (add_thousandths' inline path).
    const size_t width = windows.empty() ? 0 : windows.back().sum.size();
    const bool in_thousandths = !windows.empty() && !windows.back().thousandths.empty();
    settle();
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
      w.sum.assign(width, 0);
      w.count.assign(width, 0);
      if (in_thousandths) w.thousandths.assign(width, 0);
      windows.push_back(std::move(w));
    }
  }
  RhythmWindow& w = windows.back();
  if (round < w.first_round) return nullptr;  // a lagging rank's earlier round: its window closed
  if (w.first_time_usec == 0) w.first_time_usec = time_usec;
  return &w;
}

namespace {

// Makes room for `r` in the window's per-rank vectors.
void fit_rank(RhythmWindow& w, size_t r) {
  if (w.sum.size() <= r) {
    w.sum.resize(r + 1, 0);
    w.count.resize(r + 1, 0);
  }
}

}  // namespace

void RhythmSeries::add(int64_t round, int64_t rank, double value, int64_t line, int64_t time_usec) {
  if (rank < 0 || rank > kMaxRhythmRank || !(value >= 0)) return;
  RhythmWindow* w = window_for(round, line, time_usec);
  if (w == nullptr) return;
  const auto r = static_cast<size_t>(rank);
  fit_rank(*w, r);
  w->sum[r] += value;
  ++w->count[r];
}

void RhythmSeries::add_thousandths_slowly(int64_t round, int64_t rank, uint64_t milli, int64_t line,
                                          int64_t time_usec) {
  if (rank < 0 || rank > kMaxRhythmRank || milli > kMaxRhythmThousandths) return;
  RhythmWindow* w = window_for(round, line, time_usec);
  if (w == nullptr) return;
  const auto r = static_cast<size_t>(rank);
  fit_rank(*w, r);
  if (w->thousandths.size() <= r) w->thousandths.resize(w->sum.size(), 0);
  uint64_t& t = w->thousandths[r];
  if (t > kFoldThousandthsAbove) {
    // Folded early rather than wrapped: some 18,000 of the largest values would fill it.
    w->sum[r] += static_cast<double>(t) / 1000;
    t = 0;
  }
  t += milli;
  ++w->count[r];
}

void RhythmSeries::settle() {
  if (windows.empty()) return;
  RhythmWindow& w = windows.back();
  for (size_t r = 0; r < w.thousandths.size(); ++r) {
    if (w.thousandths[r] != 0) w.sum[r] += static_cast<double>(w.thousandths[r]) / 1000;
  }
  w.thousandths.clear();
  w.thousandths.shrink_to_fit();
}

void RankRhythmReader::on_block_start(const LineText& lt, int64_t line_no) {
  flush_timers();
  const std::string lower = to_lower(lt.text);
  // A block its series does not want (RhythmSeries::wants) is left unopened: its lines are then
  // skipped like any other line without a trigger literal.
  if (lower.find("gpu relative performance:") != std::string::npos) {
    ++score_round_;
    block_ = r_.scores.wants(score_round_) ? Block::kScores : Block::kNone;
  } else if (lower.find("times across ranks (ms):") != std::string::npos) {
    ++timer_round_;
    block_ = r_.compute.wants(timer_round_) ? Block::kTimers : Block::kNone;
    compute_timer_ = false;
  } else {
    return;
  }
  block_line_ = line_no;
}

void RankRhythmReader::on_block_line(const LineText& lt, int64_t line_no) {
  if (block_ == Block::kNone || line_no == block_line_) return;
  if (read_block_line(lt, line_no)) return;
  flush_timers();
  block_ = Block::kNone;
}

size_t RankRhythmReader::take_block_lines(const char* data, size_t size, int64_t first_line,
                                          int64_t* lines) {
  // A line longer than any block line is left to the scanner, which bounds what it reads of it.
  constexpr size_t kLongestBlockLine = 1024;
  size_t pos = 0;
  *lines = 0;
  while (block_ != Block::kNone && pos < size) {
    const void* nl = std::memchr(data + pos, '\n', std::min(size - pos, kLongestBlockLine + 1));
    if (nl == nullptr) break;
    const auto end = static_cast<size_t>(static_cast<const char*>(nl) - data);
    if (!read_block_line(split_line(std::string_view(data + pos, end - pos)), first_line + *lines))
      break;
    pos = end + 1;
    ++*lines;
  }
  return pos;
}

bool RankRhythmReader::read_block_line(const LineText& lt, int64_t line_no) {
  const std::string_view t = rtrim(ltrim(lt.text));
  if (block_ == Block::kScores) {
    // "Rank=76 Node=h100-001-253-012 Score=0.94", between "Worst/Best performing N/M ranks:".
    if (t.empty() || starts_with(t, "Worst performing") || starts_with(t, "Best performing"))
      return true;
    if (!starts_with(t, "Rank=")) return false;
    const auto rank = leading_rank(t.substr(5));
    const size_t sc = t.find(" Score=");
    if (!rank || sc == std::string_view::npos) return true;
    const auto score = leading_number(t.substr(sc + 7));
    if (!score || *score > 1.5) return true;
    r_.scores.add(score_round_, *rank, *score, line_no, last_time_usec_);
    const size_t nd = t.find(" Node=");
    if (nd != std::string_view::npos && nd < sc && r_.reported_node.size() < kMaxReportedNodes)
      r_.reported_node[*rank] = std::string(t.substr(nd + 6, sc - nd - 6));
    return true;
  }
  // Timers: "forward-compute:" names the timer, "rank  3: 123.45" gives one rank's time.
  if (starts_with(t, "rank ")) {
    size_t used = 0;
    const std::string_view after = ltrim(t.substr(5));
    const auto rank = leading_rank(after, &used);
    if (!rank || after.size() <= used || after[used] != ':') return false;
    const std::string_view value = ltrim(after.substr(used + 1));
    // Only a compute timer's times are kept; another timer's rank lines need only be numbers.
    if (!compute_timer_) return !value.empty() && (is_digit(value.front()) || value.front() == '.');
    const auto ms = thousandths_at(value);
    if (!ms) return false;
    const auto r = static_cast<size_t>(*rank);
    if (pending_ms_.size() <= r) pending_ms_.resize(r + 1, kNoPendingMs);
    if (pending_ms_[r] == kNoPendingMs) {
      pending_ms_[r] = 0;
      pending_ranks_.push_back(*rank);
    }
    // A rank listed over and over in one block stops adding before its sum could wrap.
    if (pending_ms_[r] <= kFoldThousandthsAbove) pending_ms_[r] += *ms;
    return true;
  }
  if (!t.empty() && t.back() == ':' && t.find(' ') == std::string_view::npos) {
    compute_timer_ = is_compute_timer(t.substr(0, t.size() - 1));
    return true;
  }
  return false;
}

void RankRhythmReader::flush_timers() {
  std::sort(pending_ranks_.begin(), pending_ranks_.end());
  for (const int64_t rank : pending_ranks_) {
    uint64_t& ms = pending_ms_[static_cast<size_t>(rank)];
    if (ms <= kMaxRhythmThousandths) {
      r_.compute.add_thousandths(timer_round_, rank, ms, block_line_, last_time_usec_);
    } else {
      r_.compute.add(timer_round_, rank, static_cast<double>(ms) / 1000, block_line_,
                     last_time_usec_);
    }
    ms = kNoPendingMs;
  }
  pending_ranks_.clear();
}

void RankRhythmReader::on_step_line(const LineText& lt, int64_t step, int64_t line_no,
                                    size_t from) {
  if (lt.rank < 0 || !r_.tflops.wants(step)) return;
  const size_t at = lt.text.find("TFLOP/s", std::min(from, lt.text.size()));
  if (at == std::string_view::npos) return;
  std::string_view rest = lt.text.substr(at + 7);
  // "TFLOP/s/device: 171.2", "TFLOP/s per GPU: 171.2", "TFLOP/s=171.2"
  size_t sep = 0;
  while (sep < rest.size() && sep <= 16 && rest[sep] != ':' && rest[sep] != '=')
    ++sep;
  if (sep > 16 || sep == rest.size()) return;  // no separator close behind the unit
  const std::string_view value = ltrim(rest.substr(sep + 1));
  // Every rank's every step comes through here: the common short form is summed in thousandths,
  // exactly; anything else as the double from_chars reads.
  uint64_t milli = 0;
  if (short_thousandths(value, &milli)) {
    r_.tflops.add_thousandths(step, lt.rank, milli, line_no, last_time_usec_);
    return;
  }
  const auto v = leading_number(value);
  if (!v) return;
  r_.tflops.add(step, lt.rank, *v, line_no, last_time_usec_);
}

RankRhythm RankRhythmReader::take() {
  flush_timers();
  block_ = Block::kNone;
  r_.scores.settle();
  r_.compute.settle();
  r_.tflops.settle();
  return std::move(r_);
}

}  // namespace triage
