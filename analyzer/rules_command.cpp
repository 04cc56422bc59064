// `slurm-triage rules`: check and list the log-signature catalog; check the kernel catalogs too.
#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/catalog_consistency.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/signature_examples.h"
#include "analyzer/tsdb/playbook_table.h"
#include "collector/kernel_pipeline.h"
#include "collector/kernel_rule_examples.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/rules_file.h"

namespace triage {
namespace {

constexpr const char* kHelp = R"(usage: slurm-triage rules check [DIR ...]
       slurm-triage rules list [--rules DIR ...]
       slurm-triage rules show CLASS [--rules DIR ...]

check   load every rule layer (the shipped catalogs, /etc/slurm/triage.d, then each DIR), compile
        every pattern, check that the classes agree with each other, run every example and
        counter-example line through the log scanner or the kernel classifier, and print each
        problem as file:line: message. Exit 1 if there was any.
list    print the failure classes (id, priority, role, blame, stage, title) and the
        known-harmless entries of the log-signature catalog.
show    print one failure class: its properties, patterns, example lines, explanation and next
        steps.

exit status: 0 fine, 1 the catalog has errors, 2 usage error.
)";

std::string role_name(ClassRole r) {
  return std::string(to_string(r));
}

struct KernelCheck {
  std::vector<InputError> errors;
  size_t rules = 0;
  size_t examples = 0;
};

// The kernel catalogs' load errors, else their examples' (collector/kernel_rule_examples.h).
KernelCheck check_kernel_catalogs(const std::vector<std::string>& dirs) {
  collector::KernelRulesLoad load = collector::load_kernel_rules(default_rule_layers(dirs));
  KernelCheck out;
  if (!load.errors.empty()) {
    out.errors = std::move(load.errors);
    return out;
  }
  out.rules = load.rules->rules().size();
  for (const auto& r : load.rules->rules())
    out.examples += r.examples.size() + r.counter_examples.size();
  for (const auto& h : load.rules->harmless_sections())
    out.examples += h.examples.size();
  out.errors = collector::check_kernel_examples(load.rules);
  return out;
}

int check(const std::vector<std::string>& dirs) {
  std::vector<InputError> errors;
  std::vector<std::string> files;
  const SignatureCatalog cat = SignatureCatalog::load(dirs, errors, &files);
  for (auto& e : check_catalog_consistency(cat, tsdb::known_playbook_ids()))
    errors.push_back(std::move(e));
  for (auto& e : check_signature_examples(cat))
    errors.push_back(std::move(e));
  KernelCheck kernel = check_kernel_catalogs(dirs);
  for (auto& e : kernel.errors) {
    const bool seen = std::any_of(errors.begin(), errors.end(), [&](const InputError& o) {
      return std::string_view(o.what()) == e.what();
    });
    if (!seen) errors.push_back(std::move(e));  // a file's syntax errors are both loads'
  }
  for (const auto& e : errors)
    (void)std::printf("%s\n", e.what());
  size_t patterns = 0;
  size_t examples = 0;
  for (const auto& c : cat.classes()) {
    patterns += c.patterns.size();
    examples += c.examples.size() + c.counter_examples.size();
  }
  for (const auto& h : cat.harmless()) {
    patterns += h.patterns.size();
    examples += h.examples.size();
  }
  (void)std::fprintf(
      errors.empty() ? stdout : stderr,
      "%zu file(s), %zu classes, %zu harmless entries, %zu patterns, %zu kernel rules, %zu example "
      "lines: %s\n",
      files.size(), cat.classes().size(), cat.harmless().size(), patterns, kernel.rules,
      examples + kernel.examples,
      errors.empty() ? "ok" : (std::to_string(errors.size()) + " error(s)").c_str());
  return errors.empty() ? 0 : 1;
}

int list(const std::vector<std::string>& dirs) {
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load(dirs, errors);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "%s\n", e.what());
  (void)std::printf("%-20s %8s  %-11s %-11s %-16s %s\n", "CLASS", "PRIORITY", "ROLE", "BLAME",
                    "STAGE", "TITLE");
  for (const auto& c : cat.classes()) {
    std::string stage = c.stage.empty() ? "-" : c.stage;
    (void)std::printf("%-20s %8d  %-11s %-11s %-16s %s%s\n", c.id.c_str(), c.priority,
                      role_name(c.role).c_str(), std::string(to_string(c.blame)).c_str(),
                      stage.c_str(), c.title.c_str(), c.is_derived() ? " (derived)" : "");
  }
  (void)std::printf("\n%-20s %s\n", "HARMLESS", "WHY");
  for (const auto& h : cat.harmless())
    (void)std::printf("%-20s %s\n", h.id.c_str(), h.why.c_str());
  return errors.empty() ? 0 : 1;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : " ") + s;
  return out.empty() ? "-" : out;
}

