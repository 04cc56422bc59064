// One renderer for every finding: a log line, a node's kernel event and a metrics playbook's
// observation read the same way in triage.md and carry the same keys in triage.json.
#include "analyzer/finding_render.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/text.h"

namespace triage {
namespace {

constexpr int64_t kNoon = 1763726400LL * 1000000;  // 2025-11-21T12:00:00Z

std::vector<std::string> keys(const nlohmann::ordered_json& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items())
    out.push_back(k);
  return out;
}

Finding log_line() {
  Finding f;
  f.cls = "nccl-timeout";
  f.line = 812;
  f.text = "\x1b[31mWatchdog caught collective operation timeout\x1b[0m";
  f.rank = 3;
  f.host = "gpu-a019";
  f.time_usec = kNoon;
  return f;
}

Finding metrics_observation() {
  Finding f;
  f.source = "metrics:network-health";
  f.text = "node002: 41 RDMA CQE errors";
  f.severity = Severity::kWarning;
  f.hosts = {"node002", "node003"};
  f.time_usec = kNoon;
  return f;
}

TEST(FindingRender, ALogLineSaysItsLineTaskHostAndTime) {
  EXPECT_EQ(finding_where_md(log_line()), "line 812 (task 3, host gpu-a019, 2025-11-21T12:00:00Z)");
}

TEST(FindingRender, TrustedSourcesSayTheyAreTrusted) {
  Finding kernel;
  kernel.source = "kernel:gpu_a019";
  kernel.line = 0;
  EXPECT_EQ(finding_where_md(kernel), "kernel log of gpu\\_a019 (trusted)");
  Finding slurm;
  slurm.source = "slurm";
  EXPECT_EQ(finding_where_md(slurm), "Slurm (trusted)");
  Finding file;
  file.source = "logs/rank-3.err";
  file.line = 4;
  EXPECT_EQ(finding_where_md(file), md_code_span("logs/rank-3.err") + " line 4");
}

TEST(FindingRender, AQuoteLosesItsColoursAndMarksACut) {
  Finding f = log_line();
  f.truncated = true;
  EXPECT_EQ(finding_quote(f), "Watchdog caught collective operation timeout [...]");
  f.text = std::string(300, 'x');
  EXPECT_EQ(finding_short_quote_md(f), md_code_span(std::string(240, 'x') + " [...]"));
}

TEST(FindingRender, ALogFindingsJsonKeepsItsKeysAndHasNoSeverity) {
  const auto j = finding_json(log_line());
  EXPECT_EQ(keys(j), (std::vector<std::string>{"class", "source", "line", "text", "truncated",
                                               "trusted", "rank", "host", "time", "stage"}));
  EXPECT_EQ(j.at("time"), "2025-11-21T12:00:00Z");
}

TEST(FindingRender, AMetricsFindingHasTheLogsKeysPlusSeverityAndHosts) {
  const auto j = finding_json(metrics_observation());
  auto expected = keys(finding_json(log_line()));
  expected.emplace_back("severity");
  expected.emplace_back("hosts");
  EXPECT_EQ(keys(j), expected);
  EXPECT_EQ(j.at("source"), "metrics:network-health");
  EXPECT_EQ(j.at("severity"), "warning");
  EXPECT_EQ(j.at("hosts"), (std::vector<std::string>{"node002", "node003"}));
  EXPECT_TRUE(j.at("host").is_null());
  EXPECT_EQ(j.at("time"), "2025-11-21T12:00:00Z");
}

TEST(FindingRender, ATimedLineStartsWithItsTimeWhenKnown) {
  Finding f = metrics_observation();
  EXPECT_EQ(finding_timed_text(f), "2025-11-21T12:00:00Z — node002: 41 RDMA CQE errors");
  f.time_usec = 0;
  EXPECT_EQ(finding_timed_text(f), "node002: 41 RDMA CQE errors");
}

}  // namespace
}  // namespace triage
