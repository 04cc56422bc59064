#include "analyzer/signature_catalog.h"

#include <re2/filtered_re2.h>
#include <re2/re2.h>

#include <algorithm>
#include <map>
#include <set>

#include "common/text.h"

namespace triage {

std::string_view to_string(ClassRole r) {
  switch (r) {
    case ClassRole::kCause:
      return "cause";
    case ClassRole::kConsequence:
      return "consequence";
    case ClassRole::kMinor:
      return "minor";
  }
  return "cause";
}

std::string_view to_string(Derivation d) {
  switch (d) {
    case Derivation::kNone:
      return "false";
    case Derivation::kEvidence:
      return "evidence";
    case Derivation::kStall:
      return "stall";
    case Derivation::kNoEvidence:
      return "no-evidence";
  }
  return "false";
}

std::string_view to_string(TaskEnd e) {
  switch (e) {
    case TaskEnd::kNone:
      return "";
    case TaskEnd::kSignal:
      return "signal";
    case TaskEnd::kNonzeroExit:
      return "nonzero-exit";
  }
  return "";
}

namespace {

constexpr std::pair<Blame, std::string_view> kBlameNames[] = {
    {Blame::kUserCode, "user-code"},   {Blame::kUserConfig, "user-config"},
    {Blame::kInputData, "input-data"}, {Blame::kPlatform, "platform"},
    {Blame::kScheduler, "scheduler"},  {Blame::kUnknown, "unknown"},
};

}  // namespace

std::string_view to_string(Blame b) {
  for (const auto& [value, name] : kBlameNames) {
    if (value == b) return name;
  }
  return "unknown";
}

std::optional<Blame> parse_blame(std::string_view s) {
  for (const auto& [value, name] : kBlameNames) {
    if (name == s) return value;
  }
  return std::nullopt;
}

bool SignatureClass::claims_exit_code(int code) const {
  return std::any_of(exit_codes.begin(), exit_codes.end(),
                     [code](const Declared<int>& d) { return d.value == code; });
}

std::vector<std::string> SignatureClass::playbook_ids() const {
  std::vector<std::string> out;
  for (const auto& p : playbooks)
    out.push_back(p.value);
  return out;
}

int SignatureClass::line_of(std::string_view key) const {
  for (const auto& k : key_lines) {
    if (k.value == key) return k.line;
  }
  return line;
}

namespace {

RE2::Options pattern_options() {
  RE2::Options o;
  // Latin-1: every byte is a character, so binary junk or broken UTF-8 in a line cannot stop `.`
  // from matching across it.
  o.set_encoding(RE2::Options::EncodingLatin1);
  o.set_log_errors(false);
  o.set_never_nl(true);
  return o;
}

bool is_regex_meta(char c) {
  switch (c) {
    case '.':
    case '[':
    case ']':
    case '(':
    case ')':
    case '{':
    case '}':
    case '*':
    case '+':
    case '?':
    case '^':
    case '$':
    case '|':
      return true;
    default:
      return false;
  }
}

bool is_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// The plain string a pattern stands for, when it has no regex operators ("\[Ray\] HEAD timeout" is
// "[Ray] HEAD timeout"). A leading (?i) makes it a case-insensitive literal.
std::optional<std::string> plain_literal(std::string_view src, bool& icase) {
  icase = false;
  if (src.substr(0, 4) == "(?i)") {
    icase = true;
    src.remove_prefix(4);
  }
  std::string out;
  for (size_t i = 0; i < src.size(); ++i) {
    const char c = src[i];
    if (c == '\\') {
      if (i + 1 >= src.size()) return std::nullopt;
      const char n = src[i + 1];
      if (is_alnum(n)) return std::nullopt;  // \d, \b, \x41 ...
      out += n;
      ++i;
    } else if (is_regex_meta(c)) {
      return std::nullopt;
    } else {
      out += c;
    }
  }
  if (out.empty()) return std::nullopt;
  return out;
}

// Works out the required literals of one compiled pattern by probing RE2's prefilter: a set S of
// atoms is a cover when the prefilter rejects the pattern for a line that holds every atom except
// those in S (so a match must contain one of S). Starting from all atoms, drop short atoms while
// the rest still covers; long atoms are what the scanner searches for best.
std::vector<std::string> required_literals(const std::string& source, std::string& error) {
  re2::FilteredRE2 f(static_cast<int>(kMinTriggerLength));
  int id = 0;
  if (f.Add(source, pattern_options(), &id) != RE2::NoError) {
    error = "does not compile";
    return {};
  }
  std::vector<std::string> atoms;
  f.Compile(&atoms);
  auto passes_without = [&](const std::vector<bool>& in_cover) {
    std::vector<int> present;
    for (size_t i = 0; i < atoms.size(); ++i) {
      if (!in_cover[i]) present.push_back(static_cast<int>(i));
    }
    std::vector<int> potentials;
    f.AllPotentials(present, &potentials);
    return !potentials.empty();
  };
  std::vector<bool> cover(atoms.size(), true);
  if (atoms.empty() || passes_without(cover)) {
    error = "has no literal of at least " + std::to_string(kMinTriggerLength) +
            " characters that every match must contain; the scanner needs one (write the pattern "
            "around a "
            "distinctive fixed phrase)";
    return {};
  }
  std::vector<size_t> order(atoms.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (atoms[a].size() != atoms[b].size()) return atoms[a].size() < atoms[b].size();
    return atoms[a] < atoms[b];
  });
  for (const size_t i : order) {
    size_t remaining = 0;
    for (const bool b : cover)
      remaining += b ? 1 : 0;
    if (remaining == 1) break;
    cover[i] = false;
    if (passes_without(cover)) cover[i] = true;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < atoms.size(); ++i) {
    if (cover[i]) out.push_back(atoms[i]);
  }
  return out;
}

bool icase_find(std::string_view hay, std::string_view needle_lower) {
  if (needle_lower.empty()) return true;
  if (hay.size() < needle_lower.size()) return false;
  const char first = needle_lower[0];
  const char first_up = (first >= 'a' && first <= 'z') ? static_cast<char>(first - 32) : first;
  for (size_t i = 0; i + needle_lower.size() <= hay.size(); ++i) {
    const char c = hay[i];
    if (c != first && c != first_up) continue;
    size_t k = 1;
    for (; k < needle_lower.size(); ++k) {
      char h = hay[i + k];
      if (h >= 'A' && h <= 'Z') h = static_cast<char>(h + 32);
      if (h != needle_lower[k]) break;
    }
    if (k == needle_lower.size()) return true;
  }
  return false;
}

bool valid_class_id(std::string_view s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return false;
  }
  return true;
}

