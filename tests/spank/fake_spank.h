// The part of Slurm a SPANK plugin calls into (spank_get_item, spank_option_register, slurm_error,
// ...), implemented in the test executable so that the real spank_triage.so can be dlopen()ed and
// driven outside slurmstepd. The executable must export these symbols (ENABLE_EXPORTS).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include <slurm/spank.h>
}

namespace triage::testing {

struct RegisteredOption {
  std::string name;
  std::string arginfo;
  std::string usage;
  int has_arg = 0;
  spank_opt_cb_f cb = nullptr;
};

// What the host process looks like to the plugin. Reset between tests.
struct FakeSpank {
  spank_context_t context = S_CTX_REMOTE;
  std::map<spank_item_t, int64_t> items;             // absent = ESPANK_NOT_AVAIL
  std::map<std::string, std::string> job_env;        // spank_getenv
  std::map<std::string, std::string> control_env;    // spank_job_control_setenv
  std::optional<std::string> getopt_value;           // spank_option_getopt: absent = not given
  bool getopt_null_arg = false;                      // getopt succeeds with a NULL optarg
  std::map<std::string, std::string> other_options;  // getopt of options other than --triage
  std::vector<RegisteredOption> options;
  std::vector<std::string> log;  // "error: ...", "debug: ...", "info: ..."

  void reset() { *this = FakeSpank(); }
  bool logged(const std::string& needle) const;
};

FakeSpank& fake_spank();
spank_t fake_handle();

}  // namespace triage::testing
