// The busy-wait probe: what playbook 1's answer means for a stalled job (plain values), and the
// real question to a real prometheus serving a cluster's metrics on loopback.
#include "agent/live/busy_wait_probe.h"

#include <gtest/gtest.h>

#include <chrono>
#include <optional>

#include "agent/base/config.h"
#include "analyzer/tsdb/local_prometheus.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"
#include "tests/tsdb/scenario.h"
#include "tests/tsdb/scenario_prometheus.h"

namespace triage::agent {
namespace {

using tsdb::testing::Scenario;
using tsdb::testing::ScenarioPrometheus;
using tsdb::testing::ScenarioSpec;
using tsdb::testing::SeriesKey;
using Opt = std::optional<double>;
using testing::TempDir;

// ---- what playbook 1's answer means ----

tsdb::TsdbResult answered(const std::string& verdict, const std::string& summary) {
  tsdb::TsdbResult r;
  r.available = true;
  r.source.kind = "cluster";
  tsdb::PlaybookResult p;
  p.number = 1;
  p.id = "hang";
  p.verdict = verdict;
  p.summary = summary;
  r.playbooks.push_back(p);
  return r;
}

TEST(BusyWaitReading, GpusSpinningAtIdlePowerCorroborateTheStall) {
  const BusyWaitReading r = read_busy_wait(answered(
      "busy-wait-hang",
      "All 16 GPUs on 2 host(s) reported high utilisation at idle-level power, with no network "
      "errors before the stall: a collective (RCCL/NCCL) busy-wait deadlock."));
  EXPECT_TRUE(r.asked);
  EXPECT_TRUE(r.busy_wait);
  EXPECT_EQ(r.verdict, "busy-wait-hang");
  EXPECT_EQ(r.line,
            "cluster Prometheus (busy-wait-hang): All 16 GPUs on 2 host(s) reported high "
            "utilisation at idle-level power, with no network errors before the stall: a "
            "collective (RCCL/NCCL) busy-wait deadlock.");
  EXPECT_EQ(r.error, "");
}

TEST(BusyWaitReading, ASpinAfterANetworkEventIsStillABusyWait) {
  const BusyWaitReading r =
      read_busy_wait(answered("network-triggered-hang",
                              "All 4 GPUs on 2 host(s) reported high utilisation at idle-level "
                              "power. RDMA retransmits on node002 (mlx5_0) began at 10:02:00, "
                              "before training stopped: a network event stalled a collective."));
  EXPECT_TRUE(r.busy_wait);
  EXPECT_NE(r.line.find("RDMA retransmits on node002"), std::string::npos) << r.line;
}

TEST(BusyWaitReading, IdleGpusAreAStallOutsideTheGpuNotABusyWait) {
  const BusyWaitReading r = read_busy_wait(answered(
      "idle-hang",
      "The GPUs were idle (idle-level power, low utilisation), not spinning in a collective."));
  EXPECT_TRUE(r.asked);
  EXPECT_FALSE(r.busy_wait);
  EXPECT_EQ(r.verdict, "idle-hang");
  EXPECT_NE(r.line.find("not spinning in a collective"), std::string::npos) << r.line;
  EXPECT_EQ(r.error, "");
}

TEST(BusyWaitReading, GpusAtActivePowerAreStillComputing) {
  const BusyWaitReading r = read_busy_wait(
      answered("not-a-hang", "16 of 16 GPUs drew active-level power during the supposed hang."));
  EXPECT_FALSE(r.busy_wait);
  EXPECT_EQ(r.verdict, "not-a-hang");
}

TEST(BusyWaitReading, ADeadNodeIsNotABusyWait) {
  const BusyWaitReading r = read_busy_wait(
      answered("node-death", "node002 stopped reporting (or drew no power) during the hang."));
  EXPECT_FALSE(r.busy_wait);
  EXPECT_EQ(r.verdict, "node-death");
}

TEST(BusyWaitReading, NoMetricsIsNoCorroborationAndSaysWhy) {
  tsdb::TsdbResult r;
  r.notes = {"could not list the TSDB's metrics: Couldn't connect to server",
             "no job directory: no per-job TSDB to read"};
  const BusyWaitReading reading = read_busy_wait(r);
  EXPECT_TRUE(reading.asked);
  EXPECT_FALSE(reading.busy_wait);
  EXPECT_EQ(reading.verdict, "");
  EXPECT_EQ(reading.line, "");
  EXPECT_EQ(reading.error, "could not list the TSDB's metrics: Couldn't connect to server");
}

TEST(BusyWaitReading, MetricsWithoutAHangVerdictAreNoCorroboration) {
  tsdb::TsdbResult r = answered("busy-wait-hang", "ignored");
  r.playbooks.front().number = 6;  // another playbook's answer is no hang verdict
  r.notes = {"refusing to diagnose: none of the job's nodes appear in the TSDB"};
  const BusyWaitReading reading = read_busy_wait(r);
  EXPECT_FALSE(reading.busy_wait);
  EXPECT_NE(reading.error.find("refusing to diagnose"), std::string::npos);
}

TEST(BusyWaitProbe, WithoutAClusterPrometheusNothingIsAsked) {
  BusyWaitSettings s;
  const BusyWaitReading r = probe_busy_wait(s, {.nodes = {"node001"}}, 1'000'000);
  EXPECT_FALSE(r.asked);
  EXPECT_FALSE(r.busy_wait);
  EXPECT_NE(r.error.find("PrometheusURL"), std::string::npos) << r.error;
}

// ---- the request and the settings ----

TEST(BusyWaitProbe, TheRequestIsPlaybookOneAgainstTheClusterOnlyOverTheStall) {
  BusyWaitSettings s;
  s.prometheus_url = "http://prom.cluster:9090";
  s.host_label = "instance";
  s.query_timeout_sec = 15;
  s.rule_layers = {"/usr/share/slurm-triage/rules"};
  const StalledJob job{.nodes = {"node001", "node002"},
                       .start_usec = 1'700'000'000'000'000,
                       .stall_start_usec = 1'700'003'000'500'000,
                       .gpu_model = "MI355X"};
  const tsdb::TsdbRequest req = busy_wait_request(s, job, 1'700'003'900'000'000);
  EXPECT_EQ(req.job_dir, "") << "root must never read the job's own TSDB";
  EXPECT_EQ(req.cluster_url, "http://prom.cluster:9090");
  EXPECT_EQ(req.host_label, "instance");
  EXPECT_EQ(req.hosts, job.nodes);
  EXPECT_EQ(req.job_start, 1'700'000'000.0);
  EXPECT_EQ(req.job_end, 1'700'003'900.0);
  EXPECT_EQ(req.last_step_time, 1'700'003'000.5);
  EXPECT_EQ(req.triage_class, "hang");
  EXPECT_EQ(req.class_playbooks, std::vector<std::string>{"hang"});
  EXPECT_EQ(req.playbooks, std::vector<int>{1});
  EXPECT_FALSE(req.full);
  EXPECT_EQ(req.gpu_model, "MI355X");
  EXPECT_EQ(req.query_timeout_s, 15);
  EXPECT_EQ(req.rule_layers, s.rule_layers);
}

TEST(BusyWaitProbe, TheSettingsComeFromTriageConfWithAShortQueryTimeout) {
  const ConfigLoad load = load_agent_config_text(
      "PrometheusURL=http://prom:9090\nPrometheusHostLabel=instance\nRulesDir=/etc/extra\n", "t");
  ASSERT_TRUE(load.errors.empty());
  const BusyWaitSettings s = busy_wait_settings(load.config);
  EXPECT_EQ(s.prometheus_url, "http://prom:9090");
  EXPECT_EQ(s.host_label, "instance");
  EXPECT_EQ(s.query_timeout_sec, kBusyWaitQueryTimeoutMaxSec) << "TsdbQueryTimeout's 60 s capped";
  ASSERT_FALSE(s.rule_layers.empty());
  EXPECT_EQ(s.rule_layers.back(), "/etc/extra");

  const ConfigLoad quick = load_agent_config_text("TsdbQueryTimeout=5s\n", "t");
  EXPECT_EQ(busy_wait_settings(quick.config).query_timeout_sec, 5);
}

// ---- a real cluster Prometheus ----

// Two nodes of a cluster; training stops 20 minutes in and the job is still running 10 minutes
// later, when the live loop asks.
ScenarioSpec stalled_job_spec() {
  return {.hosts = {"node001", "node002"},
          .duration_s = 1800,
          .stop_after_s = 1200,
          .host_label = "instance",
          .host_suffix = ":9100"};
}

BusyWaitSettings settings_for(const std::string& url) {
  BusyWaitSettings s;
  s.prometheus_url = url;
  s.host_label = "instance";
  s.rule_layers = {std::string(SOURCE_DIR) + "/rules"};
  return s;
}

int64_t usec(double seconds) {
  return static_cast<int64_t>(seconds * 1e6);
}

StalledJob stalled(const Scenario& sc) {
  return {.nodes = sc.spec().hosts,
          .start_usec = usec(sc.start()),
          .stall_start_usec = usec(sc.last_step_time())};
}

TEST(BusyWaitProbeCluster, GpusSpinningAtIdlePowerAreABusyWait) {
  TempDir dir("busy-wait");
  Scenario sc(stalled_job_spec());  // after training stops: 100% utilisation at ~300 W
  ScenarioPrometheus cluster(sc, dir.path());
  const BusyWaitReading r =
      probe_busy_wait(settings_for(cluster.url()), stalled(sc), usec(sc.end()));
  EXPECT_TRUE(r.asked);
  EXPECT_TRUE(r.busy_wait) << r.verdict << ": " << r.line << r.error;
  EXPECT_EQ(r.verdict, "busy-wait-hang");
  EXPECT_NE(r.line.find("4 GPUs on 2 host(s)"), std::string::npos) << r.line;
}

TEST(BusyWaitProbeCluster, GpusDrawingActivePowerAreNoBusyWait) {
  TempDir dir("busy-wait");
  Scenario sc(stalled_job_spec());
  // No step line for ten minutes (a long evaluation pass), but the GPUs keep computing.
  sc.set("hw_gpu_power_watts",
         [](const SeriesKey& k, double t) -> Opt { return 885 + 10 * Scenario::jitter(k, t); });
  sc.set("ray_node_gpus_utilization",
         [](const SeriesKey& k, double t) -> Opt { return 97 + Scenario::jitter(k, t); });
  ScenarioPrometheus cluster(sc, dir.path());
  const BusyWaitReading r =
      probe_busy_wait(settings_for(cluster.url()), stalled(sc), usec(sc.end()));
  EXPECT_TRUE(r.asked);
  EXPECT_FALSE(r.busy_wait);
  EXPECT_EQ(r.verdict, "not-a-hang") << r.line << r.error;
}

TEST(BusyWaitProbeCluster, APrometheusThatIsDownAnswersNothingAtOnce) {
  const uint16_t closed = tsdb::pick_free_loopback_port(std::nullopt);
  const Scenario sc(stalled_job_spec());
  const int64_t t0 = monotonic_usec();
  const BusyWaitReading r = probe_busy_wait(
      settings_for("http://127.0.0.1:" + std::to_string(closed)), stalled(sc), usec(sc.end()));
  EXPECT_LT(monotonic_usec() - t0, 5'000'000) << "a refused connection must not wait";
  EXPECT_TRUE(r.asked);
  EXPECT_FALSE(r.busy_wait);
  EXPECT_EQ(r.verdict, "");
  EXPECT_NE(r.error.find("127.0.0.1:" + std::to_string(closed)), std::string::npos) << r.error;
}

}  // namespace
}  // namespace triage::agent