// The properties the diagnosis looks the class up by, one `key: value` line each.
void print_class_properties(const SignatureClass& c) {
  std::vector<std::string> codes;
  for (const auto& code : c.exit_codes)
    codes.push_back(std::to_string(code.value));
  const std::pair<const char*, std::string> rows[] = {
      {"title", c.title},
      {"defined", c.file + ":" + std::to_string(c.line)},
      {"priority", std::to_string(c.priority)},
      {"role", role_name(c.role)},
      {"blame", std::string(to_string(c.blame))},
      {"stage", c.stage.empty() ? "-" : c.stage},
      {"derived", std::string(to_string(c.derived))},
      {"status", c.cancellation ? "cancelled" : "-"},
      {"exit-code", joined(codes)},
      {"task-end", c.task_end == TaskEnd::kNone ? "-" : std::string(to_string(c.task_end))},
      {"traceback", c.traceback ? "true" : "false"},
      {"heartbeat-check", c.heartbeat_check ? "true" : "false"},
      {"playbook", joined(c.playbook_ids())},
      {"explains", joined(c.explains)},
      {"kernel-event", joined(c.kernel_events)},
      {"slurm-state", joined(c.slurm_states)},
  };
  for (const auto& [key, value] : rows)
    (void)std::printf("%-16s %s\n", key, value.c_str());
}

int show(const std::string& class_id, const std::vector<std::string>& dirs) {
  if (class_id.empty()) {
    (void)std::fprintf(stderr, "slurm-triage rules show: name a class (slurm-triage rules list)\n");
    return 2;
  }
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load(dirs, errors);
  for (const auto& e : errors)
    (void)std::fprintf(stderr, "%s\n", e.what());
  const SignatureClass* c = cat.find(class_id);
  if (c == nullptr) {
    (void)std::fprintf(stderr, "slurm-triage rules show: no class '%s' (slurm-triage rules list)\n",
                       class_id.c_str());
    return 1;
  }
  (void)std::printf("[signature %s]\n", c->id.c_str());
  print_class_properties(*c);
  for (const auto& p : c->patterns)
    (void)std::printf("%-16s %s\n", p.as_cause ? "cause-pattern" : "pattern", p.source.c_str());
  for (const auto& p : c->excludes)
    (void)std::printf("%-16s %s\n", "exclude", p.source.c_str());
  for (const auto& r : c->blame_when) {
    (void)std::printf("%-16s %s %s\n", "blame-when", std::string(to_string(r.blame)).c_str(),
                      r.pattern.source.c_str());
  }
  for (const auto& ex : c->examples)
    (void)std::printf("%-16s %s\n", "example", ex.value.c_str());
  for (const auto& ex : c->counter_examples)
    (void)std::printf("%-16s %s\n", "counter-example", ex.value.c_str());
  (void)std::printf("%-16s %s\n", "explain", c->explain.c_str());
  for (const auto& n : c->next)
    (void)std::printf("%-16s %s\n", n.live_only ? "next-if-live" : "next", n.text.c_str());
  return errors.empty() ? 0 : 1;
}

int run_rules(int argc, char** argv) {
  ArgCursor args(argc, argv);
  if (!args.next()) throw UsageError("give a subcommand: check, list or show");
  if (args.is_help()) {
    (void)std::fputs(kHelp, stdout);
    return 0;
  }
  const std::string sub = args.arg();
  std::vector<std::string> dirs;
  std::string class_id;  // `show`'s first operand
  while (args.next()) {
    const std::string& a = args.arg();
    if (args.is_help()) {
      (void)std::fputs(kHelp, stdout);
      return 0;
    }
    if (a == "--rules") {
      dirs.push_back(args.value());
    } else if (args.is_option()) {
      throw UsageError("unknown option " + a);
    } else if (sub == "show" && class_id.empty()) {
      class_id = a;
    } else {
      dirs.push_back(a);
    }
  }
  if (sub == "check") return check(dirs);
  if (sub == "list") return list(dirs);
  if (sub == "show") return show(class_id, dirs);
  throw UsageError("unknown subcommand '" + sub + "'");
}

}  // namespace
}  // namespace triage

TRIAGE_CLI_COMMAND(rules, "check or list the log-signature rules", triage::run_rules);
