// The triage.conf keys of the TSDB playbooks. The agent owns triage.conf and must accept them;
// the analyzer (`slurm-triage analyze --mode full`, `slurm-triage tsdb`) reads them. Both sides
// share this one list so that a key the analyzer uses can never be one the agent rejects.
#pragma once

#include <vector>

#include "common/kv_config.h"

namespace triage {

// PrometheusURL, PrometheusHostLabel, PrometheusBinary, TsdbScratchDir, TsdbQueryTimeout.
std::vector<ConfigKeySpec> tsdb_config_keys();

}  // namespace triage
