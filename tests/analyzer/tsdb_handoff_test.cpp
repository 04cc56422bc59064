// What full mode tells the TSDB playbooks about a job, and how their answer lands in the report.
#include <gtest/gtest.h>

#include <cmath>

#include "analyzer/job_analysis.h"
#include "analyzer/report_render.h"
#include "analyzer/tsdb_handoff.h"
#include "tests/analyzer/test_support.h"

namespace triage {
namespace {

NodeRow node(const std::string& host, std::vector<int64_t> ranks) {
  NodeRow n;
  n.host = host;
  n.ranks = std::move(ranks);
  return n;
}

// A heartbeat timeout on a 3-node job: the coordinator (task 0 on node001) declared task 2 dead.
Triage heartbeat_job() {
  Triage t;
  t.job_dir = "/home/alice/outputs/4242-llama";
  t.job_id = 4242;
  t.status = kStatusFailed;
  t.primary_failure = "heartbeat-timeout";
  Finding f;
  f.cls = "heartbeat-timeout";
  f.time_usec = 1763729100000000;
  t.evidence.push_back(f);
  t.nodes = {node("node001", {0}), node("node002", {1}), node("node003", {2})};
  t.heartbeat.present = true;
  t.heartbeat.accused = {2};
  t.progress.has_steps = true;
  t.progress.first_step = 0;
  t.progress.last_step = 316;
  t.progress.last_step_time_usec = 1763729000000000;
  t.progress.last_step_time_basis = "timestamp";
  t.progress.checkpoint_period = 100;
  t.progress.step_seconds = 7.9;
  t.summary.finished_usec = 1763729200000000;
  return t;
}

TEST(TsdbHandoff, AHeartbeatTimeoutNamesTheAccusedHostsTheCoordinatorAndTheCrashTime) {
  const Triage t = heartbeat_job();
  const auto r = tsdb_request_for(t, test::shipped_catalog(), nullptr, {});
  EXPECT_EQ(r.job_dir, t.job_dir);
  EXPECT_EQ(r.job_id, "4242");
  EXPECT_EQ(r.triage_class, "heartbeat-timeout");
  EXPECT_TRUE(r.full);
  EXPECT_EQ(r.accused_hosts, std::vector<std::string>{"node003"});
  EXPECT_EQ(r.accused_tasks, std::vector<int64_t>{2});
  EXPECT_EQ(r.coordinator_host, "node001");
  ASSERT_TRUE(r.failure_time);
  EXPECT_DOUBLE_EQ(*r.failure_time, 1763729100);
  ASSERT_TRUE(r.last_step && r.last_step_time);
  EXPECT_EQ(*r.last_step, 316);
  EXPECT_DOUBLE_EQ(*r.last_step_time, 1763729000);
  EXPECT_EQ(r.checkpoint_period, 100);
  EXPECT_EQ(r.liveness, tsdb::JobLiveness::kFinished);
  // Without Slurm's facts, no node list from the log: the TSDB's own hosts are analysed.
  EXPECT_TRUE(r.hosts.empty());
  EXPECT_FALSE(r.job_start);
  ASSERT_TRUE(r.job_end);
  EXPECT_DOUBLE_EQ(*r.job_end, 1763729200);
}

TEST(TsdbHandoff, AHangEndsWhenTheJobDidNotWhenItsLastStepWasLogged) {
  Triage t = heartbeat_job();
  t.primary_failure = "hang";
  t.evidence.front().cls = "hang";
  t.evidence.front().time_usec = t.progress.last_step_time_usec;
  const auto r = tsdb_request_for(t, test::shipped_catalog(), nullptr, {});
  ASSERT_TRUE(r.failure_time);
  EXPECT_DOUBLE_EQ(*r.failure_time, 1763729200);
  EXPECT_DOUBLE_EQ(*r.last_step_time, 1763729000);
}

TEST(TsdbHandoff, TheLogsModificationTimeIsNeverTakenForTheLastStepsTime) {
  Triage t = heartbeat_job();
  t.progress.last_step_time_basis = "log mtime (upper bound)";
  EXPECT_FALSE(tsdb_request_for(t, test::shipped_catalog(), nullptr, {}).last_step_time);
}

TEST(TsdbHandoff, SlurmsFactsGiveTheWindowAndTheNodesAndTheOptionsTheSources) {
  const Triage t = heartbeat_job();
  Evidence ev;
  ev.job.start_time = 1763720000;
  ev.job.end_time = 1763729300;
  ev.job.nodes = {"node001", "node002", "node003", "node004"};
  TsdbHandoffOptions o;
  o.cluster_url = "http://prom.example:9090";
  o.prometheus_binary = "/opt/prometheus/bin/prometheus";
  const auto r = tsdb_request_for(t, test::shipped_catalog(), &ev, o);
  EXPECT_EQ(r.hosts.size(), 4u);
  EXPECT_DOUBLE_EQ(r.job_start.value_or(0), 1763720000);
  EXPECT_DOUBLE_EQ(r.job_end.value_or(0), 1763729300);
  EXPECT_EQ(r.cluster_url, o.cluster_url);
  EXPECT_EQ(r.prometheus_binary, o.prometheus_binary);
}

TEST(TsdbHandoff, AClusterPrometheusWithoutEvidenceIsScopedToTheLogsNodes) {
  const Triage t = heartbeat_job();
  TsdbHandoffOptions o;
  o.cluster_url = "http://prom.example:9090";
  EXPECT_EQ(tsdb_request_for(t, test::shipped_catalog(), nullptr, o).hosts.size(), 3u);
}

TEST(TsdbHandoff, ALiveRayJobIsReadFromItsHeadNodesPrometheus) {
  Triage t = heartbeat_job();
  t.status = kStatusRunning;
  t.ray.live = true;
  t.ray.head_host = "node001";
  t.ray.prometheus_port = 9190;
  const auto r = tsdb_request_for(t, test::shipped_catalog(), nullptr, {});
  EXPECT_EQ(r.liveness, tsdb::JobLiveness::kLive);
  EXPECT_EQ(r.head_host, "node001");
  EXPECT_EQ(r.head_port, 9190);
  t.ray.live = false;
  EXPECT_EQ(tsdb_request_for(t, test::shipped_catalog(), nullptr, {}).liveness,
            tsdb::JobLiveness::kUnknown);
}

TEST(TsdbHandoff, UnreadableMetricsAreANoteAndTheSectionClaimsNothing) {
  Triage t = heartbeat_job();
  tsdb::TsdbResult res;
  res.job_dir = t.job_dir;
  res.notes.push_back("no prometheus binary (prometheus) in $PATH");
  attach_tsdb_result(t, res);
  const auto js = nlohmann::json::parse(render_json(t));
  EXPECT_EQ(js.at("tsdb").at("available"), false);
  EXPECT_TRUE(js.at("tsdb").at("timeline_svg").is_null());
  ASSERT_EQ(t.notes.size(), 1u);
  EXPECT_NE(t.notes[0].find("no prometheus binary"), std::string::npos);
  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("### TSDB Diagnosis"), std::string::npos);
  EXPECT_NE(md.find("No metrics could be read"), std::string::npos);
  EXPECT_EQ(md.find("Anomalies detected"), std::string::npos);
}

TEST(TsdbHandoff, AHardwareFaultIsADrainFromTheClusterAndACheckFromTheJobsOwnTsdb) {
  Triage t = heartbeat_job();
  tsdb::TsdbResult res;
  res.available = true;
  tsdb::HardwareVerdict v;
  v.host = "node002";
  v.component = "gpu 3";
  v.verdict = "hardware-fault";
  v.action = "drain";
  v.reason = "2 uncorrectable ECC errors";
  res.hardware.push_back(v);
  attach_tsdb_result(t, res);
  ASSERT_EQ(t.recommendations.size(), 1u);
  EXPECT_EQ(t.recommendations[0].rfind("Check node002", 0), 0u) << t.recommendations[0];
  t.tsdb_timeline_svg = "triage-timeline.svg";
  EXPECT_EQ(nlohmann::json::parse(render_json(t)).at("tsdb").at("timeline_svg"),
            "triage-timeline.svg");

  Triage c = heartbeat_job();
  res.hardware[0].source_trusted = true;
  attach_tsdb_result(c, res);
  ASSERT_EQ(c.recommendations.size(), 1u);
  EXPECT_EQ(c.recommendations[0].rfind("Drain node002", 0), 0u) << c.recommendations[0];
}

TEST(TsdbHandoff, TheTimelineIsNamedAfterTheReportAndLinkedSafely) {
  EXPECT_EQ(timeline_name_for("triage.md"), "triage-timeline.svg");
  EXPECT_EQ(timeline_name_for("triage-4242.md"), "triage-4242-timeline.svg");
  Triage t = heartbeat_job();
  tsdb::TsdbResult res;
  res.available = true;
  res.timeline.steps = {{1763720000, 1}, {1763720100, 2}};
  attach_tsdb_result(t, res);
  t.tsdb_timeline_svg = "triage-run (2)-timeline.svg";
  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("](triage-run%20%282%29-timeline.svg)"), std::string::npos) << md;
}

