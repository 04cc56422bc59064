// The job log scanner over arbitrary bytes (binary junk, huge lines, invalid UTF-8), with the
// shipped signature catalog and small blocks so that lines straddle block boundaries; then the
// line normaliser (task labels, [rankN]: prefixes, leading timestamps) on every line.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "analyzer/line_text.h"
#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "common/rules_file.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

const triage::ScanPlan& plan() {
  static const triage::SignatureCatalog catalog = [] {
    std::vector<triage::InputError> errors;
    const auto load = triage::load_rule_layers({triage::fuzz::source_rules_dir()});
    auto c = triage::SignatureCatalog::from_sections(load.sections, errors);
    if (!load.errors.empty() || !errors.empty()) std::abort();
    return c;
  }();
  static const triage::ScanPlan p(catalog);
  return p;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  triage::ScanOptions options;
  // The first byte picks the block size (64 B .. 16 KiB) and the head/tail sizes, so that the
  // fuzzer explores block-boundary handling that a 1 MiB block would never reach.
  const size_t knob = size > 0 ? data[0] : 0;
  options.block_bytes = size_t{64} << (knob % 9);
  options.head_lines = knob % 5;
  options.tail_lines = (knob >> 3) % 7;
  options.line_copy_bytes = 1 + knob % 300;
  options.evidence_bytes = 1 + knob % 200;
  options.year_hint = 2026;
  options.max_bytes = (knob & 0x80) != 0 ? size / 2 : 0;
  const triage::UniqueFd fd = triage::fuzz::memfd_with(input);
  const triage::ScanResult r = triage::scan_log(fd.get(), plan(), options);
  if (r.bytes_scanned > size) std::abort();
  if (r.head.size() > options.head_lines || r.tail.size() > options.tail_lines) std::abort();

  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const triage::LineText lt = triage::split_line(input.substr(start, end - start));
    // The text is a piece of the raw line, never something outside it.
    if (lt.text.size() > lt.raw.size()) std::abort();
    (void)triage::leading_timestamp_usec(lt.text, 2026);
    (void)triage::leading_timestamp_usec(lt.text, 0);
    start = end + 1;
  }
  return 0;
}
