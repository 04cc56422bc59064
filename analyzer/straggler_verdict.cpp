#include "analyzer/straggler_verdict.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <limits>
#include <queue>
#include <set>

#include "common/time_util.h"

namespace triage {
namespace {

// How many stragglers the verdict lists (the slowest ones).
constexpr size_t kMaxStragglers = 64;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  const double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
  return (lo + hi) / 2;
}

// The median of the values added so far, as median() computes it, kept in two heaps: the lower
// half (a max-heap, one larger when the count is odd) and the upper half (a min-heap).
class RunningMedian {
 public:
  void add(double v) {
    if (lower_.empty() || v <= lower_.top()) {
      lower_.push(v);
    } else {
      upper_.push(v);
    }
    if (lower_.size() > upper_.size() + 1) {
      upper_.push(lower_.top());
      lower_.pop();
    } else if (upper_.size() > lower_.size()) {
      lower_.push(upper_.top());
      upper_.pop();
    }
  }
  double median() const {
    if (lower_.empty()) return 0;
    if (lower_.size() > upper_.size()) return lower_.top();
    return (lower_.top() + upper_.top()) / 2;
  }

 private:
  std::priority_queue<double> lower_;
  std::priority_queue<double, std::vector<double>, std::greater<>> upper_;
};

// median() of `sorted` (ascending) with one element equal to `v` left out; 0 when none is left.
double median_without(const std::vector<double>& sorted, double v) {
  const size_t m = sorted.size();
  if (m < 2) return 0;
  const auto pos =
      static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), v) - sorted.begin());
  auto kth = [&](size_t k) { return k < pos ? sorted[k] : sorted[k + 1]; };
  const size_t r = m - 1;
  if (r % 2 == 1) return kth(r / 2);
  return (kth(r / 2 - 1) + kth(r / 2)) / 2;
}

// Each window's pace per rank, relative to the job: the score itself for a straggler report,
// else the rank's mean against the other ranks' median. rel[w][rank] < 0 where the rank said
// nothing.
std::vector<std::vector<double>> relative_paces(const RhythmSeries& s) {
  std::vector<std::vector<double>> rel;
  rel.reserve(s.windows.size());
  for (const RhythmWindow& w : s.windows) {
    std::vector<double> means(w.sum.size(), -1);
    std::vector<double> present;
    for (size_t r = 0; r < w.sum.size(); ++r) {
      if (w.count[r] == 0) continue;
      means[r] = w.sum[r] / w.count[r];
      present.push_back(means[r]);
    }
    if (s.basis != RhythmBasis::kRelativeScore) {
      // A rank against itself says nothing: a window needs two ranks to compare. Nor is it
      // measured against a median it is part of: with two ranks the median is their mean, and a
      // rank at 0.70 of the other would stand at 0.82 of it.
      std::sort(present.begin(), present.end());
      for (double& m : means) {
        const double med = m >= 0 ? median_without(present, m) : 0;
        if (m < 0 || med <= 0) {
          m = -1;
        } else if (s.higher_is_faster) {
          m = m / med;
        } else {
          m = m > 0 ? med / m : -1;
        }
      }
    }
    rel.push_back(std::move(means));
  }
  return rel;
}

