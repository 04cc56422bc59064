// The fleet families of /metrics, read as Prometheus would read them: outcomes and lost GPU time
// by class and blame, requeues, the history by job size, the drain; label values a job's files
// could steer stay bounded.
#include "agent/server/fleet_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::metric_value;

OutcomeRecord outcome(uint64_t job, const std::string& status, std::optional<std::string> cls,
                      std::optional<std::string> blame, const std::string& nodes,
                      std::optional<double> gpu_hours = std::nullopt) {
  OutcomeRecord r;
  r.job_id = job;
  r.user = "alice";
  r.end_time = 1700000000 + static_cast<int64_t>(job);
  r.status = status;
  r.cls = std::move(cls);
  r.blame = std::move(blame);
  r.nodelist = nodes;
  r.gpu_hours_lost = gpu_hours;
  return r;
}

std::string page(const FleetMetrics& f, const HistoryBySize& h = {}) {
  MetricsText m;
  render_outcome_metrics(m, "gpu-a017", f, h);
  return m.text();
}

TEST(FleetMetrics, OutcomesAndLostGpuTimeAreCountedByClassAndBlame) {
  FleetMetrics f;
  f.count_outcome(outcome(1, "failed", "nccl-timeout", "platform", "gpu-a[017-018]", 2.5));
  f.count_outcome(outcome(2, "failed", "nccl-timeout", "platform", "gpu-a[017-018]", 0.5));
  f.count_outcome(outcome(3, "failed", "python-exception", "user-code", "gpu-a017"));
  f.count_outcome(outcome(4, "completed", std::nullopt, std::nullopt, "gpu-a017"));
  const std::string text = page(f);
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_job_outcomes_total{blame="platform",class="nccl-timeout",host="gpu-a017",status="failed"})"),
      2.0)
      << text;
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_job_outcomes_total{blame="user-code",class="python-exception",host="gpu-a017",status="failed"})"),
      1.0);
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_job_outcomes_total{blame="none",class="none",host="gpu-a017",status="completed"})"),
      1.0);
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_job_lost_gpu_seconds_total{blame="platform",class="nccl-timeout",host="gpu-a017"})"),
      3.0 * 3600);
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_job_lost_gpu_seconds_total{blame="user-code",class="python-exception",host="gpu-a017"})"),
      0.0)
      << "a job of unknown cost makes its series appear at 0";
  EXPECT_NE(text.find("# TYPE triage_job_outcomes_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE triage_job_lost_gpu_seconds_total counter\n"), std::string::npos);
  EXPECT_EQ(text.find("job_id"), std::string::npos) << "no job ids in labels";
  EXPECT_EQ(text.find("alice"), std::string::npos) << "no users in labels";
}

TEST(FleetMetrics, ACostThatCannotBeACounterStepAddsNothing) {
  FleetMetrics f;
  f.count_outcome(outcome(1, "failed", "oom-host", "user-code", "n1", -4.0));
  f.count_outcome(outcome(2, "failed", "oom-host", "user-code", "n1", std::nan("")));
  EXPECT_EQ(
      metric_value(
          page(f),
          R"(triage_job_lost_gpu_seconds_total{blame="user-code",class="oom-host",host="gpu-a017"})"),
      0.0);
}

TEST(FleetMetrics, LabelValuesFromAnAnalysisAreBounded) {
  FleetMetrics f;
  f.count_outcome(outcome(1, "failed", "x\"} 1e9\n# evil{", "platform", "n1"));
  EXPECT_EQ(
      metric_value(
          page(f),
          R"(triage_job_outcomes_total{blame="platform",class="other",host="gpu-a017",status="failed"})"),
      1.0);
  for (uint64_t i = 0; i < kMaxLabelSets + 50; ++i)
    f.count_outcome(outcome(10 + i, "failed", "class-" + std::to_string(i), "unknown", "n1"));
  EXPECT_EQ(f.outcomes().size(), kMaxLabelSets + 1) << "the cap, plus the one overflow set";
  EXPECT_EQ(
      metric_value(
          page(f),
          R"(triage_job_outcomes_total{blame="other",class="other",host="gpu-a017",status="other"})"),
      51.0);
  EXPECT_EQ(bounded_label("nccl-timeout"), "nccl-timeout");
  EXPECT_EQ(bounded_label(""), "other");
  EXPECT_EQ(bounded_label(std::string(65, 'a')), "other");
  EXPECT_EQ(bounded_label("a b"), "other");
}

TEST(FleetMetrics, RequeuesDoneAndRefusedAreThereFromTheStartAndCountedByReason) {
  FleetMetrics f;
  std::string text = page(f);
  EXPECT_EQ(metric_value(text, R"(triage_requeues_total{host="gpu-a017",result="done"})"), 0.0);
  EXPECT_EQ(metric_value(text, R"(triage_requeues_total{host="gpu-a017",result="refused"})"), 0.0);
  f.count_requeue(RequeueResult::kDone, "platform");
  f.count_requeue(RequeueResult::kRefused, "not-requeueable");
  f.count_requeue(RequeueResult::kRefused, "not-requeueable");
  text = page(f);
  EXPECT_EQ(metric_value(text, R"(triage_requeues_total{host="gpu-a017",result="done"})"), 1.0);
  EXPECT_EQ(metric_value(text, R"(triage_requeues_total{host="gpu-a017",result="refused"})"), 2.0);
  EXPECT_EQ(
      metric_value(
          text,
          R"(triage_requeue_reasons_total{host="gpu-a017",reason="not-requeueable",result="refused"})"),
      2.0);
  for (int i = 0; i < 100; ++i)
    f.count_requeue(RequeueResult::kRefused, "reason-" + std::to_string(i));
  EXPECT_LE(f.requeue_reasons().size(), kMaxRequeueReasons + 1);
}

