#include "analyzer/failure_ranking.h"

#include <climits>

namespace triage {

namespace {

struct Key {
  int64_t order;
  int priority;
  int64_t time;
};

bool earlier(const Key& a, const Key& b) {
  if (a.order != b.order) return a.order < b.order;
  if (a.priority != b.priority) return a.priority < b.priority;
  return a.time < b.time;
}

}  // namespace

RankingResult rank_failures(const SignatureCatalog& catalog,
                            const std::vector<ClassOccurrence>& occ, bool allow_minor) {
  RankingResult r;
  r.explained_by.assign(occ.size(), -1);
  const auto& classes = catalog.classes();
  auto role = [&](size_t i) { return occ[i].cause ? ClassRole::kCause : classes[occ[i].cls].role; };
  auto key = [&](size_t i) {
    const int64_t t = occ[i].first != nullptr && occ[i].first->time_usec > 0
                          ? occ[i].first->time_usec
                          : INT64_MAX;
    return Key{occ[i].order, classes[occ[i].cls].priority, t};
  };

  // Who explains whom. A traceback (the catalog's `traceback` class) that ends in a more specific
  // error (an XLA compile failure, an OOM) is explained by that error.
  for (size_t b = 0; b < occ.size(); ++b) {
    int best = -1;
    for (size_t a = 0; a < occ.size(); ++a) {
      // Only a cause explains: a consequence class (a node's non-zero exit) does not account for
      // others. A traceback ending in this finding's line is explained by it.
      if (a == b) continue;
      // Specific over generic: a class an error's own vocabulary named accounts for a catch-all
      // found at its line or after, whatever its role.
      const bool named = classes[occ[b].cls].generic && !classes[occ[a].cls].generic &&
                         occ[a].named_order <= occ[b].order;
      if (role(a) != ClassRole::kCause && !named) continue;
      bool explains =
          named || catalog.explains(static_cast<int>(occ[a].cls), static_cast<int>(occ[b].cls));
      const Finding* fa = occ[a].first;
      const Finding* fb = occ[b].first;
      if (!explains && classes[occ[b].cls].traceback && fa != nullptr && fb != nullptr &&
          fa->traceback_line > 0 && fa->traceback_line == fb->line) {
        explains = true;
      }
      if (explains && (best < 0 || earlier(key(a), key(static_cast<size_t>(best)))))
        best = static_cast<int>(a);
    }
    r.explained_by[b] = best;
  }

  auto pick_by = [&](auto&& eligible, auto&& before) {
    int best = -1;
    for (size_t i = 0; i < occ.size(); ++i) {
      if (!eligible(i)) continue;
      if (best < 0 || before(i, static_cast<size_t>(best))) best = static_cast<int>(i);
    }
    return best;
  };
  auto pick = [&](auto&& eligible) {
    return pick_by(eligible, [&](size_t a, size_t b) { return earlier(key(a), key(b)); });
  };

  // Decisive trusted findings have no log line: the first by time (priority when unknown).
  r.primary = pick_by([&](size_t i) { return occ[i].decisive; },
                      [&](size_t a, size_t b) {
                        const Key ka = key(a);
                        const Key kb = key(b);
                        return ka.time != kb.time ? ka.time < kb.time : ka.priority < kb.priority;
                      });
  if (r.primary >= 0) return r;
  r.primary = pick([&](size_t i) { return role(i) == ClassRole::kCause && r.explained_by[i] < 0; });
  if (r.primary >= 0) return r;
  r.primary = pick([&](size_t i) { return role(i) == ClassRole::kCause; });
  if (r.primary >= 0) return r;
  r.primary =
      pick([&](size_t i) { return role(i) == ClassRole::kConsequence && r.explained_by[i] < 0; });
  if (r.primary >= 0) return r;
  r.primary = pick([&](size_t i) { return role(i) == ClassRole::kConsequence; });
  if (r.primary >= 0 || !allow_minor) return r;
  r.primary = pick([&](size_t i) { return role(i) == ClassRole::kMinor; });
  return r;
}

}  // namespace triage
