#include "analyzer/consequence_links.h"

#include <algorithm>

namespace triage {

namespace {

std::string relation_of(const FoundClasses& found, const RankingResult& rank, size_t i,
                        const SignatureCatalog& catalog) {
  const auto& occ = found.occ;
  const int by = i < rank.explained_by.size() ? rank.explained_by[i] : -1;
  if (rank.primary >= 0) {
    const ClassOccurrence& primary = occ[static_cast<size_t>(rank.primary)];
    if (explains_occurrence(catalog, primary, occ[i]))
      return "consequence of " + catalog.classes()[primary.cls].id;
  }
  if (by >= 0) return "consequence of " + catalog.classes()[occ[static_cast<size_t>(by)].cls].id;
  if (catalog.classes()[occ[i].cls].role == ClassRole::kMinor) return "minor";
  return "independent";
}

}  // namespace

bool explains_occurrence(const SignatureCatalog& catalog, const ClassOccurrence& a,
                         const ClassOccurrence& b) {
  if (catalog.explains(static_cast<int>(a.cls), static_cast<int>(b.cls))) return true;
  return catalog.classes()[b.cls].traceback && a.first != nullptr && b.first != nullptr &&
         a.first->traceback_line > 0 && a.first->traceback_line == b.first->line;
}

std::vector<AdditionalFinding> link_consequences(const FoundClasses& found,
                                                 const RankingResult& rank,
                                                 const SignatureCatalog& catalog) {
  std::vector<AdditionalFinding> out;
  for (size_t i = 0; i < found.occ.size(); ++i) {
    const ClassOccurrence& o = found.occ[i];
    if (static_cast<int>(i) == rank.primary || o.first == nullptr) continue;
    const SignatureClass& c = catalog.classes()[o.cls];
    AdditionalFinding a;
    a.cls = c.id;
    a.title = c.title;
    a.count = o.count;
    a.first = *o.first;
    a.trusted = o.first->trusted;
    const ClassMatches* m = found.matches[i];
    const Finding* last = m != nullptr && m->count > 1 ? m->latest() : nullptr;
    if (last != nullptr) a.last = *last;
    a.relation = relation_of(found, rank, i, catalog);
    out.push_back(std::move(a));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const AdditionalFinding& a, const AdditionalFinding& b) {
                     if (a.first.trusted != b.first.trusted) return a.first.trusted;
                     return a.first.line < b.first.line;
                   });
  return out;
}

}  // namespace triage
