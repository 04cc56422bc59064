// Decides which class found is the job's primary failure and which of its lines are the evidence
// (contracts in primary_failure.h); the ranking itself is failure_ranking.cpp.
#include "analyzer/primary_failure.h"

#include <algorithm>
#include <climits>
#include <set>

#include "common/wait_status.h"

namespace triage {

namespace {

// Findings from outside the main log come after every log line in "earliest" order.
constexpr int64_t kOrderExtraLogs = INT64_MAX / 4;
constexpr int64_t kOrderTrusted = INT64_MAX / 2;

// The earliest finding of a class; when some of its lines matched a cause-pattern, the earliest
// of those (`cause` is set).
const Finding* earliest_effective(const ClassMatches& m, bool& cause) {
  const Finding* best = nullptr;
  const Finding* best_cause = nullptr;
  for (const auto& f : m.first) {
    if (best == nullptr || f.effective_line() < best->effective_line()) best = &f;
    if (f.cause && (best_cause == nullptr || f.effective_line() < best_cause->effective_line()))
      best_cause = &f;
  }
  cause = best_cause != nullptr;
  return cause ? best_cause : best;
}

void add(FoundClasses& found, const ClassOccurrence& o, const ClassMatches* m) {
  found.occ.push_back(o);
  found.matches.push_back(m);
}

bool stopped_before_end(const DerivedFacts& f) {
  const ProgressProjection& p = f.progress;
  return p.has_steps && p.stalled &&
         (f.status == kStatusHanging || f.status == kStatusCancelled || f.status == kStatusFailed ||
          f.status == kStatusUnknown);
}

// A log line of the primary, among the first and last ones kept, up to four in all.
void add_matched_lines(const ClassMatches& m, const Finding& first, const std::string& class_id,
                       PrimaryEvidence& out) {
  for (const auto& f : m.first) {
    if (out.evidence.size() >= 4) break;
    if (f.line != first.line || f.source != first.source) out.evidence.push_back(f);
  }
  if (const Finding* last = m.latest(); last != nullptr && m.count > out.evidence.size()) {
    const bool dup = std::any_of(out.evidence.begin(), out.evidence.end(), [&](const Finding& e) {
      return e.line == last->line && e.source == last->source;
    });
    if (!dup) out.evidence.push_back(*last);
  }
  if (m.count > out.evidence.size()) {
    out.notes.push_back(std::to_string(m.count) + " lines matched " + class_id +
                        "; the first and last are shown.");
  }
}

// A traceback's own last line says what was raised, and its innermost frame where.
void add_exception_lines(const std::vector<TracebackFact>& tracebacks, const std::string& class_id,
                         std::vector<Finding>& evidence) {
  for (const auto& tb : tracebacks) {
    const bool ours = std::any_of(evidence.begin(), evidence.end(), [&](const Finding& e) {
      return e.source == "log" && (e.line == tb.start_line || e.traceback_line == tb.start_line);
    });
    if (!ours || tb.exception_line <= 0) continue;
    const auto own = std::find_if(evidence.begin(), evidence.end(),
                                  [&](const Finding& e) { return e.line == tb.exception_line; });
    if (own != evidence.end()) {
      if (own->source != "log") continue;
      // The exception line is a finding of its own (its type is in a vocabulary): it still says
      // where the exception was raised.
      const bool has = std::any_of(own->captures.begin(), own->captures.end(),
                                   [](const auto& c) { return c.first == "raised-in"; });
      if (!has && !tb.raised_in.empty()) own->captures.emplace_back("raised-in", tb.raised_in);
    } else {
      Finding ex;
      ex.cls = class_id;
      ex.line = tb.exception_line;
      ex.text = tb.exception_text;
      ex.rank = tb.rank;
      if (!tb.raised_in.empty()) ex.captures.emplace_back("raised-in", tb.raised_in);
      evidence.push_back(std::move(ex));
    }
  }
}

}  // namespace

void add_log_classes(FoundClasses& found, const ScanResult* scan,
                     const std::vector<const ScanResult*>& extra_scans) {
  std::set<uint32_t> seen;
  if (scan != nullptr) {
    for (size_t i = 0; i < scan->classes.size(); ++i) {
      const ClassMatches& m = scan->classes[i];
      if (m.count == 0) continue;
      bool cause = false;
      const Finding* f = earliest_effective(m, cause);
      if (f == nullptr) continue;
      ClassOccurrence o{static_cast<uint32_t>(i), f, m.count, false, f->effective_line(), cause};
      for (const auto& x : m.first) {
        if (!x.vocabulary.empty()) o.named_order = std::min(o.named_order, x.effective_line());
      }
      add(found, o, &m);
      seen.insert(static_cast<uint32_t>(i));
    }
  }
  for (const ScanResult* x : extra_scans) {
    if (x == nullptr) continue;
    for (size_t i = 0; i < x->classes.size(); ++i) {
      const ClassMatches& m = x->classes[i];
      if (m.count == 0 || seen.count(static_cast<uint32_t>(i)) != 0) continue;
      add(found,
          ClassOccurrence{static_cast<uint32_t>(i), m.earliest(), m.count, false, kOrderExtraLogs},
          &m);
      seen.insert(static_cast<uint32_t>(i));
    }
  }
}

void add_trusted_classes(FoundClasses& found, std::vector<TrustedFinding> trusted,
                         const SignatureCatalog& catalog) {
  std::map<uint32_t, size_t> by_class;  // class -> occurrence
  for (auto& moved : trusted) {
    const TrustedFinding& tf = found.trusted.emplace_back(std::move(moved));
    const int ci = catalog.index_of(tf.finding.cls);
    if (ci < 0) continue;
    const auto cls = static_cast<uint32_t>(ci);
    auto it = by_class.find(cls);
    if (it == by_class.end()) {
      by_class.emplace(cls, found.occ.size());
      add(found, ClassOccurrence{cls, &tf.finding, 1, tf.decisive, kOrderTrusted}, nullptr);
    } else {
      ClassOccurrence& o = found.occ[it->second];
      ++o.count;
      if (tf.decisive && !o.decisive) {
        o.decisive = true;
        o.first = &tf.finding;
      }
    }
  }
}

std::vector<Finding> derived_findings(const DerivedFacts& facts, const SignatureCatalog& catalog) {
  std::vector<Finding> out;
  const ProgressProjection& p = facts.progress;
  const SignatureClass* stall = catalog.derived_class(Derivation::kStall);
  if (stall != nullptr && stopped_before_end(facts)) {
    Finding f;
    f.cls = stall->id;
    f.source = "log";
    f.line = p.last_step_line;
    f.text = facts.last_step_text;
    f.time_usec = p.last_step_time_usec;
    f.stage = "Training";
    out.push_back(std::move(f));
  }
  const SignatureClass* unexplained = catalog.derived_class(Derivation::kNoEvidence);
  if (unexplained != nullptr && facts.status == kStatusUnknown) {
    Finding f;
    f.cls = unexplained->id;
    f.source = "log";
    f.line = facts.log_lines;
    f.stage = p.has_steps ? "Training" : "";
    f.text = facts.last_line_text;
    out.push_back(std::move(f));
  }
  return out;
}

void add_derived_classes(FoundClasses& found, std::vector<Finding> derived,
                         const SignatureCatalog& catalog) {
  for (auto& moved : derived) {
    const Finding& f = found.derived.emplace_back(std::move(moved));
    const SignatureClass* c = catalog.find(f.cls);
    if (c == nullptr) continue;
    // A stall began after its last step line, not on it.
    const int64_t order = f.line + (c->derived == Derivation::kStall ? 1 : 0);
    add(found, ClassOccurrence{static_cast<uint32_t>(catalog.index_of(f.cls)), &f, 1, false, order},
        nullptr);
  }
}

std::optional<Finding> exit_code_finding(const Triage::Summary& summary,
                                         const SignatureCatalog& catalog) {
  if (!summary.exit_code) return std::nullopt;
  const int code = *summary.exit_code;
  const SignatureClass* c = catalog.exit_code_class(code);
  if (c == nullptr || c->cancellation) return std::nullopt;
  Finding f;
  f.cls = c->id;
  f.line = summary.line;
  f.text = "JOB SUMMARY exit " + std::to_string(code) + ": " + describe_exit_code(code);
  f.stage = "Training";
  return f;
}

RankingResult choose_primary(FoundClasses& found, bool wants_primary,
                             const Triage::Summary& summary, const SignatureCatalog& catalog) {
  RankingResult rank = rank_failures(catalog, found.occ, wants_primary);
  if (!wants_primary) {
    rank.primary = -1;
    return rank;
  }
  if (rank.primary >= 0) return rank;
  // A failed job whose log matched nothing: the summary's exit code may still name a class.
  std::optional<Finding> by_code = exit_code_finding(summary, catalog);
  if (!by_code) return rank;
  const Finding& f = found.derived.emplace_back(std::move(*by_code));
  add(found,
      ClassOccurrence{static_cast<uint32_t>(catalog.index_of(f.cls)), &f, 1, false, summary.line},
      nullptr);
  rank.explained_by.push_back(-1);
  rank.primary = static_cast<int>(found.occ.size()) - 1;
  return rank;
}

PrimaryEvidence primary_evidence(const FoundClasses& found, int primary,
                                 const std::vector<TracebackFact>& tracebacks,
                                 const SignatureCatalog& catalog) {
  PrimaryEvidence out;
  if (primary < 0) return out;
  const ClassOccurrence& po = found.occ[static_cast<size_t>(primary)];
  const SignatureClass& pc = catalog.classes()[po.cls];
  out.stage = po.first != nullptr && !po.first->stage.empty() ? po.first->stage : pc.stage;
  if (po.first != nullptr) out.evidence.push_back(*po.first);
  // A class the log matched always has a first finding.
  if (const ClassMatches* m = found.matches[static_cast<size_t>(primary)];
      m != nullptr && po.first != nullptr)
    add_matched_lines(*m, *po.first, pc.id, out);
  add_exception_lines(tracebacks, pc.id, out.evidence);
  // Trusted evidence of the primary: the related task exits on the same host.
  if (po.first != nullptr && po.first->trusted) {
    for (const auto& tf : found.trusted) {
      if (&tf.finding != po.first && tf.finding.host == po.first->host && out.evidence.size() < 8 &&
          (tf.finding.cls == pc.id || tf.finding.source.rfind("tasks:", 0) == 0)) {
        out.evidence.push_back(tf.finding);
      }
    }
  }
  // A node's trusted evidence of the class (its kernel or its agent saw this failure during the
  // job) is shown beside the log's lines however many those are: it decides the blame.
  if (po.first == nullptr || !po.first->trusted) {
    for (const auto& tf : found.trusted) {
      if (tf.finding.cls == pc.id && out.evidence.size() < 8) out.evidence.push_back(tf.finding);
    }
  }
  std::stable_sort(out.evidence.begin(), out.evidence.end(),
                   [](const Finding& a, const Finding& b) {
                     if (a.source != b.source) return a.source == "log";
                     return a.line < b.line;
                   });
  return out;
}

}  // namespace triage