void stragglers_of(const RhythmSeries& s, const std::map<int64_t, std::string>& rank_node,
                   const std::map<int64_t, std::string>& reported_node,
                   const StragglerPolicy& policy, std::map<int64_t, Straggler>& out) {
  if (s.empty()) return;
  const auto rel = relative_paces(s);
  size_t ranks = 0;
  for (const auto& w : rel)
    ranks = std::max(ranks, w.size());
  for (size_t r = 0; r < ranks; ++r) {
    const auto rank = static_cast<int64_t>(r);
    if (out.count(rank) != 0) continue;  // an earlier basis already named it
    size_t start = 0;
    std::vector<double> streak;
    auto judge = [&]() -> bool {
      if (static_cast<int64_t>(streak.size()) < policy.sustained_windows) return false;
      Straggler st;
      st.rank = rank;
      if (const auto it = rank_node.find(rank); it != rank_node.end()) {
        st.node = it->second;
      } else if (const auto jt = reported_node.find(rank); jt != reported_node.end()) {
        st.node = jt->second;
      }
      st.relative_speed = median(streak);
      st.since_usec = s.windows[start].first_time_usec;
      st.since_line = s.windows[start].first_line;
      st.basis = rhythm_basis_id(s.basis);
      out.emplace(rank, std::move(st));
      return true;
    };
    for (size_t w = 0; w < rel.size(); ++w) {
      const double v = r < rel[w].size() ? rel[w][r] : -1;
      if (v >= 0 && v < policy.straggler_relative_speed) {
        if (streak.empty()) start = w;
        streak.push_back(v);
        continue;
      }
      if (judge()) break;
      streak.clear();
    }
    judge();
  }
}

// The node whose GPU clocks fell by clock_drop_ratio across `at`, when exactly one did.
std::optional<std::pair<std::string, std::string>> clock_drop_at(
    int64_t at, const std::vector<NodeClockSeries>& clocks, const StragglerPolicy& policy) {
  std::vector<std::pair<std::string, std::string>> dropped;
  for (const auto& n : clocks) {
    std::vector<double> before, after;
    for (const auto& [t, mhz] : n.samples)
      (t < at ? before : after).push_back(mhz);
    if (before.empty() || after.empty()) continue;
    const double b = median(before);
    const double a = median(after);
    if (b > 0 && a <= policy.clock_drop_ratio * b) {
      char buf[160];
      (void)std::snprintf(buf, sizeof buf,
                          "its GPU clocks fell from %.0f MHz to %.0f MHz at that time", b, a);
      dropped.emplace_back(n.host, buf);
    }
  }
  if (dropped.size() != 1) return std::nullopt;
  return dropped.front();
}

// --- Node-only stragglers ------------------------------------------------------------------

// Each node's median clock per window of node_window_usec from the earliest sample; < 0 where
// the node has no sample in that window. Windows past kMaxNodeWindows (a week of minutes) are
// dropped, so that a stray timestamp cannot make the table huge.
constexpr int64_t kMaxNodeWindows = int64_t{7} * 24 * 60;

struct NodeWindows {
  int64_t t0 = 0;
  std::vector<std::vector<double>> mhz;  // [node][window]
};

NodeWindows node_windows(const std::vector<NodeClockSeries>& clocks, int64_t width) {
  NodeWindows nw;
  bool any = false;
  int64_t t0 = 0, t1 = 0;
  for (const auto& n : clocks) {
    for (const auto& [t, v] : n.samples) {
      if (!(v > 0)) continue;
      t0 = any ? std::min(t0, t) : t;
      t1 = any ? std::max(t1, t) : t;
      any = true;
    }
  }
  if (!any) return nw;
  nw.t0 = t0;
  const int64_t count = std::min((t1 - t0) / width + 1, kMaxNodeWindows);
  for (const auto& n : clocks) {
    std::vector<std::vector<double>> per(static_cast<size_t>(count));
    for (const auto& [t, v] : n.samples) {
      const int64_t w = (t - t0) / width;
      if (v > 0 && w < count) per[static_cast<size_t>(w)].push_back(v);
    }
    std::vector<double> row(per.size(), -1);
    for (size_t w = 0; w < per.size(); ++w)
      if (!per[w].empty()) row[w] = median(std::move(per[w]));
    nw.mhz.push_back(std::move(row));
  }
  return nw;
}

}  // namespace

