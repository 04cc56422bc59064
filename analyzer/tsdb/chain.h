// The root-cause chain (earliest anomaly first) and the verdict on the log triage's class.
#pragma once

#include <optional>

#include "analyzer/tsdb/playbook_context.h"

namespace triage::tsdb {

// When the incident happened: the failure time, or for a hang the last completed step.
std::optional<double> incident_time(const TsdbRequest& req, const Discovery& d);

// Fills res.chain from the playbooks' anomalies near the incident.
void build_chain(TsdbResult& res, const Discovery& d, const TsdbRequest& req, const Thresholds& th);

// Fills res.correlation: does the TSDB confirm, refine or refute the triage class? The class is
// known by the playbooks it hands off to (req.class_playbooks).
void correlate(TsdbResult& res, const TsdbRequest& req);

}  // namespace triage::tsdb
