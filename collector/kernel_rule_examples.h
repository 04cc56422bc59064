// The kernel catalogs' own test lines, checked like the log catalog's
// (analyzer/signature_examples.h): every `example` of an opening [kernel-rule] must open an event
// of that rule, every `counter-example` must not; a refining rule's `example` must open an event of
// a rule it refines and be matched by all its `match` lines (its counter-examples must not be
// both); every `example` of a [kernel-harmless] section must be silenced by one of its own
// patterns. The verdict comes from the classifier itself (a one-line text input, dmesg or
// journalctl prefixes allowed), so an example passes exactly when a node's kernel log holding that
// line would be read that way.
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "collector/kernel_rules.h"
#include "common/error.h"
#include "common/model.h"

namespace triage::collector {

// What the classifier makes of one kernel line: its events, whether a harmless pattern silenced
// it, and the kernel's message with any dmesg/journalctl prefix removed. Throws std::system_error
// when the in-memory file cannot be made.
struct KernelLineVerdict {
  std::vector<KernelEvent> events;
  bool harmless = false;
  std::string message;
};
KernelLineVerdict classify_kernel_line(const std::shared_ptr<const KernelRules>& rules,
                                       std::string_view line);

// Every example and counter-example of the loaded kernel catalogs that the classifier does not
// read as its section says, each at the example's file and line with the reason; empty when all of
// them agree.
std::vector<InputError> check_kernel_examples(const std::shared_ptr<const KernelRules>& rules);

}  // namespace triage::collector
