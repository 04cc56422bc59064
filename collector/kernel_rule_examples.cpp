#include "collector/kernel_rule_examples.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "collector/kernel_pipeline.h"
#include "common/safe_io.h"

namespace triage::collector {

KernelLineVerdict classify_kernel_line(const std::shared_ptr<const KernelRules>& rules,
                                       std::string_view line) {
  // An in-memory file read by the text source, so the line meets the same prefix parsing and
  // classifier as `slurm-triage kernel`: there is no second matcher to drift from them.
  UniqueFd fd(::memfd_create("slurm-triage-kernel-example", MFD_CLOEXEC));
  if (fd.get() < 0) throw_errno("memfd_create", errno);
  write_all(fd.get(), line);
  write_all(fd.get(), "\n");
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) throw_errno("lseek", errno);
  const std::unique_ptr<KernelSource> source = open_text_source(fd.get(), "example");
  KernelClassifier classifier(rules, "example");
  KernelLineVerdict v;
  std::vector<KernelRecord> batch;
  while (true) {
    batch.clear();
    const bool more = source->read(batch, 0);
    for (const auto& r : batch) {
      if (v.message.empty()) v.message = std::string(r.message());
      classifier.feed(r, v.events);
    }
    if (!more || batch.empty()) break;
  }
  classifier.flush(v.events);
  v.harmless = classifier.stats().harmless > 0;
  return v;
}

namespace {

std::string at(const std::string& file, int line) {
  return file + ":" + std::to_string(line);
}

const KernelRule* rule_named(const KernelRules& rules, const std::string& id) {
  const auto it = std::find_if(rules.rules().begin(), rules.rules().end(),
                               [&](const KernelRule& r) { return r.id == id && !r.is_refiner(); });
  return it == rules.rules().end() ? nullptr : &*it;
}

// What the classifier made of a line, for messages: the events' rules, or the harmless silence.
std::string reading(const KernelRules& rules, const KernelLineVerdict& v) {
  if (v.events.empty())
    return v.harmless ? "a kernel-harmless pattern silences it" : "it opens no event";
  std::string out = "it opens ";
  for (size_t i = 0; i < v.events.size(); ++i) {
    const KernelRule* r = rule_named(rules, v.events[i].rule);
    out += (i > 0 ? ", " : "") + std::string("[kernel-rule ") + v.events[i].rule + "]" +
           (r != nullptr ? " (" + at(r->file, r->line) + ")" : "");
  }
  return out;
}

bool opens(const KernelLineVerdict& v, const std::string& rule_id) {
  return std::any_of(v.events.begin(), v.events.end(),
                     [&](const KernelEvent& e) { return e.rule == rule_id; });
}

// A refining rule applies to the one-line record when it opened an event of a rule it refines and
// every `match` matches the line.
bool refines(const KernelRule& r, const KernelLineVerdict& v) {
  const bool refined_rule = std::any_of(r.refines.begin(), r.refines.end(),
                                        [&](const std::string& id) { return opens(v, id); });
  const re2::StringPiece text(v.message.data(), v.message.size());
  return refined_rule && std::all_of(r.matches.begin(), r.matches.end(), [&](const RulePattern& m) {
           return RE2::PartialMatch(text, *m.re);
         });
}

bool applies(const KernelRule& r, const KernelLineVerdict& v) {
  return r.is_refiner() ? refines(r, v) : opens(v, r.id);
}

void check_rule(const std::shared_ptr<const KernelRules>& rules, const KernelRule& r,
                std::vector<InputError>& errors) {
  const std::string section = "[kernel-rule " + r.id + "]: ";
  const char* want = r.is_refiner() ? "not refined by this rule: " : "no event of this rule: ";
  for (const auto& ex : r.examples) {
    const KernelLineVerdict v = classify_kernel_line(rules, ex.text);
    if (!applies(r, v))
      errors.emplace_back(r.file, ex.line, section + "example: " + want + reading(*rules, v));
  }
  for (const auto& ex : r.counter_examples) {
    const KernelLineVerdict v = classify_kernel_line(rules, ex.text);
    if (applies(r, v)) {
      errors.emplace_back(
          r.file, ex.line,
          section + "counter-example: " +
              (r.is_refiner() ? "this rule refines its event" : reading(*rules, v)));
    }
  }
}

void check_harmless(const std::shared_ptr<const KernelRules>& rules, const KernelHarmless& h,
                    std::vector<InputError>& errors) {
  for (const auto& ex : h.examples) {
    const KernelLineVerdict v = classify_kernel_line(rules, ex.text);
    const bool own = rules->harmless_matches(h, v.message);
    if (own && v.harmless && v.events.empty()) continue;
    errors.emplace_back(h.file, ex.line,
                        "[kernel-harmless " + h.id + "]: example: not silenced by this section: " +
                            (own ? "" : "no pattern of the section matches it; ") +
                            reading(*rules, v));
  }
}

}  // namespace

std::vector<InputError> check_kernel_examples(const std::shared_ptr<const KernelRules>& rules) {
  std::vector<InputError> errors;
  if (!rules) return errors;
  for (const auto& r : rules->rules())
    check_rule(rules, r, errors);
  for (const auto& h : rules->harmless_sections())
    check_harmless(rules, h, errors);
  return errors;
}

}  // namespace triage::collector