void compile_into(const RuleSection& sec, const RuleEntry& e, std::vector<CompiledPattern>& out,
                  std::vector<InputError>& errors) {
  std::string err;
  auto p = compile_pattern(e.value, err);
  if (!p) {
    errors.push_back(sec.error(e, err));
    return;
  }
  p->file = sec.file;
  p->line = e.line;
  out.push_back(std::move(*p));
}

std::optional<bool> parse_bool(std::string_view v) {
  if (v == "true" || v == "yes" || v == "1") return true;
  if (v == "false" || v == "no" || v == "0") return false;
  return std::nullopt;
}

std::optional<Derivation> parse_derivation(std::string_view v) {
  if (v == "stall") return Derivation::kStall;
  if (v == "no-evidence") return Derivation::kNoEvidence;
  // `true` is the older spelling of `evidence`, kept for site catalogs written before the roles.
  if (v == "evidence" || v == "true" || v == "yes") return Derivation::kEvidence;
  if (v == "false" || v == "no") return Derivation::kNone;
  return std::nullopt;
}

// A space-separated list of exit codes (0-255) into `out`; false on a bad one.
bool parse_exit_codes(const RuleEntry& e, std::vector<Declared<int>>& out) {
  bool any = false;
  for (const auto part : split(e.value, ' ')) {
    const auto word = trim(part);
    if (word.empty()) continue;
    const auto v = parse_int(word);
    if (!v || *v < 0 || *v > 255) return false;
    out.push_back({static_cast<int>(*v), e.line});
    any = true;
  }
  return any;
}

