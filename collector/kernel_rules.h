// The compiled kernel catalogs: kernel-line rules (rules/kernel-events.rules), known-harmless
// kernel lines, the NVIDIA Xid catalog (rules/nvidia-xid.rules), the AMD RAS block catalog
// (rules/amdgpu-ras.rules) and the cgroup layouts that name a Slurm job. Built only by
// load_kernel_rules(); immutable afterwards and safe to share between classifiers.
#pragma once

#include <re2/re2.h>
#include <re2/set.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/model.h"

namespace triage::collector {

// The remedies a catalog may name (`remedy = ...`): "reboot", or "none" for nothing.
bool is_event_remedy(std::string_view remedy);

// The event field a remedy goes into ("remedy"); absent when the catalog names none.
inline constexpr const char* kRemedyField = "remedy";

// The event kinds of docs/protocol.md that kernel rules may produce.
bool is_kernel_event_kind(std::string_view kind);
// All of them, in the order docs/protocol.md lists them.
std::vector<std::string_view> kernel_event_kinds();
// The actions a catalog may attach (docs/protocol.md).
bool is_event_action(std::string_view action);

// A compiled pattern and what its named groups are called.
struct RulePattern {
  std::unique_ptr<RE2> re;
  std::vector<std::pair<std::string, int>> groups;  // name -> group index
  std::string where;                                // "file:line", for messages
};

// Runs `p` over `text`; on a match, calls emit(name, value) for every named group that took part.
// `likely` says the caller expects a match (an opener the combined automaton already found): then
// the quick no-match test, which pays off for the many lines that do not match, is skipped.
template <typename Emit>
bool match_pattern(const RulePattern& p, std::string_view text, Emit&& emit, bool likely = false);

enum class RecordBody {
  kListed,  // only `continue` / `end` lines extend the record
  kAny,     // every line extends it until `end`, except lines that open another rule's event
};

enum class CatalogRef { kNone, kXid, kRasUe, kRasCe, kRasDe };

// A real kernel line a rule's section says it must (`example`) or must not (`counter-example`)
// make an event of; `rules check` runs each through the classifier (kernel_rule_examples.h).
struct KernelExample {
  std::string text;
  int line = 0;
};

struct KernelRule {
  std::string id;
  std::string file;
  int line = 0;
  std::vector<KernelExample> examples;
  std::vector<KernelExample> counter_examples;
  std::string kind;
  Severity severity = Severity::kWarning;
  std::string action = "none";
  // What clears the fault when the node is remediated (`remedy = reboot`): the agent's
  // Remediate=reboot acts on it (agent/health/remediation.h). Empty: nothing the agent does.
  std::string remedy;
  std::string summary;  // template; "{name}" is replaced by a capture or catalog field
  std::vector<RulePattern> patterns;
  std::vector<RulePattern> unless;
  std::vector<RulePattern> continues;
  std::vector<RulePattern> ends;
  RecordBody body = RecordBody::kListed;
  size_t max_lines = 200;
  int64_t gap_usec = 2'000'000;
  bool fold = true;
  CatalogRef catalog = CatalogRef::kNone;

  // A refining rule adjusts finished events of other rules when all its `match` patterns match
  // some line of the record; only the keys it sets are changed.
  std::vector<std::string> refines;  // ids of the refined rules
  std::vector<RulePattern> matches;
  bool sets_kind = false;
  bool sets_severity = false;
  bool sets_action = false;
  bool sets_remedy = false;
  bool sets_summary = false;
  std::vector<size_t> refined_by;  // indexes of the rules refining this one, in load order

