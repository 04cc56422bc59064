// Reads the kernel catalogs out of the rule layers and compiles them. Every problem is reported as
// "file:line: message" and makes the whole load fail: a typo must never quietly disable a rule.
#include <algorithm>
#include <set>

#include "collector/kernel_pipeline.h"
#include "collector/kernel_rules.h"
#include "common/rules_file.h"
#include "common/text.h"

namespace triage::collector {

namespace {

constexpr int kMaxGroups = 31;

RE2::Options pattern_options() {
  RE2::Options o;
  // Kernel text is bytes, not necessarily UTF-8; patterns are ASCII.
  o.set_encoding(RE2::Options::EncodingLatin1);
  o.set_log_errors(false);
  return o;
}

bool valid_group_name(const std::string& n) {
  if (n.empty() || !((n[0] >= 'a' && n[0] <= 'z') || n[0] == '_')) return false;
  return std::all_of(n.begin(), n.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

std::optional<bool> parse_bool(std::string_view v) {
  if (v == "yes" || v == "true") return true;
  if (v == "no" || v == "false") return false;
  return std::nullopt;
}

struct KeySpec {
  const char* name;
  bool repeatable;
};

}  // namespace

class KernelRulesBuilder {
 public:
  explicit KernelRulesBuilder(std::vector<InputError>& errors)
      : rules_(std::make_shared<KernelRules>()), errors_(errors) {}

  void add_lines(const RuleSection& s) {
    if (!check_keys(s, {{"pattern", true}})) return;
    auto& list = linesets_[s.id];
    list.clear();
    for (const auto* e : s.all("pattern"))
      list.push_back(e);
    if (list.empty())
      errors_.push_back(s.error("a kernel-lines section needs at least one pattern"));
  }

  void add_rule(const RuleSection& s) {
    if (!check_keys(s, {{"kind", false},
                        {"severity", false},
                        {"action", false},
                        {"remedy", false},
                        {"summary", false},
                        {"pattern", true},
                        {"unless", true},
                        {"continue", true},
                        {"end", true},
                        {"body", false},
                        {"max_lines", false},
                        {"gap", false},
                        {"fold", false},
                        {"catalog", false},
                        {"refines", true},
                        {"match", true},
                        {"example", true},
                        {"counter-example", true}})) {
      return;
    }
    KernelRule r;
    r.id = s.id;
    r.file = s.file;
    r.line = s.line;
    r.examples = examples(s, "example");
    r.counter_examples = examples(s, "counter-example");
    for (const auto* e : s.all("refines")) {
      for (const auto id : split(e->value, ' ')) {
        if (!trim(id).empty()) r.refines.emplace_back(trim(id));
      }
    }
    if (const auto* e = s.first("kind")) {
      r.kind = e->value;
      r.sets_kind = true;
      if (!is_kernel_event_kind(r.kind)) {
        return fail(s, *e, "unknown kind '" + r.kind + "' (see docs/protocol.md)");
      }
    }
    if (const auto* e = s.first("severity")) {
      const auto sev = parse_severity(e->value);
      if (!sev) return fail(s, *e, "must be info, warning, error or critical");
      r.severity = *sev;
      r.sets_severity = true;
    }
    if (const auto* e = s.first("action")) {
      if (!is_event_action(e->value)) {
        return fail(s, *e, "must be none, investigate, reset-gpu, drain or reboot-at-job-boundary");
      }
      r.action = e->value;
      r.sets_action = true;
    }
    if (const auto* e = s.first("remedy")) {
      if (!is_event_remedy(e->value)) return fail(s, *e, "must be reboot or none");
      r.remedy = e->value;
      r.sets_remedy = true;
    }
    if (const auto* e = s.first("summary")) {
      r.summary = e->value;
      r.sets_summary = true;
    }
    bool ok = compile_all(s, "pattern", r.patterns) && compile_all(s, "unless", r.unless) &&
              compile_all(s, "continue", r.continues) && compile_all(s, "end", r.ends) &&
              compile_all(s, "match", r.matches);
    if (!ok) return;

    if (r.is_refiner()) {
      for (const char* k : {"pattern", "unless", "continue", "end", "body", "max_lines", "gap",
                            "fold", "catalog"}) {
        if (const auto* e = s.first(k)) {
          return fail(s, *e, std::string("'") + k + "' has no meaning in a refining rule");
        }
      }
      if (r.matches.empty()) return fail(s, "a refining rule needs at least one 'match'");
    } else {
      if (const auto* e = s.first("match")) {
        return fail(s, *e, "'match' belongs to refining rules (add 'refines = <rule id>')");
      }
      if (r.kind.empty()) return fail(s, "a kernel-rule needs a 'kind'");
      if (r.patterns.empty()) return fail(s, "a kernel-rule needs at least one 'pattern'");
      if (!parse_shape(s, r)) return;
    }
    rules_->rules_.push_back(std::move(r));
  }

  void add_harmless(const RuleSection& s) {
    if (!check_keys(s, {{"pattern", true}, {"why", false}, {"example", true}})) return;
    if (s.all("pattern").empty()) return fail(s, "a kernel-harmless section needs a 'pattern'");
    KernelHarmless h;
    h.id = s.id;
    h.file = s.file;
    h.line = s.line;
    h.first_pattern = rules_->harmless_.size();
    h.examples = examples(s, "example");
    if (!compile_all(s, "pattern", rules_->harmless_)) return;
    h.patterns = rules_->harmless_.size() - h.first_pattern;
    rules_->harmless_sections_.push_back(std::move(h));
  }

  void add_xid(const RuleSection& s) {
    if (!check_keys(s, {{"meaning", false},
                        {"severity", false},
                        {"action", false},
                        {"fault", false},
                        {"remedy", false},
                        {"cause_within", false}})) {
      return;
    }
    XidInfo x;
    if (const auto* e = s.first("meaning")) x.meaning = e->value;
    if (!severity_and_action(s, "severity", "action", x.severity, x.action)) return;
    if (const auto* e = s.first("fault")) {
      static const std::set<std::string> kFaults = {"node", "application", "driver", "consequence"};
      if (kFaults.count(e->value) == 0) {
        return fail(s, *e, "must be node, application, driver or consequence");
      }
      x.fault = e->value;
    }
    if (const auto* e = s.first("remedy")) {
      if (!is_event_remedy(e->value)) return fail(s, *e, "must be reboot or none");
      x.remedy = e->value;
    }
    if (const auto* e = s.first("cause_within")) {
      const auto v = parse_double(e->value);
      if (!v || *v < 0 || *v > 86400) return fail(s, *e, "must be seconds (0..86400)");
      x.cause_within_usec = static_cast<int64_t>(*v * 1e6);
      rules_->longest_cause_window_ = std::max(rules_->longest_cause_window_, x.cause_within_usec);
    }
    if (s.id == "default") {
      rules_->xid_default_ = x;
      return;
    }
    const auto code = parse_int(s.id);
    if (!code || *code < 0) return fail(s, "an xid section's id is its code (or 'default')");
    rules_->xid_[*code] = x;
  }

  void add_ras_block(const RuleSection& s) {
    if (!check_keys(s, {{"meaning", false},
                        {"metric", false},
                        {"ue_severity", false},
                        {"ue_action", false},
                        {"ce_severity", false},
                        {"ce_action", false},
                        {"de_severity", false},
                        {"de_action", false}})) {
      return;
    }
    RasBlockInfo b;
    if (const auto* e = s.first("meaning")) b.meaning = e->value;
    if (const auto* e = s.first("metric")) b.metric = e->value;
    if (!severity_and_action(s, "ue_severity", "ue_action", b.severity[0], b.action[0]) ||
        !severity_and_action(s, "ce_severity", "ce_action", b.severity[1], b.action[1]) ||
        !severity_and_action(s, "de_severity", "de_action", b.severity[2], b.action[2])) {
      return;
    }
    if (s.id == "default") {
      rules_->ras_default_ = b;
    } else {
      rules_->ras_[to_lower(s.id)] = b;
    }
  }

  void add_cgroup_job(const RuleSection& s) {
    if (!check_keys(s, {{"pattern", true}})) return;
    std::vector<RulePattern> ps;
    if (!compile_all(s, "pattern", ps)) return;
    for (auto& p : ps) {
      const bool has_job = std::any_of(p.groups.begin(), p.groups.end(),
                                       [](const auto& g) { return g.first == "job_id"; });
      if (!has_job) return fail(s, "a cgroup-job pattern must capture (?P<job_id>...)");
      rules_->cgroup_job_.push_back(std::move(p));
    }
  }

  std::shared_ptr<const KernelRules> finish() {
    auto& rules = rules_->rules_;
    for (size_t i = 0; i < rules.size(); ++i) {
      for (const auto& target : rules[i].refines) {
        const auto it = std::find_if(rules.begin(), rules.end(), [&](const KernelRule& r) {
          return r.id == target && !r.is_refiner();
        });
        if (it == rules.end()) {
          errors_.emplace_back(
              rules[i].file, rules[i].line,
              "[kernel-rule " + rules[i].id + "] refines unknown rule '" + target + "'");
          continue;
        }
        it->refined_by.push_back(i);
      }
    }
    RE2::Options o = pattern_options();
    o.set_max_mem(int64_t{96} << 20);
    rules_->set_ = std::make_unique<RE2::Set>(o, RE2::UNANCHORED);
    auto add = [&](const RulePattern& p, int owner) {
      std::string err;
      if (rules_->set_->Add(p.re->pattern(), &err) < 0) {
        errors_.emplace_back(p.where, 0, "pattern does not combine: " + err);
      }
      rules_->set_owner_.push_back(owner);
    };
    for (size_t i = 0; i < rules.size(); ++i) {
      for (const auto& p : rules[i].patterns)
        add(p, static_cast<int>(i));
    }
    for (const auto& h : rules_->harmless_)
      add(h, -1);
    if (!rules_->set_->Compile()) {
      errors_.emplace_back("kernel rules", 0,
                           "the combined patterns do not compile (out of memory)");
    }
    if (!errors_.empty()) return nullptr;
    return rules_;
  }

 private:
  void fail(const RuleSection& s, const RuleEntry& e, const std::string& m) {
    errors_.push_back(s.error(e, m));
  }
  void fail(const RuleSection& s, const std::string& m) { errors_.push_back(s.error(m)); }

  // The section's `key` lines as examples; an empty one is an error, since it would check nothing.
  std::vector<KernelExample> examples(const RuleSection& s, const char* key) {
    std::vector<KernelExample> out;
    for (const auto* e : s.all(key)) {
      if (e->value.empty()) {
        fail(s, *e, "expected a kernel log line");
      } else {
        out.push_back({e->value, e->line});
      }
    }
    return out;
  }

  bool check_keys(const RuleSection& s, std::initializer_list<KeySpec> allowed) {
    bool ok = true;
    std::set<std::string> seen;
    for (const auto& e : s.entries) {
      const auto* spec = std::find_if(allowed.begin(), allowed.end(),
                                      [&](const KeySpec& k) { return e.key == k.name; });
      if (spec == allowed.end()) {
        fail(s, e, "unknown key in [" + s.type + " " + s.id + "]");
        ok = false;
      } else if (!spec->repeatable && !seen.insert(e.key).second) {
        fail(s, e, "given twice");
        ok = false;
      }
    }
    return ok;
  }

  bool compile(const RuleSection& s, const RuleEntry& e, const std::string& text,
               std::vector<RulePattern>& out) {
    RulePattern p;
    p.re = std::make_unique<RE2>(text, pattern_options());
    if (!p.re->ok()) {
      fail(s, e, p.re->error());
      return false;
    }
    if (p.re->NumberOfCapturingGroups() > kMaxGroups) {
      fail(s, e, "more than 31 capturing groups");
      return false;
    }
    for (const auto& [name, index] : p.re->NamedCapturingGroups()) {
      if (!valid_group_name(name)) {
        fail(s, e, "group name '" + name + "' must be lowercase letters, digits and _");
        return false;
      }
      p.groups.emplace_back(name, index);
    }
    p.where = s.file + ":" + std::to_string(e.line);
    out.push_back(std::move(p));
    return true;
  }

  bool compile_all(const RuleSection& s, const char* key, std::vector<RulePattern>& out) {
    bool ok = true;
    for (const auto* e : s.all(key)) {
      // "@name" pulls in a kernel-lines set (shared continuation shapes such as call traces).
      if (e->value.size() > 1 && e->value[0] == '@') {
        const auto it = linesets_.find(e->value.substr(1));
        if (it == linesets_.end()) {
          fail(s, *e, "no [kernel-lines " + e->value.substr(1) + "] section");
          ok = false;
          continue;
        }
        for (const auto* le : it->second)
          ok &= compile(s, *le, le->value, out);
        continue;
      }
      ok &= compile(s, *e, e->value, out);
    }
    return ok;
  }

  bool parse_shape(const RuleSection& s, KernelRule& r) {
    if (const auto* e = s.first("body")) {
      if (e->value == "listed") {
        r.body = RecordBody::kListed;
      } else if (e->value == "any") {
        r.body = RecordBody::kAny;
      } else {
        fail(s, *e, "must be listed or any");
        return false;
      }
    }
    if (const auto* e = s.first("max_lines")) {
      const auto v = parse_uint(e->value);
      if (!v || *v < 1 || *v > 1000000) {
        fail(s, *e, "must be 1..1000000");
        return false;
      }
      r.max_lines = static_cast<size_t>(*v);
    }
    if (const auto* e = s.first("gap")) {
      const auto v = parse_double(e->value);
      if (!v || *v <= 0 || *v > 3600) {
        fail(s, *e, "must be seconds (0..3600]");
        return false;
      }
      r.gap_usec = static_cast<int64_t>(*v * 1e6);
    }
    if (const auto* e = s.first("fold")) {
      const auto v = parse_bool(e->value);
      if (!v) {
        fail(s, *e, "must be yes or no");
        return false;
      }
      r.fold = *v;
    }
    if (const auto* e = s.first("catalog")) {
      const std::string& c = e->value;
      if (c == "xid") {
        r.catalog = CatalogRef::kXid;
      } else if (c == "ras-ue") {
        r.catalog = CatalogRef::kRasUe;
      } else if (c == "ras-ce") {
        r.catalog = CatalogRef::kRasCe;
      } else if (c == "ras-de") {
        r.catalog = CatalogRef::kRasDe;
      } else {
        fail(s, *e, "must be xid, ras-ue, ras-ce or ras-de");
        return false;
      }
      const char* needs = r.catalog == CatalogRef::kXid ? "code" : "block";
      for (const auto& p : r.patterns) {
        const bool has = std::any_of(p.groups.begin(), p.groups.end(),
                                     [&](const auto& g) { return g.first == needs; });
        if (!has) {
          fail(s, *e, c + " needs every pattern to capture (?P<" + needs + ">...)");
          return false;
        }
      }
    }
    return true;
  }

  bool severity_and_action(const RuleSection& s, const char* sev_key, const char* action_key,
                           Severity& sev, std::string& action) {
    if (const auto* e = s.first(sev_key)) {
      const auto v = parse_severity(e->value);
      if (!v) {
        fail(s, *e, "must be info, warning, error or critical");
        return false;
      }
      sev = *v;
    }
    if (const auto* e = s.first(action_key)) {
      if (!is_event_action(e->value)) {
        fail(s, *e, "must be none, investigate, reset-gpu, drain or reboot-at-job-boundary");
        return false;
      }
      action = e->value;
    }
    return true;
  }

  std::shared_ptr<KernelRules> rules_;
  std::vector<InputError>& errors_;
  std::map<std::string, std::vector<const RuleEntry*>> linesets_;
};

KernelRulesLoad load_kernel_rules(const std::vector<std::string>& layers) {
  RulesLoad raw = load_rule_layers(layers);
  KernelRulesLoad out;
  out.errors = std::move(raw.errors);
  KernelRulesBuilder b(out.errors);
  // Shared line sets first, so that rules may name them wherever they are defined.
  for (const auto& s : raw.sections) {
    if (s.type == "kernel-lines") b.add_lines(s);
  }
  for (const auto& s : raw.sections) {
    if (s.type == "kernel-rule") b.add_rule(s);
    if (s.type == "kernel-harmless") b.add_harmless(s);
    if (s.type == "xid") b.add_xid(s);
    if (s.type == "ras-block") b.add_ras_block(s);
    if (s.type == "cgroup-job") b.add_cgroup_job(s);
  }
  auto rules = b.finish();
  if (out.errors.empty()) out.rules = std::move(rules);
  return out;
}

}  // namespace triage::collector
