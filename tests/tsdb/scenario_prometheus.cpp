#include "tests/tsdb/scenario_prometheus.h"

#include "analyzer/tsdb/tsdb_dir.h"
#include "common/child_process.h"

namespace triage::tsdb::testing {

namespace {

LaunchOptions options(const std::string& scratch_parent) {
  LaunchOptions lo;
  lo.binary = find_executable("prometheus");
  lo.scratch_parent = scratch_parent;
  lo.label = "scenario";
  return lo;
}

}  // namespace

ScenarioPrometheus::ScenarioPrometheus(const Scenario& sc, const std::string& scratch_parent)
    : server_(options(scratch_parent)) {
  sc.build_tsdb(server_.scratch_dir());
  copy_tsdb(scan_tsdb_dir(server_.scratch_dir()), server_.data_dir(), {});
  server_.start();
}

}  // namespace triage::tsdb::testing
