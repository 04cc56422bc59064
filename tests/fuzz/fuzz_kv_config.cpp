// triage.conf and --set overrides through the agent's real key specifications (every value
// type: strings, integers, booleans, durations, enums, paths, byte sizes), then the mapping of the
// values into the agent's settings.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/base/config.h"
#include "common/kv_config.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  triage::KvConfig cfg(triage::agent::agent_config_specs());
  const auto errors = cfg.parse(input, "triage.conf");
  (void)cfg.dump();
  // Each line as a command-line override as well.
  size_t start = 0;
  while (start < input.size()) {
    size_t end = input.find('\n', start);
    if (end == std::string_view::npos) end = input.size();
    (void)cfg.set(input.substr(start, end - start), "--set");
    start = end + 1;
  }
  const auto load = triage::agent::load_agent_config_text(std::string(input), "triage.conf");
  if (load.errors.empty() && !errors.empty()) std::abort();
  (void)triage::parse_duration_seconds(input);
  (void)triage::parse_byte_size(input);
  (void)triage::parse_bool_word(input);
  return 0;
}