// The keys that say how the diagnosis treats a class (roles, exit codes, blame, playbooks).
// Returns false when `e` is not one of them.
bool load_class_property(const RuleSection& sec, const RuleEntry& e, SignatureClass& c,
                         std::vector<InputError>& errors) {
  if (e.key == "derived") {
    const auto d = parse_derivation(e.value);
    if (!d) {
      errors.push_back(sec.error(e, "expected stall, no-evidence, evidence (or true) or false"));
    } else {
      c.derived = *d;
    }
  } else if (e.key == "status") {
    if (e.value != "cancelled") {
      errors.push_back(sec.error(e, "expected cancelled (a cause class makes a job failed)"));
    } else {
      c.cancellation = true;
    }
  } else if (e.key == "exit-code") {
    if (!parse_exit_codes(e, c.exit_codes))
      errors.push_back(sec.error(e, "expected exit codes from 0 to 255, separated by spaces"));
  } else if (e.key == "task-end") {
    if (e.value == "signal") {
      c.task_end = TaskEnd::kSignal;
    } else if (e.value == "nonzero-exit") {
      c.task_end = TaskEnd::kNonzeroExit;
    } else {
      errors.push_back(sec.error(e, "expected signal or nonzero-exit"));
    }
  } else if (e.key == "traceback" || e.key == "heartbeat-check" || e.key == "generic") {
    const auto b = parse_bool(e.value);
    if (!b) {
      errors.push_back(sec.error(e, "expected true or false"));
    } else {
      (e.key == "traceback"         ? c.traceback
       : e.key == "heartbeat-check" ? c.heartbeat_check
                                    : c.generic) = *b;
    }
  } else if (e.key == "blame") {
    const auto b = parse_blame(e.value);
    if (!b) {
      errors.push_back(sec.error(e, "unknown blame '" + e.value +
                                        "' (expected user-code, user-config, input-data, "
                                        "platform, scheduler or unknown)"));
    } else {
      c.blame = *b;
    }
  } else if (e.key == "playbook") {
    if (!valid_class_id(e.value)) {
      errors.push_back(sec.error(e, "expected one playbook id"));
    } else {
      c.playbooks.push_back({e.value, e.line});
    }
  } else {
    return false;
  }
  return true;
}

const std::set<std::string>& signature_keys() {
  static const std::set<std::string> keys = {
      "title",        "priority",        "role",
      "stage",        "pattern",         "cause-pattern",
      "exclude",      "explains",        "derived",
      "status",       "exit-code",       "task-end",
      "traceback",    "heartbeat-check", "blame",
      "playbook",     "kernel-event",    "kernel-min-severity",
      "slurm-state",  "explain",         "next",
      "next-if-live", "example",         "counter-example",
      "blame-when",   "generic",         "kernel-blame"};
  return keys;
}

// A pattern that only runs on lines already found (an `exclude`, a `blame-when`), so it needs no
// trigger literal.
std::optional<CompiledPattern> compile_untriggered(const RuleSection& sec, const RuleEntry& e,
                                                   const std::string& source,
                                                   std::vector<InputError>& errors) {
  std::shared_ptr<const RE2> re = std::make_shared<RE2>(source, pattern_options());
  if (!re->ok()) {
    errors.push_back(sec.error(e, "does not compile: " + re->error()));
    return std::nullopt;
  }
  CompiledPattern p;
  p.source = source;
  p.file = sec.file;
  p.line = e.line;
  p.re = std::move(re);
  return p;
}

// `blame-when = BLAME RE2` into `out`.
void load_blame_when(const RuleSection& sec, const RuleEntry& e, std::vector<BlameRefinement>& out,
                     std::vector<InputError>& errors) {
  const size_t space = e.value.find(' ');
  const std::string word = e.value.substr(0, space);
  const std::string source =
      space == std::string::npos ? std::string() : std::string(trim(e.value.substr(space + 1)));
  const std::optional<Blame> blame = parse_blame(word);
  if (!blame || source.empty()) {
    errors.push_back(sec.error(e,
                               "expected 'BLAME PATTERN' (BLAME one of user-code, user-config, "
                               "input-data, platform, scheduler, unknown)"));
    return;
  }
  if (auto p = compile_untriggered(sec, e, source, errors))
    out.push_back(BlameRefinement{*blame, std::move(*p)});
}

