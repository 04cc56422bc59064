// The log-signature catalog (rules/log-signatures.rules, overridable from triage.d and --rules):
// failure classes with their patterns, and the known-harmless lines. Loading compiles every pattern
// and works out, for each one, the literals any match must contain; the scanner searches the log
// for those literals and runs a pattern only on lines that hold one.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/blame.h"
#include "analyzer/vocabulary.h"
#include "common/error.h"
#include "common/model.h"
#include "common/rules_file.h"

namespace re2 {
class RE2;
}

namespace triage {

enum class ClassRole { kCause, kConsequence, kMinor };
std::string_view to_string(ClassRole r);

// How a class without log patterns is found (`derived = ...`). Stall and no-evidence are unique
// roles: the diagnosis asks the catalog for the one class that plays each.
enum class Derivation {
  kNone,        // found by its patterns
  kEvidence,    // only from trusted evidence: kernel events, Slurm state (`derived = evidence`)
  kStall,       // training steps stopped before the job ended (`derived = stall`)
  kNoEvidence,  // the job ended without a summary and nothing explains it (`derived = no-evidence`)
};
std::string_view to_string(Derivation d);

// Which end of a task recorded by a node agent is trusted evidence of the class (`task-end`).
enum class TaskEnd { kNone, kSignal, kNonzeroExit };
std::string_view to_string(TaskEnd e);

// A value of a repeatable key, with the line it was declared on (for `rules check` messages).
template <typename T>
struct Declared {
  T value;
  int line = 0;
};

// One compiled pattern. A pattern whose text is a plain string (no regex operators) is matched as a
// substring without RE2, which is most of the catalog and most of the matching work.
struct CompiledPattern {
  std::string source;  // as written in the catalog
  std::string file;
  int line = 0;
  std::shared_ptr<const re2::RE2> re;  // null for plain literals
  std::string literal;                 // the plain string, when re is null
  bool literal_icase = false;
  // Literals (lower-cased) of which every match contains at least one: the scanner's triggers.
  std::vector<std::string> required;
  // A `cause-pattern`: its lines rank as causes even in a consequence class.
  bool as_cause = false;
};

// `blame-when = BLAME RE2`: words of the log's own evidence that change whose fault a failure of
// the class is (an exception type, a message that names the cause).
struct BlameRefinement {
  Blame blame = Blame::kUnknown;
  CompiledPattern pattern;
};

struct SignatureClass {
  std::string id;
  std::string title;
  int priority = 1000;
  ClassRole role = ClassRole::kCause;
  std::string stage;
  Derivation derived = Derivation::kNone;
  // `status = cancelled`: a line of the class is Slurm ending the job (scancel, time limit,
  // preemption), so the job's status is cancelled and the cancellation may be the whole story.
  bool cancellation = false;
  std::vector<Declared<int>> exit_codes;  // JOB SUMMARY exit codes that name the class
  TaskEnd task_end = TaskEnd::kNone;
  bool traceback = false;        // its lines open a Python traceback (`traceback = true`)
  bool heartbeat_check = false;  // the report's heartbeat checklist belongs to it
  // `generic = true`: a catch-all (a bare traceback, a task's exit, a death nothing explains). A
  // class a vocabulary token names, found at the same or an earlier line, explains it.
  bool generic = false;
  Blame blame = Blame::kUnknown;
  // Tried in order on the class's evidence lines when it is the primary failure; the first that
  // matches a line replaces `blame` (trusted node evidence still comes first).
  std::vector<BlameRefinement> blame_when;
  std::vector<Declared<std::string>> playbooks;  // metrics playbook ids that apply to it
  // The first line of each key the section wrote, for messages that point at a field.
  std::vector<Declared<std::string>> key_lines;
  std::vector<CompiledPattern> patterns;
  // Lines a pattern matches that are not this class: the benign shapes of its lines.
  std::vector<CompiledPattern> excludes;
  // Real log lines that must be a finding of this class (`example`) or must not
  // (`counter-example`); `rules check` runs each through the scanner.
  std::vector<Declared<std::string>> examples;
  std::vector<Declared<std::string>> counter_examples;
  std::vector<std::string> explains;  // class ids this class causes
  std::vector<std::string> kernel_events;
  Severity kernel_min_severity = Severity::kError;
  // `kernel-blame`: the blame when a node's trusted evidence of one of `kernel_events` (at
  // kernel_min_severity or worse) was seen on one of the job's nodes during its window.
  std::optional<Blame> kernel_blame;
  std::vector<std::string> slurm_states;
  std::string explain;
  struct NextStep {
    std::string text;
    bool live_only = false;  // `next-if-live`: only while the job still runs
  };
  std::vector<NextStep> next;
  std::string file;
  int line = 0;