std::vector<Straggler> find_node_stragglers(const std::vector<NodeClockSeries>& clocks,
                                            const std::vector<Straggler>& rank_stragglers,
                                            const StragglerPolicy& policy) {
  std::vector<Straggler> out;
  if (clocks.size() < 2 || policy.node_window_usec <= 0) return out;  // nothing to compare with
  std::set<std::string> reported;
  for (const Straggler& st : rank_stragglers)
    reported.insert(st.node);
  const NodeWindows nw = node_windows(clocks, policy.node_window_usec);
  if (nw.mhz.empty()) return out;
  const auto sustained = static_cast<size_t>(std::max<int64_t>(policy.sustained_windows, 1));
  struct Streak {
    std::vector<double> rel;
    size_t start = 0;
    bool done = false;  // reported, or never to be (no host, a rank straggler already)
  };
  std::vector<Streak> streaks(nw.mhz.size());
  for (size_t n = 0; n < nw.mhz.size(); ++n)
    streaks[n].done = clocks[n].host.empty() || reported.count(clocks[n].host) != 0;
  auto judge = [&](size_t n) {
    Streak& k = streaks[n];
    if (k.done || k.rel.size() < sustained) return;
    Straggler st;
    st.node = clocks[n].host;
    st.relative_speed = median(k.rel);
    st.since_usec = nw.t0 + static_cast<int64_t>(k.start) * policy.node_window_usec;
    st.basis = "gpu-core-clock";
    out.push_back(std::move(st));
    k.done = true;
  };
  const size_t windows = nw.mhz.front().size();
  std::vector<double> sorted;
  for (size_t w = 0; w < windows; ++w) {
    sorted.clear();
    for (const auto& row : nw.mhz)
      if (row[w] > 0) sorted.push_back(row[w]);
    std::sort(sorted.begin(), sorted.end());
    for (size_t n = 0; n < nw.mhz.size(); ++n) {
      Streak& k = streaks[n];
      if (k.done) continue;
      const double mine = nw.mhz[n][w];
      // The job's median node with this one left out: with two nodes, the other one.
      const double ref = mine > 0 ? median_without(sorted, mine) : 0;
      if (ref > 0 && mine / ref <= policy.clock_drop_ratio) {
        if (k.rel.empty()) k.start = w;
        k.rel.push_back(mine / ref);
        continue;
      }
      judge(n);
      k.rel.clear();
    }
  }
  for (size_t n = 0; n < nw.mhz.size(); ++n)
    judge(n);
  std::stable_sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) {
    return a.relative_speed < b.relative_speed;
  });
  if (out.size() > kMaxStragglers) out.resize(kMaxStragglers);
  return out;
}

void add_stragglers(std::vector<Straggler>& list, std::vector<Straggler> more) {
  for (Straggler& st : more)
    list.push_back(std::move(st));
  std::stable_sort(list.begin(), list.end(), [](const Straggler& a, const Straggler& b) {
    return a.relative_speed < b.relative_speed;
  });
  if (list.size() > kMaxStragglers) list.resize(kMaxStragglers);
}

std::string since_text(int64_t usec, int64_t line) {
  if (usec > 0) return format_utc(usec);
  return "line " + std::to_string(line);
}

std::vector<Straggler> find_stragglers(const RankRhythm& rhythm,
                                       const std::map<int64_t, std::string>& rank_node,
                                       const StragglerPolicy& policy) {
  std::map<int64_t, Straggler> by_rank;
  // A straggler report's scores first: the program measured them for this purpose.
  for (const RhythmSeries* s : {&rhythm.scores, &rhythm.compute, &rhythm.tflops})
    stragglers_of(*s, rank_node, rhythm.reported_node, policy, by_rank);
  std::vector<Straggler> out;
  out.reserve(by_rank.size());
  for (auto& [rank, st] : by_rank)
    out.push_back(std::move(st));
  std::stable_sort(out.begin(), out.end(), [](const Straggler& a, const Straggler& b) {
    return a.relative_speed < b.relative_speed;
  });
  if (out.size() > kMaxStragglers) out.resize(kMaxStragglers);
  return out;
}

