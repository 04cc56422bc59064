// The report's words once the verdict is in: what happened, the next steps (the primary class's,
// then what the heartbeat check, the node table and Ray add), and notes about the input itself.
#pragma once

#include <string>
#include <vector>

#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// One paragraph on what happened, from the status, the primary class's explanation and, for a
// stall, how long before the end the last step was logged.
std::string what_happened(const Triage& t, const SignatureCatalog& catalog);

// The next steps in order: the primary class's (live-only ones while the job runs), the heartbeat
// verdict when the heartbeat class is not primary, drains and unreachable nodes, Ray's dashboards.
std::vector<std::string> next_steps(const Triage& t, const SignatureCatalog& catalog);

// Notes on the log itself: cut off mid-line, overlong lines, a partial scan, restarts.
std::vector<std::string> input_notes(const Triage& t);

}  // namespace triage
