// Kernel text as the collector reads it, end to end: either plain text (dmesg in its several
// shapes, journalctl -k, kern.log) through the text source, or saved /dev/kmsg records through the
// kmsg source, and every record through the classifier with the shipped kernel catalogs
// (multi-line call traces, floods, Xid cause tracking). The first byte chooses the path.
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "collector/kernel_line_parser.h"
#include "collector/kernel_pipeline.h"
#include "common/model.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

std::shared_ptr<const triage::collector::KernelRules> rules() {
  static const auto load = triage::collector::load_kernel_rules({triage::fuzz::source_rules_dir()});
  if (!load.rules) std::abort();
  return load.rules;
}

// The kmsg source opens a path; each fuzzing process keeps its own file.
std::string kmsg_file(std::string_view bytes) {
  static const std::string path = "/tmp/fuzz-kmsg-" + std::to_string(::getpid());
  const triage::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!fd) std::abort();
  if (!bytes.empty() && ::write(fd.get(), bytes.data(), bytes.size()) < 0) std::abort();
  return path;
}

void drain(triage::collector::KernelSource& source, triage::collector::KernelClassifier& c) {
  std::vector<triage::collector::KernelRecord> records;
  std::vector<triage::KernelEvent> events;
  for (int rounds = 0; rounds < 100000; ++rounds) {
    records.clear();
    const bool more = source.read(records, 0);
    for (const auto& r : records)
      c.feed(r, events);
    if (!more) break;
  }
  c.flush(events);
  (void)c.safe_resume_position();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view input = triage::fuzz::as_view(data + 1, size - 1);
  triage::collector::KernelClassifier classifier(rules(), "node001");
  try {
    if ((data[0] & 1) == 0) {
      const triage::UniqueFd fd = triage::fuzz::memfd_with(input);
      auto source = triage::collector::open_text_source(fd.get(), "fuzz");
      drain(*source, classifier);
    } else {
      triage::collector::KmsgOptions o;
      o.path = kmsg_file(input);
      auto source = triage::collector::open_kmsg_source(o);
      drain(*source, classifier);
    }
  } catch (const std::runtime_error&) {
    // Unrecoverable source errors are reported by the caller; not a finding.
  }
  // The prefix parser alone, on every line, with a fixed "now" (2026-11-21).
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(start, end - start);
    const auto p = triage::collector::parse_kernel_line(line, 1'795'262'400'000'000);
    if (p.message_offset > line.size()) std::abort();
    start = end + 1;
  }
  return 0;
}