Slowdown find_slowdown(const std::vector<StepPace>& steps, const std::vector<Straggler>& stragglers,
                       const std::vector<NodeClockSeries>& clocks, const StragglerPolicy& policy) {
  Slowdown sd;
  if (steps.empty() || policy.steps_per_window <= 0) return sd;
  // The steady state: warm-up left out, then the irregular steps (pauses) against the run's norm.
  const int64_t first = steps.front().step;
  std::vector<const StepPace*> steady;
  for (const StepPace& s : steps) {
    if (s.seconds > 0 && s.step >= first + policy.warm_up_steps) steady.push_back(&s);
  }
  std::vector<double> all;
  all.reserve(steady.size());
  for (const StepPace* s : steady)
    all.push_back(s->seconds);
  const double normal = median(all);
  std::vector<const StepPace*> regular;
  for (const StepPace* s : steady) {
    if (s->seconds <= policy.irregular_ratio * normal) regular.push_back(s);
  }
  const auto per = static_cast<size_t>(policy.steps_per_window);
  const size_t n = regular.size() / per;  // whole windows only
  const auto sustained = static_cast<size_t>(std::max<int64_t>(policy.sustained_windows, 1));
  if (n < 2 * sustained) return sd;
  std::vector<double> wm(n);
  for (size_t w = 0; w < n; ++w) {
    std::vector<double> v;
    for (size_t i = w * per; i < (w + 1) * per; ++i)
      v.push_back(regular[i]->seconds);
    wm[w] = median(std::move(v));
  }
  // Every later window at or above the bar is the smallest of them at or above it; the earlier
  // windows' median grows one window at a time. Both kept as the loop goes, so that a run of
  // tens of thousands of steps costs n log n, not n^2.
  std::vector<double> later_min(n + 1, std::numeric_limits<double>::infinity());
  for (size_t i = n; i-- > 0;)
    later_min[i] = std::min(later_min[i + 1], wm[i]);
  RunningMedian earlier;
  for (size_t i = 0; i < sustained; ++i)
    earlier.add(wm[i]);
  for (size_t k = sustained; k + sustained <= n; earlier.add(wm[k]), ++k) {
    const double base = earlier.median();
    const double bar = policy.slowdown_ratio * base;
    if (base <= 0 || later_min[k] < bar) continue;
    sd.found = true;
    sd.from_s = base;
    sd.to_s = median(std::vector<double>(wm.begin() + static_cast<long>(k), wm.end()));
    // The first slow step: in the window before (the shift can start mid-window) or this one.
    const StepPace* at = regular[k * per];
    for (size_t i = (k - 1) * per; i < (k + 1) * per; ++i) {
      bool stays = true;
      for (size_t j = i; j < std::min(i + per / 2 + 1, regular.size()); ++j)
        stays = stays && regular[j]->seconds >= bar;
      if (regular[i]->seconds >= bar && stays) {
        at = regular[i];
        break;
      }
    }
    sd.since_step = at->step;
    sd.since_usec = at->time_usec;
    sd.since_line = at->line;
    break;
  }
  if (!sd.found) return sd;
  // Attribution: a node's clocks first (the hardware said so), then the stragglers of that time.
  if (sd.since_usec > 0) {
    if (const auto node = clock_drop_at(sd.since_usec, clocks, policy)) {
      sd.node = node->first;
      sd.basis = node->second;
      return sd;
    }
  }
  // "The same time": within the slack of each other, or anywhere when the log has no times.
  std::set<std::string> nodes;
  std::string who;
  for (const Straggler& st : stragglers) {
    const bool then = st.since_usec <= 0 || sd.since_usec <= 0 ||
                      std::llabs(st.since_usec - sd.since_usec) <= policy.same_time_slack_usec;
    if (!then) continue;
    nodes.insert(st.node);
    if (who.empty() && st.rank) who = "rank " + std::to_string(*st.rank);
  }
  if (nodes.size() == 1 && !nodes.begin()->empty()) {
    sd.node = *nodes.begin();
    sd.basis = (who.empty() ? std::string("its ranks") : who) + " fell behind the others then";
  }
  return sd;
}

}  // namespace triage