// An `example` or `counter-example` line into `out`; an empty one is an error, since it would
// check nothing.
void load_example(const RuleSection& sec, const RuleEntry& e,
                  std::vector<Declared<std::string>>& out, std::vector<InputError>& errors) {
  if (e.value.empty()) {
    errors.push_back(sec.error(e, "expected a log line"));
  } else {
    out.push_back({e.value, e.line});
  }
}

// `named`: the classes some vocabulary entry names, which can be found with no pattern of their
// own.
std::optional<SignatureClass> load_signature(const RuleSection& sec,
                                             const std::set<std::string>& named,
                                             std::vector<InputError>& errors) {
  SignatureClass c;
  c.id = sec.id;
  c.title = sec.id;
  c.file = sec.file;
  c.line = sec.line;
  const size_t errors_before = errors.size();
  if (!valid_class_id(sec.id)) {
    errors.push_back(sec.error("class ids are lower-case letters, digits, '-', '_' and '.'"));
  }
  for (const auto& e : sec.entries) {
    if (signature_keys().count(e.key) == 0) {
      errors.push_back(sec.error(e, "unknown key (see the header of log-signatures.rules)"));
      continue;
    }
    if (c.line_of(e.key) == c.line) c.key_lines.push_back({e.key, e.line});
    if (e.key == "title") {
      c.title = e.value;
    } else if (e.key == "priority") {
      const auto v = parse_int(e.value);
      if (!v || *v < 0 || *v > 1000000) {
        errors.push_back(sec.error(e, "expected an integer from 0 to 1000000"));
      } else {
        c.priority = static_cast<int>(*v);
      }
    } else if (e.key == "role") {
      if (e.value == "cause") {
        c.role = ClassRole::kCause;
      } else if (e.value == "consequence") {
        c.role = ClassRole::kConsequence;
      } else if (e.value == "minor") {
        c.role = ClassRole::kMinor;
      } else {
        errors.push_back(sec.error(e, "expected cause, consequence or minor"));
      }
    } else if (e.key == "stage") {
      c.stage = e.value;
    } else if (e.key == "pattern" || e.key == "cause-pattern") {
      compile_into(sec, e, c.patterns, errors);
      if (e.key == "cause-pattern" && !c.patterns.empty() && c.patterns.back().line == e.line) {
        c.patterns.back().as_cause = true;
      }
    } else if (e.key == "exclude") {
      if (auto p = compile_untriggered(sec, e, e.value, errors))
        c.excludes.push_back(std::move(*p));
    } else if (e.key == "blame-when") {
      load_blame_when(sec, e, c.blame_when, errors);
    } else if (e.key == "example" || e.key == "counter-example") {
      load_example(sec, e, e.key == "example" ? c.examples : c.counter_examples, errors);
    } else if (e.key == "explains") {
      for (const auto part : split(e.value, ' ')) {
        const auto id = trim(part);
        if (!id.empty()) c.explains.emplace_back(id);
      }
    } else if (load_class_property(sec, e, c, errors)) {
      // one of the properties the diagnosis looks the class up by
    } else if (e.key == "kernel-event") {
      if (e.value.empty()) {
        errors.push_back(sec.error(e, "expected a kernel event kind"));
      } else {
        c.kernel_events.push_back(e.value);
      }
    } else if (e.key == "kernel-blame") {
      const auto b = parse_blame(e.value);
      if (!b) {
        errors.push_back(sec.error(e, "unknown blame '" + e.value + "' for kernel-blame"));
      } else {
        c.kernel_blame = *b;
      }
    } else if (e.key == "kernel-min-severity") {
      const auto s = parse_severity(e.value);
      if (!s) {
        errors.push_back(sec.error(e, "expected info, warning, error or critical"));
      } else {
        c.kernel_min_severity = *s;
      }
    } else if (e.key == "slurm-state") {
      const bool ok = !e.value.empty() && std::all_of(e.value.begin(), e.value.end(), [](char ch) {
        return (ch >= 'A' && ch <= 'Z') || ch == '_';
      });
      if (!ok) {
        errors.push_back(
            sec.error(e, "expected a Slurm job state in capitals (TIMEOUT, PREEMPTED, ...)"));
      } else {
        c.slurm_states.push_back(e.value);
      }
    } else if (e.key == "explain") {
      c.explain = e.value;
    } else if (e.key == "next" || e.key == "next-if-live") {
      c.next.push_back(SignatureClass::NextStep{e.value, e.key == "next-if-live"});
    }
  }
  if (!c.is_derived() && c.patterns.empty() && c.kernel_events.empty() && c.slurm_states.empty() &&
      named.count(c.id) == 0 && errors.size() == errors_before) {
    errors.push_back(
        sec.error("a class needs at least one pattern, a vocabulary entry or derived = true"));
  }
  if (c.explain.empty()) errors.push_back(sec.error("missing 'explain'"));
  if (errors.size() != errors_before) return std::nullopt;
  return c;
}

