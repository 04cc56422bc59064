// The `slurm-triage` command line gathers its subcommands from the components that implement
// them (analyze and rules from the analyzer, kernel from the collector, nodes from the agent), so
// that no component has to know about the others. A component registers a command from an OBJECT
// library linked into the CLI:
//
//   TRIAGE_CLI_COMMAND(kernel, "classify kernel log text (dmesg, journalctl -k)", run_kernel);
#pragma once

#include <string>
#include <vector>

namespace triage {

struct CliCommand {
  std::string name;
  std::string summary;
  // argv[0] is the subcommand's name; returns the process exit code.
  int (*run)(int argc, char** argv) = nullptr;
};

class CliRegistry {
 public:
  static bool add(CliCommand command);
  // Sorted by name.
  static std::vector<CliCommand> all();
  static const CliCommand* find(const std::string& name);
};

}  // namespace triage

#define TRIAGE_CLI_COMMAND(name, summary, fn)                       \
  [[maybe_unused]] static const bool triage_cli_registered_##name = \
      ::triage::CliRegistry::add({#name, summary, fn})
