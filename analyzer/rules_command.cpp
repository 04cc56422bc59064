// `slurm-triage rules`: check and list the log-signature catalog.
#include <cstdio>
#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "common/cli_registry.h"
#include "common/rules_file.h"

namespace triage {
namespace {

constexpr const char* kHelp = R"(usage: slurm-triage rules check [DIR ...]
       slurm-triage rules list [--rules DIR ...]

check   load every rule layer (the shipped catalogs, /etc/slurm/triage.d, then each DIR), compile
        every pattern, and print each problem as file:line: message. Exit 1 if there was any.
list    print the failure classes (id, priority, role, stage, title) and the known-harmless
        entries of the log-signature catalog.

exit status: 0 fine, 1 the catalog has errors, 2 usage error.
)";

std::string role_name(ClassRole r) {
  return std::string(to_string(r));
}

int check(const std::vector<std::string>& dirs) {
  std::vector<InputError> errors;
  std::vector<std::string> files;
  const SignatureCatalog cat = SignatureCatalog::load(dirs, errors, &files);
  for (const auto& e : errors)
    (void)std::printf("%s\n", e.what());
  size_t patterns = 0;
  for (const auto& c : cat.classes())
    patterns += c.patterns.size();
  for (const auto& h : cat.harmless())
    patterns += h.patterns.size();
  (void)std::fprintf(errors.empty() ? stdout : stderr,
                     "%zu file(s), %zu classes, %zu harmless entries, %zu patterns: %s\n",
                     files.size(), cat.classes().size(), cat.harmless().size(), patterns,
                     errors.empty() ? "ok" : (std::to_string(errors.size()) + " error(s)").c_str());
  return errors.empty() ? 0 : 1;
}

int list(const std::vector<std::string>& dirs) {
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load(dirs, errors);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "%s\n", e.what());
  (void)std::printf("%-20s %8s  %-11s %-16s %s\n", "CLASS", "PRIORITY", "ROLE", "STAGE", "TITLE");
  for (const auto& c : cat.classes()) {
    std::string stage = c.stage.empty() ? "-" : c.stage;
    (void)std::printf("%-20s %8d  %-11s %-16s %s%s\n", c.id.c_str(), c.priority,
                      role_name(c.role).c_str(), stage.c_str(), c.title.c_str(),
                      c.derived ? " (derived)" : "");
  }
  (void)std::printf("\n%-20s %s\n", "HARMLESS", "WHY");
  for (const auto& h : cat.harmless())
    (void)std::printf("%-20s %s\n", h.id.c_str(), h.why.c_str());
  return errors.empty() ? 0 : 1;
}

int run_rules(int argc, char** argv) {
  if (argc < 2) {
    (void)std::fputs(kHelp, stderr);
    return 2;
  }
  const std::string sub = argv[1];
  if (sub == "-h" || sub == "--help") {
    (void)std::fputs(kHelp, stdout);
    return 0;
  }
  std::vector<std::string> dirs;
  for (int i = 2; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      (void)std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--rules") {
      if (i + 1 >= argc) {
        (void)std::fprintf(stderr, "slurm-triage rules: --rules needs a directory\n");
        return 2;
      }
      dirs.emplace_back(argv[++i]);
    } else if (!a.empty() && a[0] == '-') {
      (void)std::fprintf(stderr, "slurm-triage rules: unknown option %s\n", a.c_str());
      return 2;
    } else {
      dirs.push_back(a);
    }
  }
  if (sub == "check") return check(dirs);
  if (sub == "list") return list(dirs);
  (void)std::fprintf(stderr, "slurm-triage rules: unknown subcommand '%s'\n\n%s", sub.c_str(),
                     kHelp);
  return 2;
}

}  // namespace
}  // namespace triage

TRIAGE_CLI_COMMAND(rules, "check or list the log-signature rules", triage::run_rules);
