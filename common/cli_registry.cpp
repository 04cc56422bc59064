#include "common/cli_registry.h"

#include <algorithm>

namespace triage {

namespace {
// A function-local static: registrations run during static initialisation of other translation
// units, in no particular order.
std::vector<CliCommand>& registry() {
  static std::vector<CliCommand> commands;
  return commands;
}
}  // namespace

bool CliRegistry::add(CliCommand command) {
  registry().push_back(std::move(command));
  return true;
}

std::vector<CliCommand> CliRegistry::all() {
  std::vector<CliCommand> out = registry();
  std::sort(out.begin(), out.end(),
            [](const CliCommand& a, const CliCommand& b) { return a.name < b.name; });
  return out;
}

const CliCommand* CliRegistry::find(const std::string& name) {
  for (const auto& c : registry()) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

}  // namespace triage
