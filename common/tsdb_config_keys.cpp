#include "common/tsdb_config_keys.h"

#include <cstdint>

namespace triage {

std::vector<ConfigKeySpec> tsdb_config_keys() {
  return {
      {"PrometheusURL",
       ConfigType::kString,
       "",
       {},
       INT64_MIN,
       INT64_MAX,
       "a cluster-wide Prometheus to run the TSDB playbooks against (scoped to the job's hosts and "
       "window)"},
      {"PrometheusHostLabel",
       ConfigType::kString,
       "host",
       {},
       INT64_MIN,
       INT64_MAX,
       "the label that names the node in the cluster Prometheus"},
      {"PrometheusBinary",
       ConfigType::kString,
       "prometheus",
       {},
       INT64_MIN,
       INT64_MAX,
       "the prometheus executable used to read a job's own TSDB"},
      {"TsdbScratchDir",
       ConfigType::kPath,
       "",
       {},
       INT64_MIN,
       INT64_MAX,
       "where the private copy of a job's TSDB goes (default $TMPDIR or /tmp)"},
      {"TsdbQueryTimeout",
       ConfigType::kDuration,
       "60",
       {},
       1,
       3600,
       "timeout of one Prometheus query"},
  };
}

}  // namespace triage
