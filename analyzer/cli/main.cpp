// slurm-triage: the command line. Subcommands come from the components (see
// common/cli_registry.h); this file only dispatches and prints the overview.
#include <cstdio>
#include <cstring>
#include <string>

#include "common/build_config.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"

namespace {

void print_usage(FILE* out) {
  (void)std::fprintf(
      out,
      "usage: slurm-triage <command> [options]\n"
      "\n"
      "Explains why a Slurm training job ended, from its log, its nodes' kernels and its metrics.\n"
      "\n"
      "commands:\n");
  for (const auto& c : triage::CliRegistry::all()) {
    (void)std::fprintf(out, "  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  }
  (void)std::fprintf(
      out,
      "\n"
      "Run 'slurm-triage <command> --help' for a command's options; 'man slurm-triage' "
      "for more.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    print_usage(stderr);
    return 2;
  }
  const std::string cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    print_usage(stdout);
    return 0;
  }
  if (cmd == "--version" || cmd == "-V") {
    std::printf("slurm-triage %s\n", triage::kVersion);
    return 0;
  }
  const triage::CliCommand* c = triage::CliRegistry::find(cmd);
  if (c == nullptr) {
    (void)std::fprintf(stderr, "slurm-triage: unknown command '%s'\n\n", cmd.c_str());
    print_usage(stderr);
    return 2;
  }
  try {
    return c->run(argc - 1, argv + 1);
  } catch (const triage::UsageError& e) {
    (void)std::fprintf(stderr, "slurm-triage %s: %s\n(see 'slurm-triage %s --help')\n", cmd.c_str(),
                       e.what(), cmd.c_str());
    return triage::kExitUsageError;
  }
}
