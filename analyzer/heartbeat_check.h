// The JAX heartbeat-timeout checklist. The coordination service's "tasks have crashed" is usually a
// false positive (alive, training tasks whose heartbeat RPCs were blocked). Two checks from the
// log: did an accused task log its own death afterwards (then it was alive: false positive), and
// did an accused task print a real error before the accusation (then it really died: true
// positive).
#pragma once

#include <cstdint>
#include <map>
#include <utility>

#include "analyzer/log_facts.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// `first_error_by_rank`: rank -> (line, class index) of the rank's first real error.
HeartbeatCheck check_heartbeat(
    const LogFacts& facts,
    const std::map<int64_t, std::pair<int64_t, uint32_t>>& first_error_by_rank,
    const SignatureCatalog& catalog);

}  // namespace triage