std::optional<HarmlessEntry> load_harmless(const RuleSection& sec,
                                           std::vector<InputError>& errors) {
  HarmlessEntry h;
  h.id = sec.id;
  h.file = sec.file;
  h.line = sec.line;
  const size_t errors_before = errors.size();
  for (const auto& e : sec.entries) {
    if (e.key == "pattern") {
      compile_into(sec, e, h.patterns, errors);
    } else if (e.key == "after") {
      if (auto p = compile_untriggered(sec, e, e.value, errors)) h.after.push_back(std::move(*p));
    } else if (e.key == "example") {
      load_example(sec, e, h.examples, errors);
    } else if (e.key == "example-before" && !h.example_before && !e.value.empty()) {
      h.example_before = Declared<std::string>{e.value, e.line};
    } else if (e.key == "example-before") {
      errors.push_back(sec.error(e, "expected one log line, given once"));
    } else if (e.key == "why") {
      h.why = e.value;
    } else {
      errors.push_back(sec.error(e,
                                 "unknown key (harmless sections take 'pattern', 'after', "
                                 "'example', 'example-before' and 'why')"));
    }
  }
  if (h.patterns.empty() && errors.size() == errors_before) {
    errors.push_back(sec.error("a harmless entry needs at least one pattern"));
  }
  if (h.after.empty() != !h.example_before && errors.size() == errors_before) {
    errors.push_back(
        sec.error("'after' and 'example-before' go together: the examples of a "
                  "two-line shape need the line before them"));
  }
  if (errors.size() != errors_before) return std::nullopt;
  return h;
}

}  // namespace

std::optional<CompiledPattern> compile_pattern(const std::string& source, std::string& error) {
  CompiledPattern p;
  p.source = source;
  auto re = std::make_shared<RE2>(source, pattern_options());
  if (!re->ok()) {
    error = "does not compile: " + re->error();
    return std::nullopt;
  }
  std::string why;
  p.required = required_literals(source, why);
  if (p.required.empty()) {
    error = why;
    return std::nullopt;
  }
  bool icase = false;
  if (auto lit = plain_literal(source, icase)) {
    p.literal = icase ? to_lower(*lit) : *lit;
    p.literal_icase = icase;
  } else {
    p.re = std::move(re);
  }
  return p;
}

bool pattern_matches(const CompiledPattern& p, std::string_view text,
                     std::vector<std::pair<std::string, std::string>>* captures) {
  if (!p.re) {
    return p.literal_icase ? icase_find(text, p.literal)
                           : text.find(p.literal) != std::string_view::npos;
  }
  const auto& groups = p.re->NamedCapturingGroups();
  if (captures == nullptr || groups.empty()) {
    return RE2::PartialMatch(re2::StringPiece(text.data(), text.size()), *p.re);
  }
  const int n = p.re->NumberOfCapturingGroups() + 1;
  std::vector<re2::StringPiece> sub(static_cast<size_t>(n));
  if (!p.re->Match(re2::StringPiece(text.data(), text.size()), 0, text.size(), RE2::UNANCHORED,
                   sub.data(), n)) {
    return false;
  }
  for (const auto& [name, idx] : groups) {
    const auto& s = sub[static_cast<size_t>(idx)];
    if (s.data() != nullptr) captures->emplace_back(name, std::string(s.data(), s.size()));
  }
  return true;
}