// `r` with `node` implicated by its own agent (trusted) or by the job's log only.
OutcomeRecord implicating(OutcomeRecord r, const std::string& node, bool trusted) {
  r.implicated.push_back({node, "Xid 79", trusted});
  return r;
}

TEST(FleetMetrics, TheHistoryIsBucketedBySizeAndOnlyTrustedPlatformFailuresCountAgainstTheNode) {
  std::deque<OutcomeRecord> records = {
      implicating(outcome(1, "failed", "gpu-fallen-off-bus", "platform", "gpu-a[017-018]"),
                  "gpu-a017", true),
      outcome(2, "failed", "python-exception", "user-code", "gpu-a[017-018]"),
      outcome(3, "completed", std::nullopt, std::nullopt, "gpu-a[017-020]"),
      implicating(outcome(4, "failed", "gpu-fallen-off-bus", "platform", "gpu-a[001-032]"),
                  "gpu-a017", true),
      outcome(5, "failed", "oom-host", "platform", "gpu-a017"),  // one node: not in the test
      outcome(6, "completed", "nccl-timeout", "platform", "gpu-a[017-018]"),
      // What a job's own log can claim counts against nobody: unknown blame, and platform blame
      // the node's agent did not back, on this node or only on the other one.
      outcome(7, "failed", "hang", "unknown", "gpu-a[017-018]"),
      implicating(outcome(8, "failed", "gpu-fallen-off-bus", "platform", "gpu-a[017-018]"),
                  "gpu-a017", false),
      implicating(outcome(9, "failed", "gpu-fallen-off-bus", "platform", "gpu-a[017-018]"),
                  "gpu-a018", true),
  };
  const HistoryBySize h = history_by_size(records, "gpu-a017");
  EXPECT_EQ(h.jobs, (std::array<uint64_t, 4>{6, 1, 0, 1}));
  EXPECT_EQ(h.failures, (std::array<uint64_t, 4>{1, 0, 0, 1}));
  EXPECT_EQ(history_by_size(records, "gpu-a018").failures, (std::array<uint64_t, 4>{1, 0, 0, 0}));
  const std::string text = page(FleetMetrics{}, h);
  EXPECT_EQ(metric_value(text, R"(triage_history_multinode_jobs{host="gpu-a017",size="2-3"})"),
            6.0);
  EXPECT_EQ(metric_value(text, R"(triage_history_multinode_failures{host="gpu-a017",size="16+"})"),
            1.0);
  EXPECT_EQ(metric_value(text, R"(triage_history_multinode_jobs{host="gpu-a017",size="8-15"})"),
            0.0)
      << "every bucket is there, so that the cluster's rate is defined";
}

TEST(FleetMetrics, TheDrainRecommendationCarriesItsLeadingActionAndTheOwnerIsOneOfFour) {
  NodeVerdict v;
  v.verdict = "drain-recommended";
  v.reasons.push_back({"GPU 0000:c1:00.0 fell off the bus (Xid 79)", "drain", {"b:1"}});
  v.reasons.push_back({"one GPU reset", "watch", {"b:2"}});
  DrainActionCounts actions = {{{"drain", "done"}, 1}, {{"lift", "done"}, 0}};
  MetricsText m;
  render_drain_metrics(m, "gpu-a017", v, DrainOwner::kOurs, actions);
  const std::string text = m.text();
  EXPECT_EQ(metric_value(text, R"(triage_drain_recommendation{action="drain",host="gpu-a017"})"),
            1.0)
      << text;
  EXPECT_EQ(metric_value(text, R"(triage_drain_recommendation{action="watch",host="gpu-a017"})"),
            std::nullopt);
  EXPECT_EQ(metric_value(text, R"(triage_drain_owner{host="gpu-a017",owner="ours"})"), 1.0);
  EXPECT_EQ(metric_value(text, R"(triage_drain_owner{host="gpu-a017",owner="admin"})"), 0.0);
  EXPECT_EQ(
      metric_value(
          text, R"(triage_auto_drain_actions_total{action="drain",host="gpu-a017",result="done"})"),
      1.0);

  MetricsText healthy;
  render_drain_metrics(healthy, "gpu-a017", NodeVerdict{}, DrainOwner::kUnknown, {});
  EXPECT_EQ(healthy.text().find("triage_drain_recommendation{"), std::string::npos);
  EXPECT_EQ(metric_value(healthy.text(), R"(triage_drain_owner{host="gpu-a017",owner="unknown"})"),
            1.0);
}

// Every metric a panel of the shipped Grafana dashboard queries is one a running agent declares.
TEST(FleetMetrics, TheDashboardQueriesOnlyFamiliesTheAgentExports) {
  std::ifstream in(std::string(SOURCE_DIR) + "/packaging/grafana/slurm-triage.json");
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json dashboard = nlohmann::json::parse(text.str());
  std::set<std::string> names;
  const std::regex metric(R"(\b(triage_[a-z_]+|hw_[a-z_]+)\b)");
  for (const nlohmann::json& panel : dashboard["panels"]) {
    for (const nlohmann::json& t : panel.value("targets", nlohmann::json::array())) {
      const std::string expr = t.value("expr", "");
      for (auto it = std::sregex_iterator(expr.begin(), expr.end(), metric);
           it != std::sregex_iterator(); ++it)
        names.insert((*it)[1].str());
    }
  }
  ASSERT_GE(names.size(), 8u);
  testing::AgentHarness h("dashboard", "gpu-a017");
  h.start();
  const std::string page = h.agent().metrics();
  for (const std::string& name : names)
    EXPECT_NE(page.find("# TYPE " + name + " "), std::string::npos) << name;
}

}  // namespace
}  // namespace triage::agent