// The site's triage.conf is the agent's file: full mode takes only the metrics keys from it.
TEST(TsdbHandoff, TheSitesClusterPrometheusComesFromTriageConfAndTheCommandLineWins) {
  const test::ScratchDir dir("site-conf");
  const std::string conf = (dir / "triage.conf").string();
  test::write_file(conf,
                   "# the agent's keys are none of the analyzer's business\n"
                   "DrainPolicy=recommend\nSampleIntervalOfTheFuture=5s\n"
                   "PrometheusURL=http://prom.cluster:9090\nPrometheusHostLabel=instance\n"
                   "TsdbQueryTimeout=2m\n");
  TsdbHandoffOptions o;
  EXPECT_TRUE(apply_site_tsdb_config(conf, false, false, o).empty());
  EXPECT_EQ(o.cluster_url, "http://prom.cluster:9090");
  EXPECT_EQ(o.host_label, "instance");
  EXPECT_EQ(o.query_timeout_s, 120);
  EXPECT_TRUE(o.prometheus_binary.empty()) << "the default binary is the tool's own default";

  TsdbHandoffOptions cli;
  cli.cluster_url = "http://other:9090";
  EXPECT_TRUE(apply_site_tsdb_config(conf, true, false, cli).empty());
  EXPECT_EQ(cli.cluster_url, "http://other:9090");
}