SignatureCatalog SignatureCatalog::from_sections(const std::vector<RuleSection>& sections,
                                                 std::vector<InputError>& errors) {
  SignatureCatalog cat;
  std::set<std::string> named;
  for (const auto& sec : sections) {
    if (sec.type != "vocab") continue;
    for (const RuleEntry* e : sec.all("class"))
      named.insert(e->value);
  }
  for (const auto& sec : sections) {
    if (sec.type == "signature") {
      if (auto c = load_signature(sec, named, errors)) cat.classes_.push_back(std::move(*c));
    } else if (sec.type == "harmless") {
      if (auto h = load_harmless(sec, errors)) cat.harmless_.push_back(std::move(*h));
    }
  }
  std::vector<std::string> ids;
  for (const auto& c : cat.classes_)
    ids.push_back(c.id);
  cat.vocab_ = load_vocabulary(sections, ids, errors);
  const size_t n = cat.classes_.size();
  cat.explains_.assign(n, std::vector<bool>(n, false));
  for (size_t a = 0; a < n; ++a) {
    for (const auto& target : cat.classes_[a].explains) {
      const int b = cat.index_of(target);
      if (b < 0) {
        errors.emplace_back(
            cat.classes_[a].file, cat.classes_[a].line,
            "[signature " + cat.classes_[a].id + "]: explains: unknown class '" + target + "'");
      } else if (static_cast<size_t>(b) != a) {
        cat.explains_[a][static_cast<size_t>(b)] = true;
      }
    }
  }
  return cat;
}

SignatureCatalog SignatureCatalog::load(const std::vector<std::string>& extra_layers,
                                        std::vector<InputError>& errors,
                                        std::vector<std::string>* files_read) {
  RulesLoad rl = load_rule_layers(default_rule_layers(extra_layers));
  for (auto& e : rl.errors)
    errors.push_back(std::move(e));
  if (files_read != nullptr) *files_read = rl.files;
  return from_sections(rl.sections, errors);
}

const SignatureClass* SignatureCatalog::find(std::string_view id) const {
  const int i = index_of(id);
  return i < 0 ? nullptr : &classes_[static_cast<size_t>(i)];
}

int SignatureCatalog::index_of(std::string_view id) const {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i].id == id) return static_cast<int>(i);
  }
  return -1;
}

bool SignatureCatalog::explains(int a, int b) const {
  if (a < 0 || b < 0) return false;
  const auto ua = static_cast<size_t>(a);
  const auto ub = static_cast<size_t>(b);
  return ua < explains_.size() && ub < explains_[ua].size() && explains_[ua][ub];
}

namespace {

template <typename Pred>
const SignatureClass* first_class(const std::vector<SignatureClass>& classes, Pred&& pred) {
  const auto it = std::find_if(classes.begin(), classes.end(), pred);
  return it == classes.end() ? nullptr : &*it;
}

}  // namespace

const SignatureClass* SignatureCatalog::derived_class(Derivation d) const {
  return first_class(classes_, [d](const SignatureClass& c) { return c.derived == d; });
}

const SignatureClass* SignatureCatalog::exit_code_class(int code) const {
  return first_class(classes_,
                     [code](const SignatureClass& c) { return c.claims_exit_code(code); });
}

const SignatureClass* SignatureCatalog::task_end_class(TaskEnd e) const {
  return first_class(classes_, [e](const SignatureClass& c) { return c.task_end == e; });
}

const SignatureClass* SignatureCatalog::slurm_state_class(std::string_view state) const {
  return first_class(classes_, [state](const SignatureClass& c) {
    return std::find(c.slurm_states.begin(), c.slurm_states.end(), state) != c.slurm_states.end();
  });
}

const SignatureClass* SignatureCatalog::traceback_class() const {
  return first_class(classes_, [](const SignatureClass& c) { return c.traceback; });
}

const SignatureClass* SignatureCatalog::heartbeat_class() const {
  return first_class(classes_, [](const SignatureClass& c) { return c.heartbeat_check; });
}

std::vector<std::string> SignatureCatalog::playbooks_for(std::string_view class_id) const {
  const SignatureClass* c = find(class_id);
  return c == nullptr ? std::vector<std::string>{} : c->playbook_ids();
}

}  // namespace triage