  bool is_derived() const { return derived != Derivation::kNone; }
  bool claims_exit_code(int code) const;
  std::vector<std::string> playbook_ids() const;
  // The line `key` was first written on, or the section's line when it was not written.
  int line_of(std::string_view key) const;
};

struct HarmlessEntry {
  std::string id;
  std::vector<CompiledPattern> patterns;
  // `after`: when given, a matching line is harmless only if the line just before it matches one
  // of these: a benign shape two lines long (killall finding nothing to kill, then srun reporting
  // that step's exit code 1).
  std::vector<CompiledPattern> after;
  std::vector<Declared<std::string>> examples;  // real lines the entry must silence
  // `example-before`: the real line that precedes every example of an entry with `after`.
  std::optional<Declared<std::string>> example_before;
  std::string why;
  std::string file;
  int line = 0;
};

// Shortest literal the scanner accepts as a trigger: shorter ones would make the literal search
// sample the log too densely (see literal_search.h).
inline constexpr size_t kMinTriggerLength = 8;

class SignatureCatalog {
 public:
  // Builds the catalog from loaded rule sections (only [signature] and [harmless] sections are
  // looked at). Problems are appended to `errors` as file:line messages; a class or pattern with an
  // error is left out, everything else still loads.
  static SignatureCatalog from_sections(const std::vector<RuleSection>& sections,
                                        std::vector<InputError>& errors);

  // Loads the default layers (shipped, /etc/slurm/triage.d, then `extra_layers`).
  static SignatureCatalog load(const std::vector<std::string>& extra_layers,
                               std::vector<InputError>& errors,
                               std::vector<std::string>* files_read = nullptr);

  const std::vector<SignatureClass>& classes() const { return classes_; }
  const std::vector<HarmlessEntry>& harmless() const { return harmless_; }
  // The error vocabularies ([vocab-group] and [vocab] sections), their classes checked on load.
  const Vocabulary& vocabulary() const { return vocab_; }
  const SignatureClass* find(std::string_view id) const;
  // Index of a class in classes(), or -1.
  int index_of(std::string_view id) const;

  // Does `a` list `b` among the classes it explains?
  bool explains(int a, int b) const;

  // The class that plays a role, or null; when several claim it (which `rules check` rejects),
  // the first in catalog order.
  const SignatureClass* derived_class(Derivation d) const;
  const SignatureClass* exit_code_class(int code) const;
  const SignatureClass* task_end_class(TaskEnd e) const;
  const SignatureClass* slurm_state_class(std::string_view state) const;
  const SignatureClass* traceback_class() const;
  const SignatureClass* heartbeat_class() const;
  // The metrics playbook ids that apply to a class (empty for an unknown class).
  std::vector<std::string> playbooks_for(std::string_view class_id) const;

 private:
  std::vector<SignatureClass> classes_;
  std::vector<HarmlessEntry> harmless_;
  Vocabulary vocab_;
  std::vector<std::vector<bool>> explains_;  // [a][b]
};

// Compiles one pattern (Latin-1, case as written). On failure returns nullopt and sets `error`.
std::optional<CompiledPattern> compile_pattern(const std::string& source, std::string& error);

// Matches a compiled pattern against a line. `captures`, when given, receives the named groups.
bool pattern_matches(const CompiledPattern& p, std::string_view text,
                     std::vector<std::pair<std::string, std::string>>* captures = nullptr);

}  // namespace triage
