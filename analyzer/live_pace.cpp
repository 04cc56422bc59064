#include "analyzer/live_pace.h"

#include <algorithm>
#include <cstdio>

namespace triage {
namespace {

// Adds `from` (one chunk's series, its rounds numbered from `round_offset` + 1) to `into`. A
// window's samples join `into` at the window's first round; each sample is added at the window's
// mean, as often as the window counted, so sums and counts stay as the chunk had them.
void merge_series(RhythmSeries& into, const RhythmSeries& from, int64_t round_offset) {
  for (const RhythmWindow& w : from.windows) {
    for (size_t rank = 0; rank < w.count.size(); ++rank) {
      if (w.count[rank] == 0) continue;
      const double mean = w.sum[rank] / w.count[rank];
      for (uint32_t i = 0; i < w.count[rank]; ++i)
        into.add(round_offset + w.first_round, static_cast<int64_t>(rank), mean, w.first_line,
                 w.first_time_usec);
    }
  }
}

// The last round a chunk's series reached (0: none).
int64_t last_round(const RhythmSeries& s) {
  return s.empty() ? 0 : s.windows.back().first_round + s.rounds_per_window - 1;
}

bool has_samples(const RankRhythm& r) {
  return !r.scores.empty() || !r.compute.empty() || !r.tflops.empty();
}

// A step time in three significant digits ("10", "13.1"); a relative speed with two decimals.
std::string seconds_text(double v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}
std::string ratio_text(double v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string straggler_text(const Straggler& s) {
  std::string t = s.rank ? "rank " + std::to_string(*s.rank) : std::string("a rank");
  if (!s.node.empty()) t += " on " + s.node;
  t += " at " + ratio_text(s.relative_speed) + " of the job's pace since " +
       since_text(s.since_usec, s.since_line) + " (" + s.basis + ")";
  return t;
}

}  // namespace

void LivePace::absorb(const LogFacts& chunk) {
  if (chunk.restarts > 0) *this = LivePace{};  // the log started over: a new run
  const size_t before = steps_.size();
  for (const StepPace& s : chunk.step_times)
    add_step(s);
  const RankRhythm& r = chunk.rhythm;
  merge_series(rhythm_.scores, r.scores, score_rounds_);
  merge_series(rhythm_.compute, r.compute, timer_rounds_);
  merge_series(rhythm_.tflops, r.tflops, 0);  // rounds are steps: the log numbers them
  score_rounds_ += last_round(r.scores);
  timer_rounds_ += last_round(r.compute);
  for (const auto& [rank, node] : r.reported_node) {
    if (rhythm_.reported_node.size() < 4096 || rhythm_.reported_node.count(rank) != 0)
      rhythm_.reported_node[rank] = node;
  }
  if (steps_.size() != before || has_samples(r)) ++generation_;
}

void LivePace::add_step(StepPace s) {
  if (!steps_.empty() && s.step <= steps_.back().step) return;
  const int64_t first = steps_.empty() ? s.step : steps_.front().step;
  if ((s.step - first) % stride_ != 0) return;
  // A chunk's first step line knows no previous one: its pace is the time since the last step
  // the earlier chunks held, as the post-mortem reckons it.
  if (s.seconds < 0 && s.time_usec > 0 && !steps_.empty() && steps_.back().time_usec > 0 &&
      s.time_usec >= steps_.back().time_usec) {
    s.seconds = static_cast<double>(s.time_usec - steps_.back().time_usec) / 1e6 /
                static_cast<double>(s.step - steps_.back().step);
  }
  steps_.push_back(s);
  if (steps_.size() >= kMaxStepTimes) {
    // As FactCollector does: every other one goes, the series still spans the run.
    stride_ *= 2;
    size_t out = 0;
    for (const StepPace& p : steps_) {
      if ((p.step - first) % stride_ == 0) steps_[out++] = p;
    }
    steps_.resize(out);
  }
}

RankRhythm recent_rhythm(const RankRhythm& all, int64_t windows) {
  RankRhythm r;
  r.reported_node = all.reported_node;
  const auto keep = static_cast<size_t>(std::max<int64_t>(windows, 1));
  const auto tail = [keep](const RhythmSeries& s) {
    RhythmSeries t{s.basis, s.higher_is_faster, s.rounds_per_window, {}};
    const size_t from = s.windows.size() > keep ? s.windows.size() - keep : 0;
    t.windows.assign(s.windows.begin() + static_cast<std::ptrdiff_t>(from), s.windows.end());
    return t;
  };
  r.scores = tail(all.scores);
  r.compute = tail(all.compute);
  r.tflops = tail(all.tflops);
  return r;
}

PaceWarning judge_pace(const std::vector<StepPace>& steps, const RankRhythm& rhythm,
                       const std::map<int64_t, std::string>& rank_node,
                       const StragglerPolicy& policy) {
  PaceWarning w;
  w.stragglers =
      find_stragglers(recent_rhythm(rhythm, policy.sustained_windows), rank_node, policy);
  if (!w.stragglers.empty()) {
    // Since when: the run's verdict knows where the straggler's lasting lag began.
    const std::vector<Straggler> whole = find_stragglers(rhythm, rank_node, policy);
    for (Straggler& s : w.stragglers) {
      for (const Straggler& o : whole) {
        if (o.rank == s.rank && o.node == s.node && o.since_line > 0 &&
            o.since_line < s.since_line) {
          s.since_usec = o.since_usec;
          s.since_line = o.since_line;
        }
      }
    }
  }
  w.slowdown = find_slowdown(steps, w.stragglers, {}, policy);
  std::vector<std::string> parts;
  if (w.slowdown.found) {
    const Slowdown& sd = w.slowdown;
    std::string t = "slowdown: step time " + seconds_text(sd.from_s) + " s -> " +
                    seconds_text(sd.to_s) + " s since step " + std::to_string(sd.since_step) +
                    " (" + since_text(sd.since_usec, sd.since_line) + ")";
    t += sd.node.empty() ? ", no node singled out" : ", on " + sd.node + " (" + sd.basis + ")";
    t += "; basis: steady step times, warm-up and pauses left out";
    parts.push_back(t);
    w.key = "slowdown";
  }
  if (!w.stragglers.empty()) {
    std::string t = w.stragglers.size() == 1
                        ? std::string("straggler: ")
                        : std::to_string(w.stragglers.size()) + " stragglers, slowest: ";
    t += straggler_text(w.stragglers.front());
    parts.push_back(t);
    for (const Straggler& s : w.stragglers)
      w.key += ";" + (s.rank ? std::to_string(*s.rank) : s.node);
  }
  if (parts.empty()) return w;
  w.line = "Pace (live): " + parts.front();
  for (size_t i = 1; i < parts.size(); ++i)
    w.line += "; " + parts[i];
  return w;
}

}  // namespace triage
