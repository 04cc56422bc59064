// The catalog's own test lines, checked the way Prometheus rule tests or NPD's fixtures check
// theirs: every `example` of a [signature] must be a finding of that class, every
// `counter-example` must not be, and every `example` of a [harmless] entry must be silenced. The
// verdict comes from the scanner itself (scan_log over a one-line log), so an example passes
// exactly when a job log holding that line would be read that way: priorities, `exclude` lines,
// harmless entries of every layer, srun labels and colour codes included.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "common/error.h"

namespace triage {

// What the scanner makes of one line: the class it becomes a finding of, or the harmless entry
// that silenced it (indices into the plan's catalog; -1 for none).
struct LineVerdict {
  int cls = -1;
  int harmless = -1;
  std::string vocabulary;  // the vocabulary entry that named `cls`, when one did
};

// Scans `line` as a log of that one line with `plan`, or of two lines when `before` is given (for a
// harmless shape two lines long); the verdict is about `line`. Throws std::system_error when the
// in-memory file cannot be made.
LineVerdict classify_line(const ScanPlan& plan, std::string_view line,
                          std::optional<std::string_view> before = std::nullopt);

// Every example and counter-example of `catalog` that the scanner does not read as its section
// says, each at the example's file and line with the reason; empty when all of them agree. A
// vocabulary group's examples must be read as their class through one of the group's own entries.
std::vector<InputError> check_signature_examples(const SignatureCatalog& catalog);

}  // namespace triage
