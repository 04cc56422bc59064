// Rule catalogs are data admins (and --rules DIR users) write: the file format, then both
// loaders that build on it (log signatures and the kernel catalogs, with their RE2 patterns).
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "collector/kernel_pipeline.h"
#include "common/rules_file.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  const triage::RulesLoad load = triage::parse_rules_text(input, "fuzz.rules");
  for (const auto& s : load.sections) {
    if (s.line <= 0) std::abort();
  }
  std::vector<triage::InputError> errors;
  (void)triage::SignatureCatalog::from_sections(load.sections, errors);

  // The kernel loader reads layers from files.
  static const std::string path = "/tmp/fuzz-rules-" + std::to_string(::getpid()) + ".rules";
  {
    const triage::UniqueFd fd(
        ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (!fd) std::abort();
    if (!input.empty() && ::write(fd.get(), input.data(), input.size()) < 0) std::abort();
  }
  (void)triage::collector::load_kernel_rules({path});
  return 0;
}
