// Issue 15's corroboration by the cluster Prometheus, the whole chain on a real Slurm: the agent's
// triage.conf names a real prometheus on loopback (PrometheusURL) whose metrics show this host's
// GPUs spinning in a collective (utilisation high, power at idle level: seed playbook 1's
// busy-wait signature). A job that asked for --triage-on-hang=cancel prints steps for 12 s and
// then sleeps; when the live loop flags the stall it asks the Prometheus, whose answer backs the
// verdict, so the cancel goes ahead at the first flag instead of waiting for twice the threshold
// (live_e2e's cancel case, where nothing corroborates, shows the wait). A binary of its own: every
// job on this cluster's one node would be corroborated the same way.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <memory>
#include <string>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"
#include "tests/tsdb/scenario.h"
#include "tests/tsdb/scenario_prometheus.h"

namespace triage::testing {
namespace {

using nlohmann::json;
using tsdb::testing::Scenario;
using tsdb::testing::ScenarioPrometheus;
using tsdb::testing::ScenarioSpec;

ClusterEnvironment* g_env = nullptr;
std::unique_ptr<ScenarioPrometheus> g_prometheus;

constexpr int kStallMinSeconds = 20;

// The cluster Prometheus' view of `node` from ten minutes ago to twenty minutes ahead: its two GPUs
// trained until five minutes ago and have spun since (100% utilisation at ~300 W). The samples
// ahead are served once the clock reaches them, so the job's whole stall is covered by what the
// server holds when the cluster starts. A scrape every 5 s: playbook 1 needs three scrapes after
// the last step, and the flag comes ~20 s after it. The GPUs name themselves MI355X (Ray's
// GpuDeviceName), so the playbook judges their power by that model's levels.
ScenarioSpec spinning_gpus(const std::string& node) {
  const auto now = static_cast<double>(std::time(nullptr));
  return {.hosts = {node},
          .start = now - 600,
          .duration_s = 1800,
          .interval_s = 5,
          .stop_after_s = 300};
}

void start_cluster_prometheus(ClusterOptions& options) {
  const Scenario sc(spinning_gpus(short_hostname()));
  g_prometheus = std::make_unique<ScenarioPrometheus>(sc, "");
  options.agent_settings.push_back("PrometheusURL=" + g_prometheus->url());
}

TEST(LiveBusyWait, AStallTheClusterPrometheusSeesSpinningIsCancelledAtTheFirstFlag) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(c, "live-busy-wait", "spins", steps_then(12, "sleep 600"),
                                        {"-t", "30", "--triage-on-hang=cancel"});
  c.wait_running(j.id);
  EXPECT_EQ(c.wait_job(j.id, std::chrono::seconds(12 + kStallMinSeconds + 90)), "CANCELLED")
      << c.logs();
  wait_for_analysis(c, j.id);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  ASSERT_TRUE(r.contains("live_record")) << r.dump(1);
  const json& live = r["live_record"];
  ASSERT_EQ(live["action"], "cancel") << live.dump(1);
  // At the first flag, not after twice the threshold.
  EXPECT_EQ(live["action_usec"], live["flagged_usec"]) << live.dump(1);
  const auto silence_usec =
      live["action_usec"].get<int64_t>() - live["last_step_usec"].get<int64_t>();
  EXPECT_LT(static_cast<double>(silence_usec) / 1e6, 2 * live["threshold_s"].get<double>())
      << live.dump(1);
  const std::string reason = live.value("action_reason", "");
  EXPECT_NE(reason.find("corroborated by"), std::string::npos) << reason;
  std::string busy_wait;
  for (const auto& line : live["corroboration"]) {
    if (line.get<std::string>().rfind("cluster Prometheus (busy-wait-hang): ", 0) == 0)
      busy_wait = line;
  }
  EXPECT_NE(busy_wait.find("2 GPUs on 1 host(s)"), std::string::npos) << live.dump(1);
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.plugin_more = "hang_action=allow";
  options.agent_settings = {
      "HangStallMin=" + std::to_string(triage::testing::kStallMinSeconds) + "s",
      "EvidenceSettleDelay=1s"};
  const int rc = triage::testing::run_with_cluster(argc, argv, "live_busy_wait_e2e_tests", options,
                                                   &triage::testing::g_env,
                                                   &triage::testing::start_cluster_prometheus);
  triage::testing::g_prometheus.reset();  // after the cluster: stopped by pid, its copy removed
  return rc;
}