  bool is_refiner() const { return !refines.empty(); }
};

// A [kernel-harmless] section as written: its patterns are in KernelRules' harmless list.
struct KernelHarmless {
  std::string id;
  std::string file;
  int line = 0;
  size_t first_pattern = 0;  // index of its first pattern in the harmless list
  size_t patterns = 0;
  std::vector<KernelExample> examples;  // real lines it must silence
};

struct XidInfo {
  std::string meaning;
  Severity severity = Severity::kWarning;
  std::string action = "investigate";
  std::string fault;              // node | application | driver | consequence
  std::string remedy;             // "reboot" when a node reboot clears it (KernelRule::remedy)
  int64_t cause_within_usec = 0;  // name an earlier Xid on the same GPU within this as the cause
};

struct RasBlockInfo {
  std::string meaning;
  std::string metric;  // the hw_gpu_ras_<metric>_{ue,ce}_total family the block feeds
  // Indexed ue, ce, de.
  std::array<Severity, 3> severity = {Severity::kCritical, Severity::kWarning, Severity::kError};
  std::array<std::string, 3> action = {"drain", "investigate", "investigate"};
};

class KernelRules {
 public:
  // Which rules open an event on this message (indexes, in load order, `unless` already applied),
  // and whether a known-harmless pattern matched.
  struct LineMatch {
    bool harmless = false;
    std::vector<size_t> rules;
  };
  void match(std::string_view message, LineMatch& m) const;
  // Whether rule `i` opens on `message` (its patterns, minus `unless`); the named groups of the
  // pattern that matched go to emit(name, value).
  template <typename Emit>
  bool opens(size_t i, std::string_view message, Emit&& emit) const;

  const std::vector<KernelRule>& rules() const { return rules_; }
  const std::vector<KernelHarmless>& harmless_sections() const { return harmless_sections_; }
  // Whether a pattern of harmless section `h` matches the message.
  bool harmless_matches(const KernelHarmless& h, std::string_view message) const;
  const XidInfo& xid(int64_t code, bool& known) const;
  const RasBlockInfo& ras(std::string_view block, bool& known) const;
  // The Slurm job (and step, when printed) a cgroup path belongs to.
  bool job_from_cgroup(std::string_view cgroup, uint64_t& job_id, std::string& step) const;
  int64_t longest_cause_window_usec() const { return longest_cause_window_; }
  // Every opener and harmless pattern as written (benchmarks compare against grep/rg with them).
  std::vector<std::string> opener_patterns() const;

 private:
  friend class KernelRulesBuilder;

  std::vector<KernelRule> rules_;
  std::vector<RulePattern> harmless_;
  std::vector<KernelHarmless> harmless_sections_;
  std::unique_ptr<RE2::Set> set_;
  // Set index -> rule index, or -1 for a harmless pattern.
  std::vector<int> set_owner_;
  std::map<int64_t, XidInfo> xid_;
  XidInfo xid_default_;
  std::map<std::string, RasBlockInfo, std::less<>> ras_;
  RasBlockInfo ras_default_;
  std::vector<RulePattern> cgroup_job_;
  int64_t longest_cause_window_ = 0;
};

template <typename Emit>
bool match_pattern(const RulePattern& p, std::string_view text, Emit&& emit, bool likely) {
  const re2::StringPiece piece(text.data(), text.size());
  // Most lines do not match; the automaton answers that much faster than a submatch search
  // (which RE2 runs directly on short lines).
  if (!likely || p.groups.empty()) {
    if (!p.re->Match(piece, 0, text.size(), RE2::UNANCHORED, nullptr, 0)) return false;
    if (p.groups.empty()) return true;
  }
  const int n = p.re->NumberOfCapturingGroups() + 1;
  re2::StringPiece groups[32];
  if (n > 32) return false;
  if (!p.re->Match(piece, 0, text.size(), RE2::UNANCHORED, groups, n)) return false;
  for (const auto& [name, index] : p.groups) {
    const re2::StringPiece& g = groups[index];
    if (g.data() != nullptr) emit(name, std::string_view(g.data(), g.size()));
  }
  return true;
}

template <typename Emit>
bool KernelRules::opens(size_t i, std::string_view message, Emit&& emit) const {
  const KernelRule& r = rules_[i];
  const re2::StringPiece text(message.data(), message.size());
  for (const auto& u : r.unless) {
    if (RE2::PartialMatch(text, *u.re)) return false;
  }
  // The combined automaton said one of the patterns matches; a rule with several tries them in
  // order, the cheap way first.
  const bool one = r.patterns.size() == 1;
  for (const auto& p : r.patterns) {
    if (match_pattern(p, message, emit, one)) return true;
  }
  return false;
}

}  // namespace triage::collector
