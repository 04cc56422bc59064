#include "analyzer/catalog_consistency.h"

#include <algorithm>
#include <functional>
#include <map>

namespace triage {

namespace {

InputError field_error(const SignatureClass& c, std::string_view key, const std::string& message) {
  return InputError(c.file, c.line_of(key),
                    "[signature " + c.id + "]: " + std::string(key) + ": " + message);
}

std::string where(const SignatureClass& c, std::string_view key) {
  return "[signature " + c.id + "] (" + c.file + ":" + std::to_string(c.line_of(key)) + ")";
}

// A role the diagnosis asks the catalog for by property: at most one class may play it, and
// `required` ones must be played.
struct UniqueRole {
  std::string_view key;
  std::string what;
  std::function<bool(const SignatureClass&)> plays;
  bool required;
};

std::vector<UniqueRole> unique_roles() {
  return {
      {"derived", "derived = stall (the hang found from step progress)",
       [](const SignatureClass& c) { return c.derived == Derivation::kStall; }, true},
      {"derived", "derived = no-evidence (a death nothing explains)",
       [](const SignatureClass& c) { return c.derived == Derivation::kNoEvidence; }, true},
      {"task-end", "task-end = signal",
       [](const SignatureClass& c) { return c.task_end == TaskEnd::kSignal; }, false},
      {"task-end", "task-end = nonzero-exit",
       [](const SignatureClass& c) { return c.task_end == TaskEnd::kNonzeroExit; }, false},
      {"traceback", "traceback = true", [](const SignatureClass& c) { return c.traceback; }, false},
      {"heartbeat-check", "heartbeat-check = true",
       [](const SignatureClass& c) { return c.heartbeat_check; }, false},
  };
}

void check_unique_roles(const SignatureCatalog& catalog, std::vector<InputError>& errors) {
  for (const auto& role : unique_roles()) {
    const SignatureClass* first = nullptr;
    for (const auto& c : catalog.classes()) {
      if (!role.plays(c)) continue;
      if (first == nullptr) {
        first = &c;
      } else {
        errors.push_back(field_error(c, role.key,
                                     "only one class may declare " + role.what + "; " +
                                         where(*first, role.key) + " already does"));
      }
    }
    if (first == nullptr && role.required && !catalog.classes().empty()) {
      const SignatureClass& any = catalog.classes().front();
      errors.emplace_back(any.file, 0,
                          "no class declares " + role.what + "; the diagnosis needs one");
    }
  }
}

void check_exit_codes(const SignatureCatalog& catalog, std::vector<InputError>& errors) {
  std::map<int, const SignatureClass*> owner;
  for (const auto& c : catalog.classes()) {
    for (const auto& code : c.exit_codes) {
      const auto [it, fresh] = owner.emplace(code.value, &c);
      if (fresh || it->second == &c) continue;
      errors.emplace_back(c.file, code.line,
                          "[signature " + c.id + "]: exit-code: " + std::to_string(code.value) +
                              " is already claimed by " + where(*it->second, "exit-code"));
    }
  }
}

void check_class(const SignatureClass& c, const std::vector<std::string>& known_playbooks,
                 std::vector<InputError>& errors) {
  if (c.is_derived() && !c.patterns.empty()) {
    errors.push_back(field_error(c, "derived",
                                 "a derived class has no log patterns (remove the patterns, or "
                                 "derived)"));
  }
  for (const auto& p : c.playbooks) {
    if (std::find(known_playbooks.begin(), known_playbooks.end(), p.value) != known_playbooks.end())
      continue;
    std::string known;
    for (const auto& k : known_playbooks)
      known += (known.empty() ? "" : ", ") + k;
    errors.emplace_back(c.file, p.line,
                        "[signature " + c.id + "]: playbook: unknown playbook '" + p.value +
                            "' (known: " + known + ")");
  }
  for (const auto& target : c.explains) {
    if (target == c.id)
      errors.push_back(field_error(c, "explains", "a class cannot explain itself"));
  }
}

}  // namespace

std::vector<InputError> check_catalog_consistency(const SignatureCatalog& catalog,
                                                  const std::vector<std::string>& known_playbooks) {
  std::vector<InputError> errors;
  for (const auto& c : catalog.classes())
    check_class(c, known_playbooks, errors);
  check_unique_roles(catalog, errors);
  check_exit_codes(catalog, errors);
  return errors;
}

}  // namespace triage
