// What the report shows around the verdict, from the log's facts: the Ray cluster (and where its
// Prometheus is) and the log's last lines for a death nothing explained. The node table and the
// heartbeat checklist have their own modules (node_evidence.h, heartbeat_check.h).
#pragma once

#include <string>
#include <vector>

#include "analyzer/log_facts.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"

namespace triage {

// The Ray facts: enabled when the log started Ray or printed its tunnel, Prometheus on the tunnel's
// port (9190 by default), live while the job runs or hangs.
RayInfo ray_info(const LogFacts& facts, const std::string& status, bool has_tsdb_dir);

// The log's last lines (at most 8) when the status is unknown or the primary failure is the
// catalog's no-evidence class; nothing otherwise.
std::vector<LineCopy> last_lines_shown(const std::vector<LineCopy>& tail, const std::string& status,
                                       const std::string& primary_failure,
                                       const SignatureCatalog& catalog);

}  // namespace triage
