// Test helper: a scenario's metrics served by Debian's prometheus on a free loopback port, as a
// cluster's Prometheus serves its nodes' metrics. The blocks are built (promtool) inside the
// server's scratch directory, so stopping the server (by pid, when this goes away) removes them.
#pragma once

#include <string>

#include "analyzer/tsdb/local_prometheus.h"
#include "tests/tsdb/scenario.h"

namespace triage::tsdb::testing {

class ScenarioPrometheus {
 public:
  // Builds `sc`'s TSDB and starts the server on it; `scratch_parent` "" means $TMPDIR or /tmp.
  // Throws (promtool's or the server's output) when either fails.
  ScenarioPrometheus(const Scenario& sc, const std::string& scratch_parent);

  std::string url() const { return server_.url(); }

 private:
  LocalPrometheus server_;
};

}  // namespace triage::tsdb::testing
