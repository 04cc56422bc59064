#include "analyzer/signature_examples.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>

#include "analyzer/line_text.h"
#include "common/safe_io.h"

namespace triage {

namespace {

ScanResult scan_text(const ScanPlan& plan, std::string_view text) {
  // An in-memory file, so the lines go through scan_log itself: there is no second matcher to
  // drift from the scanner.
  UniqueFd fd(::memfd_create("slurm-triage-example", MFD_CLOEXEC));
  if (fd.get() < 0) throw_errno("memfd_create", errno);
  write_all(fd.get(), text);
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) throw_errno("lseek", errno);
  ScanOptions options;
  options.head_lines = 0;
  options.tail_lines = 0;
  options.block_bytes = size_t{64} * 1024;
  options.collect_facts = false;
  return scan_log(fd.get(), plan, options);
}

}  // namespace

LineVerdict classify_line(const ScanPlan& plan, std::string_view line,
                          std::optional<std::string_view> before) {
  const std::string text =
      (before ? std::string(*before) + "\n" : std::string()) + std::string(line) + "\n";
  const ScanResult scanned = scan_text(plan, text);
  const int64_t line_no = before ? 2 : 1;
  LineVerdict v;
  for (size_t i = 0; i < scanned.classes.size() && v.cls < 0; ++i) {
    for (const Finding& f : scanned.classes[i].first) {
      if (f.line != line_no) continue;
      v.cls = static_cast<int>(i);
      v.vocabulary = f.vocabulary;
      break;
    }
  }
  // What the line before alone silences is not the line's doing.
  const std::vector<uint64_t> alone =
      before ? scan_text(plan, std::string(*before) + "\n").harmless_counts
             : std::vector<uint64_t>(scanned.harmless_counts.size(), 0);
  for (size_t i = 0; i < scanned.harmless_counts.size() && v.harmless < 0; ++i) {
    if (scanned.harmless_counts[i] > alone[i]) v.harmless = static_cast<int>(i);
  }
  return v;
}

namespace {

std::string at(const std::string& file, int line) {
  return file + ":" + std::to_string(line);
}

// The first of `patterns` that matches the line as the scanner sees it (decorations removed), or
// null. Only explains a verdict; the verdict itself is classify_line's.
const CompiledPattern* first_match(const std::vector<CompiledPattern>& patterns,
                                   std::string_view line) {
  const std::string_view text = split_line(line).text;
  for (const auto& p : patterns) {
    if (pattern_matches(p, text)) return &p;
  }
  return nullptr;
}

std::string scanner_reading(const SignatureCatalog& catalog, const LineVerdict& v) {
  if (v.harmless >= 0) {
    const HarmlessEntry& h = catalog.harmless()[static_cast<size_t>(v.harmless)];
    return "it is silenced by [harmless " + h.id + "] (" + at(h.file, h.line) + ")";
  }
  if (v.cls >= 0) {
    const SignatureClass& c = catalog.classes()[static_cast<size_t>(v.cls)];
    return "the scanner reads it as [signature " + c.id + "] (priority " +
           std::to_string(c.priority) + ", " + at(c.file, c.line) + ")";
  }
  return "the scanner finds nothing in it";
}

// Why an example of `c` is not a finding of it: its own patterns first, then what took the line.
std::string why_not_found(const SignatureCatalog& catalog, const SignatureClass& c,
                          std::string_view line, const LineVerdict& v) {
  if (first_match(c.patterns, line) == nullptr)
    return "no pattern of the class matches it; " + scanner_reading(catalog, v);
  if (const CompiledPattern* ex = first_match(c.excludes, line))
    return "the exclude at line " + std::to_string(ex->line) + " removes it; " +
           scanner_reading(catalog, v);
  return scanner_reading(catalog, v) + " first";
}

void check_class(const SignatureCatalog& catalog, const ScanPlan& plan, size_t index,
                 std::vector<InputError>& errors) {
  const SignatureClass& c = catalog.classes()[index];
  auto fail = [&](const Declared<std::string>& ex, std::string_view key, const std::string& why) {
    errors.emplace_back(c.file, ex.line,
                        "[signature " + c.id + "]: " + std::string(key) + ": " + why);
  };
  if (c.patterns.empty()) {
    for (const auto& ex : c.examples)
      fail(ex, "example", "the class has no patterns, so no log line can be a finding of it");
    return;
  }
  for (const auto& ex : c.examples) {
    const LineVerdict v = classify_line(plan, ex.value);
    if (v.cls != static_cast<int>(index))
      fail(ex, "example", "not a finding of this class: " + why_not_found(catalog, c, ex.value, v));
  }
  for (const auto& ex : c.counter_examples) {
    if (classify_line(plan, ex.value).cls != static_cast<int>(index)) continue;
    const CompiledPattern* p = first_match(c.patterns, ex.value);
    fail(ex, "counter-example",
         "the scanner reads it as a finding of this class" +
             (p == nullptr ? std::string()
                           : " (the pattern at line " + std::to_string(p->line) + " matches it)"));
  }
}

void check_harmless(const SignatureCatalog& catalog, const ScanPlan& plan, const HarmlessEntry& h,
                    std::vector<InputError>& errors) {
  std::optional<std::string_view> before;
  if (h.example_before) before = h.example_before->value;
  for (const auto& ex : h.examples) {
    const LineVerdict v = classify_line(plan, ex.value, before);
    const bool own = first_match(h.patterns, ex.value) != nullptr;
    if (own && v.harmless >= 0) continue;
    errors.emplace_back(h.file, ex.line,
                        "[harmless " + h.id + "]: example: not silenced by this entry: " +
                            (own ? "" : "no pattern of the entry matches it; ") +
                            scanner_reading(catalog, v));
  }
}

void check_vocab_group(const SignatureCatalog& catalog, const ScanPlan& plan, const VocabGroup& g,
                       std::vector<InputError>& errors) {
  for (const auto& ex : g.examples) {
    const LineVerdict v = classify_line(plan, ex.line);
    const bool ours = v.vocabulary.rfind(g.id + ".", 0) == 0;
    const int want = catalog.index_of(ex.cls);
    if (v.cls == want && ours) continue;
    std::string why;
    if (v.cls == want) {
      why = "read as " + ex.cls + " but not through this group's tokens" +
            (v.vocabulary.empty() ? std::string(" (a pattern matched it)")
                                  : " (through [vocab " + v.vocabulary + "])");
    } else {
      why = "not a finding of " + ex.cls + ": " + scanner_reading(catalog, v) +
            (v.vocabulary.empty() ? std::string() : " through [vocab " + v.vocabulary + "]");
    }
    errors.emplace_back(g.file, ex.line_no, "[vocab-group " + g.id + "]: example: " + why);
  }
}

}  // namespace

std::vector<InputError> check_signature_examples(const SignatureCatalog& catalog) {
  const ScanPlan plan(catalog);
  std::vector<InputError> errors;
  for (size_t i = 0; i < catalog.classes().size(); ++i)
    check_class(catalog, plan, i, errors);
  for (const auto& h : catalog.harmless())
    check_harmless(catalog, plan, h, errors);
  for (const auto& g : catalog.vocabulary().groups)
    check_vocab_group(catalog, plan, g, errors);
  return errors;
}

}  // namespace triage
