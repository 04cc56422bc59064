#include "analyzer/hang_origin.h"

#include <algorithm>
#include <cmath>
#include <set>

namespace triage {

namespace {

// One process group's reports: the ranks that stated how far they got.
struct Group {
  std::string pg;
  std::vector<const CollectiveProgress*> ranks;
};

std::string pg_words(const std::string& pg) {
  return pg.empty() ? std::string("the watchdog's timeout lines") : "process group " + pg;
}

std::string rank_list(std::vector<int64_t> ranks) {
  std::sort(ranks.begin(), ranks.end());
  constexpr size_t kShown = 8;
  std::string s;
  const size_t n = std::min(ranks.size(), kShown);
  for (size_t i = 0; i < n; ++i) {
    if (i > 0) s += (i + 1 == n && ranks.size() <= kShown) ? " and " : ", ";
    s += std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) s += " and " + std::to_string(ranks.size() - kShown) + " more";
  return s;
}

std::string node_of(const HangOriginInput& in, int64_t rank) {
  const auto it = in.rank_node.find(rank);
  return it == in.rank_node.end() ? std::string() : it->second;
}

std::string on_node(const std::string& node) {
  return node.empty() ? std::string() : " on node " + node;
}

// The group compared: the one in which most ranks stated a sequence number (sequence numbers of
// different groups are unrelated). The timeout lines that name no group (the only lines with a
// number before PyTorch 2.3, printed beside the named ones later) are compared only when no named
// group has two ranks: a job's subgroups time out at unrelated numbers, and those lines would mix
// them. On a tie a named group comes before them, then the lower id.
std::optional<Group> choose_group(const std::vector<CollectiveProgress>& all) {
  std::map<std::string, Group> groups;
  for (const auto& c : all) {
    if (c.rank < 0 || c.reached() == kSeqUnknown) continue;
    Group& g = groups[c.pg];
    g.pg = c.pg;
    g.ranks.push_back(&c);
  }
  const bool named_pair = std::any_of(groups.begin(), groups.end(), [](const auto& kv) {
    return !kv.first.empty() && kv.second.ranks.size() >= 2;
  });
  const Group* best = nullptr;
  for (const auto& [pg, g] : groups) {
    if (pg.empty() && named_pair) continue;
    if (best == nullptr || g.ranks.size() > best->ranks.size() ||
        (g.ranks.size() == best->ranks.size() && best->pg.empty() && !pg.empty())) {
      best = &g;
    }
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

bool allowed(const std::vector<int64_t>& candidates, int64_t rank) {
  return candidates.empty() ||
         std::find(candidates.begin(), candidates.end(), rank) != candidates.end();
}

HangOrigin origin(std::optional<int64_t> rank, std::string node, const char* signal,
                  std::string basis) {
  HangOrigin o;
  o.found = true;
  o.rank = rank;
  o.node = std::move(node);
  o.signal = signal;
  o.basis = std::move(basis);
  return o;
}

// The candidate ranks on `host` (every rank there when there are no candidates): the rank when
// there is exactly one, else none.
std::optional<int64_t> single_rank_on(const HangOriginInput& in,
                                      const std::vector<int64_t>& candidates,
                                      const std::string& host, bool& any) {
  std::vector<int64_t> there;
  for (const auto& [rank, node] : in.rank_node) {
    if (node == host && allowed(candidates, rank)) there.push_back(rank);
  }
  any = !there.empty();
  if (there.size() == 1) return there.front();
  return std::nullopt;
}

std::optional<HangOrigin> by_first_exit(const HangOriginInput& in, const HangOriginPolicy& policy,
                                        const std::vector<int64_t>& candidates) {
  std::vector<const RankEnd*> ends;
  for (const auto& e : in.task_ends) {
    if (e.end_usec > 0) ends.push_back(&e);
  }
  if (ends.size() < 2) return std::nullopt;
  std::sort(ends.begin(), ends.end(),
            [](const RankEnd* a, const RankEnd* b) { return a->end_usec < b->end_usec; });
  const double lead = static_cast<double>(ends[1]->end_usec - ends[0]->end_usec) / 1e6;
  if (lead < policy.first_exit_lead_seconds || ends[0]->rank < 0) return std::nullopt;
  if (!allowed(candidates, ends[0]->rank)) return std::nullopt;
  const RankEnd& f = *ends[0];
  return origin(f.rank, f.host, kSignalFirstExit,
                "rank " + std::to_string(f.rank) + on_node(f.host) + " ended first (" +
                    (f.how.empty() ? std::string("its task ended") : f.how) + "), " +
                    std::to_string(std::llround(lead)) +
                    " s before any other task: the others waited for it");
}

std::optional<HangOrigin> by_dstate(const HangOriginInput& in,
                                    const std::vector<int64_t>& candidates) {
  const NodeStallSignals* only = nullptr;
  for (const auto& n : in.nodes) {
    if (n.job_dstate == 0) continue;
    if (only != nullptr) return std::nullopt;  // several nodes: a shared cause, not one origin
    only = &n;
  }
  if (only == nullptr) return std::nullopt;
  bool any = false;
  const auto rank = single_rank_on(in, candidates, only->host, any);
  if (!candidates.empty() && !any) return std::nullopt;
  return origin(rank, only->host, kSignalDState,
                "node " + only->host + " is the only node with the job's tasks in D state (" +
                    std::to_string(only->job_dstate) +
                    " at the last sample): they were blocked "
                    "in the kernel, not waiting in a collective");
}

std::optional<HangOrigin> by_kernel_event(const HangOriginInput& in, const HangOriginPolicy& policy,
                                          const std::vector<int64_t>& candidates) {
  const auto slack = static_cast<int64_t>(policy.kernel_event_slack_seconds * 1e6);
  const NodeStallSignals* only = nullptr;
  std::string what;
  for (const auto& n : in.nodes) {
    const auto at_stall = std::find_if(n.events.begin(), n.events.end(), [&](const auto& e) {
      return in.stall_usec <= 0 || (e.first > 0 && e.first >= in.stall_usec - slack);
    });
    if (at_stall == n.events.end()) continue;
    if (only != nullptr) return std::nullopt;
    only = &n;
    what = at_stall->second;
  }
  if (only == nullptr) return std::nullopt;
  bool any = false;
  const auto rank = single_rank_on(in, candidates, only->host, any);
  if (!candidates.empty() && !any) return std::nullopt;
  return origin(rank, only->host, kSignalKernelEvent,
                "node " + only->host + " is the only node whose kernel reported a problem " +
                    (in.stall_usec > 0 ? "at the stall" : "during the job") + ": " + what);
}

// The other signals in the policy's order; the first that singles one out.
std::optional<HangOrigin> tie_break(const HangOriginInput& in, const HangOriginPolicy& policy,
                                    const std::vector<int64_t>& candidates) {
  for (const auto& signal : policy.order) {
    std::optional<HangOrigin> o;
    if (signal == kSignalFirstExit) o = by_first_exit(in, policy, candidates);
    if (signal == kSignalDState) o = by_dstate(in, candidates);
    if (signal == kSignalKernelEvent) o = by_kernel_event(in, policy, candidates);
    if (o) return o;
  }
  return std::nullopt;
}

HangOrigin none(std::string reason) {
  HangOrigin o;
  o.reason = std::move(reason);
  return o;
}

// Ranks at different points: the ones behind never reached the collective the others wait in.
HangOrigin judge_behind(const HangOriginInput& in, const HangOriginPolicy& policy, const Group& g,
                        int64_t low, int64_t high) {
  std::vector<int64_t> behind;
  std::vector<int64_t> ahead;
  for (const auto* c : g.ranks)
    (c->reached() == low ? behind : ahead).push_back(c->rank);
  const std::string where = " (" + pg_words(g.pg) + ")";
  if (behind.size() > ahead.size()) {
    // Most ranks stopped at the same point and a few went further: those few enqueued a
    // collective the rest never called, which places no single rank.
    if (auto o = tie_break(in, policy, {})) return *o;
    return none((ahead.size() == 1 ? "rank " : "ranks ") + rank_list(ahead) +
                " enqueued collectives up to " + std::to_string(high) + " that the other " +
                std::to_string(behind.size()) + " ranks never reached (they stopped at " +
                std::to_string(low) + where + "); nothing singles out one rank");
  }
  if (behind.size() == 1) {
    const int64_t r = behind.front();
    return origin(r, node_of(in, r), kSignalBehind,
                  "rank " + std::to_string(r) + "'s last enqueued collective is " +
                      std::to_string(low) + " while the other " +
                      (ahead.size() == 1 ? std::string("reporting rank")
                                         : std::to_string(ahead.size()) + " reporting ranks") +
                      " reached " + std::to_string(high) + where +
                      ": it never reached the collective they wait in");
  }
  const std::string lag = "ranks " + rank_list(behind) + " are behind the others (last enqueued " +
                          std::to_string(low) + ", the others up to " + std::to_string(high) +
                          where + ")";
  if (auto o = tie_break(in, policy, behind)) {
    o->basis = lag + "; of them, " + o->basis;
    return *o;
  }
  std::set<std::string> hosts;
  for (const int64_t r : behind)
    hosts.insert(node_of(in, r));
  if (hosts.size() == 1 && !hosts.begin()->empty())
    return origin(std::nullopt, *hosts.begin(), kSignalBehind, lag + ", all on this node");
  return none(lag + ", not on one node; nothing singles out one of them");
}

}  // namespace

HangOrigin decide_hang_origin(const HangOriginInput& in, const HangOriginPolicy& policy) {
  const std::optional<Group> g = choose_group(in.collectives);
  if (!g) {
    if (auto o = tie_break(in, policy, {})) return *o;
    return none(
        "no watchdog line states the ranks' collectives, and no node evidence singles out a rank "
        "or a node");
  }
  int64_t low = INT64_MAX;
  int64_t high = INT64_MIN;
  for (const auto* c : g->ranks) {
    low = std::min(low, c->reached());
    high = std::max(high, c->reached());
  }
  const std::string n = std::to_string(g->ranks.size());
  if (high == -1) {
    HangOrigin o =
        none("no collective was in flight: every rank that reported (" + n +
             ") had last enqueued work -1, so the processes froze outside communication (e.g. a "
             "stalled filesystem); this is not a communication hang");
    o.outside_communication = true;
    return o;
  }
  if (low < high) return judge_behind(in, policy, *g, low, high);

  // Every reporting rank at the same point. A rank of the job that printed nothing had no
  // collective in flight: it never reached the one the others time out in (a rank whose work
  // queue is empty has nothing to time out, and before the dump signal of later 2.x versions it
  // prints nothing at all).
  if (!in.known_ranks.empty() && (g->pg.empty() || g->pg == "0")) {
    std::vector<int64_t> silent;
    for (const int64_t r : in.known_ranks) {
      const bool reported = std::any_of(g->ranks.begin(), g->ranks.end(),
                                        [r](const CollectiveProgress* c) { return c->rank == r; });
      if (!reported) silent.push_back(r);
    }
    if (silent.size() == 1 && g->ranks.size() + 1 == in.known_ranks.size()) {
      const int64_t r = silent.front();
      return origin(r, node_of(in, r), kSignalSilent,
                    "rank " + std::to_string(r) + " printed no watchdog line while the other " + n +
                        " ranks timed out waiting with collective " + std::to_string(high) +
                        " enqueued (" + pg_words(g->pg) + "): it never reached it");
    }
  }
  if (auto o = tie_break(in, policy, {})) return *o;
  if (g->ranks.size() == 1) {
    return none("only rank " + std::to_string(g->ranks.front()->rank) +
                "'s watchdog numbers are in the log (collective " + std::to_string(high) +
                "); there is nothing to compare them with");
  }
  return none("all ranks stopped together: every reporting rank (" + n +
              ") last enqueued collective " + std::to_string(high) + " (" + pg_words(g->pg) +
              "), and no other signal singles out a rank or a node");
}

}  // namespace triage
