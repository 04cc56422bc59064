// The SPANK plugin's plugstack.conf arguments, the --triage value and the %n node pattern. The
// plugin runs inside slurmd/slurmstepd, so a crash here would take a node's jobs with it.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "spank/plugin_config.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

void count_error(const char* message, void* ctx) {
  if (message == nullptr || *message == '\0') std::abort();
  ++*static_cast<int*>(ctx);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Arguments split on spaces as slurmd does; the first argument doubles as the node name.
  const std::string input(triage::fuzz::as_view(data, size));
  std::vector<std::string> words;
  size_t start = 0;
  while (start <= input.size()) {
    size_t end = input.find(' ', start);
    if (end == std::string::npos) end = input.size();
    words.push_back(input.substr(start, end - start));
    start = end + 1;
  }
  std::vector<const char*> argv;
  for (const auto& w : words)
    argv.push_back(w.c_str());
  triage::spank::PluginConfig cfg;
  int reported = 0;
  const int rejected = triage::spank::parse_plugin_args(static_cast<int>(argv.size()), argv.data(),
                                                        &cfg, count_error, &reported);
  if (rejected != reported) std::abort();
  if (cfg.socket_path[sizeof cfg.socket_path - 1] != '\0') std::abort();
  if (cfg.inbox_dir[sizeof cfg.inbox_dir - 1] != '\0') std::abort();

  triage::spank::PluginConfig node_cfg;
  triage::spank::config_for_node(cfg, argv[0], &node_cfg);
  char small[16];
  if (triage::spank::expand_node_pattern(input.c_str(), argv.back(), small, sizeof small) &&
      std::strlen(small) >= sizeof small)
    std::abort();
  triage::spank::Mode mode{};
  (void)triage::spank::parse_mode(argv[0], &mode);
  return 0;
}
