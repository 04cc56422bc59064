// One /dev/kmsg record (header, message with \xNN escapes, dictionary lines) as the kernel or a
// file of saved records hands it over.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "collector/kmsg_record.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  std::string error;
  const auto rec = triage::collector::parse_kmsg_record(input, &error);
  if (rec) {
    if (rec->priority < 0 || rec->priority > 7) std::abort();
    if (rec->message.size() > input.size()) std::abort();
  } else if (error.empty()) {
    std::abort();  // a rejected record always says why
  }
  // Unescaping never grows the text: "\xNN" becomes one byte, everything else stays.
  if (triage::collector::unescape_kmsg(input).size() > input.size()) std::abort();
  return 0;
}