TEST(TsdbHandoff, ABadMetricsSettingIsNamedByFileAndLineAndNothingOfTheFileIsUsed) {
  const test::ScratchDir dir("site-conf");
  const std::string conf = (dir / "triage.conf").string();
  test::write_file(conf, "PrometheusHostLabel=instance\nPrometheusURL=prom:9090\n");
  TsdbHandoffOptions o;
  const auto errors = apply_site_tsdb_config(conf, false, false, o);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(std::string(errors[0].what()).find("triage.conf:2"), std::string::npos)
      << errors[0].what();
  EXPECT_TRUE(o.cluster_url.empty());
  EXPECT_EQ(o.host_label, "host");
}

// A heartbeat-timeout job's own log, read by the analyzer: what it says about the run's config and
// its last loss is what the playbooks are given (they used their defaults before).
Triage analysed(const std::string& log_text) {
  test::ScratchDir dir("handoff-log");
  const auto job = dir / "outputs/4243-llama";
  std::filesystem::create_directories(job);
  test::write_file(dir / "outputs/4243-llama.log", log_text);
  std::filesystem::create_symlink("../4243-llama.log", job / "log");
  AnalysisOptions opt;
  opt.slurm_state_option = "FAILED";
  return analyze_job(resolve_job_path(job.string()), test::shipped_plan(), nullptr, opt).triage;
}

TEST(TsdbHandoff, TheLogsLastLossHeartbeatTimeoutAndAsyncCheckpointingReachThePlaybooks) {
  const Triage t = analysed(
      "PASSTHROUGH_ARGS=steps=5000 enable_checkpointing=true checkpoint_period=100 "
      "async_checkpointing=true jax_distributed_heartbeat_timeout_seconds=14400\n"
      "0: [2026-11-21 10:04:02] completed step: 0, seconds: 95.0, loss: 11.200\n"
      "0: [2026-11-21 10:04:13] completed step: 1, seconds: 11.9, moe_lb_loss: 0.5, loss: 11.199\n"
      "0: [2026-11-21 10:04:25] completed step: 2, seconds: 11.9, moe_lb_loss: 0.4, loss: "
      "11.0625\n");
  EXPECT_EQ(t.progress.async_checkpointing, true);
  const auto r = tsdb_request_for(t, test::shipped_catalog(), nullptr, {});
  ASSERT_TRUE(r.last_loss);
  EXPECT_DOUBLE_EQ(*r.last_loss, 11.0625) << "the last step's loss, not its MoE balance loss";
  ASSERT_TRUE(r.heartbeat_timeout_s);
  EXPECT_DOUBLE_EQ(*r.heartbeat_timeout_s, 14400);
  EXPECT_TRUE(r.async_checkpointing);
}

TEST(TsdbHandoff, ALossThatWentNanIsPassedAsNanAndALogWithoutTheKeysPassesNothing) {
  const Triage diverged =
      analysed("0: [2026-11-21 10:04:02] completed step: 7, seconds: 9.0, loss=nan\n");
  const auto r = tsdb_request_for(diverged, test::shipped_catalog(), nullptr, {});
  ASSERT_TRUE(r.last_loss);
  EXPECT_TRUE(std::isnan(*r.last_loss));
  EXPECT_FALSE(r.heartbeat_timeout_s) << "the playbook's default (100 s) applies";
  EXPECT_FALSE(r.async_checkpointing);

  const Triage no_loss = analysed(
      "Config param async_checkpointing: False\n"
      "0: [2026-11-21 10:04:02] completed step: 7, seconds: 9.0, lb_loss: 0.3\n");
  EXPECT_FALSE(tsdb_request_for(no_loss, test::shipped_catalog(), nullptr, {}).last_loss);
  EXPECT_EQ(no_loss.progress.async_checkpointing, false);
}

}  // namespace
}  // namespace triage
