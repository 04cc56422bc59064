// Nothing a job prints can change the structure of triage.md.
#include "analyzer/report_render.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/text.h"

namespace triage {
namespace {

Triage hostile() {
  Triage t;
  t.log_path = "out/`x`.log";
  t.status = kStatusFailed;
  t.primary_failure = "python-exception";
  t.primary_title = "Unhandled Python exception";
  t.stage = "## Injected <b>heading</b>";
  Finding f;
  f.cls = "python-exception";
  f.line = 7;
  f.text =
      "```\n# not a heading\n<script>alert(1)</script> | a | b | [x](http://evil) \xff\x1b[31m";
  t.evidence.push_back(f);
  AdditionalFinding a;
  a.cls = "nccl-timeout";
  a.title = "t";
  a.count = 1;
  a.first = f;
  a.relation = "independent";
  t.additional.push_back(a);
  NodeRow r;
  r.host = "n1|evil";
  r.log_hint = "NODE_EXIT exit=1 | injected";
  t.nodes.push_back(r);
  t.recommendations.push_back("Check [this](http://evil) and `code`");
  return t;
}

TEST(ReportRender, LogContentIsFencedOrEscaped) {
  const std::string md = render_markdown(hostile());
  EXPECT_TRUE(is_valid_utf8(md));
  EXPECT_EQ(md.find('\x1b'), std::string::npos);
  // The evidence line is inside a fence longer than any backtick run in it.
  EXPECT_NE(md.find("````text\n"), std::string::npos);
  EXPECT_EQ(md.find("\n# not a heading"), std::string::npos);
  EXPECT_EQ(md.find("## Injected"), std::string::npos);
  EXPECT_NE(md.find("\\#\\# Injected \\<b\\>"), std::string::npos);
  EXPECT_EQ(md.find("[this](http"), std::string::npos);
  EXPECT_NE(md.find("n1\\|evil"), std::string::npos);
  // Table rows keep their column count.
  const size_t row = md.find("| n1");
  ASSERT_NE(row, std::string::npos);
  const std::string line = md.substr(row, md.find('\n', row) - row);
  size_t pipes = 0;
  for (size_t i = 0; i < line.size(); ++i)
    pipes += (line[i] == '|' && (i == 0 || line[i - 1] != '\\')) ? 1u : 0u;
  EXPECT_EQ(pipes, 8u) << line;
}

TEST(ReportRender, JsonKeepsTextVerbatimAndRepairsInvalidUtf8) {
  const std::string js = render_json(hostile());
  const auto j = nlohmann::json::parse(js);
  EXPECT_EQ(j.at("schema_version"), kTriageSchemaVersion);
  const std::string text = j.at("findings").at(0).at("text");
  EXPECT_NE(text.find("<script>alert(1)</script>"), std::string::npos);
  EXPECT_NE(text.find("\xEF\xBF\xBD"), std::string::npos);
  EXPECT_EQ(js.find("\"schema_version\""), js.find('"'));  // first key
  EXPECT_TRUE(j.at("tsdb").is_null());
}

TEST(ReportRender, ATsdbSectionGoesAfterTheProgressProjection) {
  Triage t = hostile();
  t.tsdb.emplace().analysis_type = "hang";
  const std::string md = render_markdown(t);
  EXPECT_LT(md.find("### Training progress projection"), md.find("### TSDB Diagnosis"));
  EXPECT_LT(md.find("### TSDB Diagnosis"), md.find("### Additional findings"));
  EXPECT_EQ(nlohmann::json::parse(render_json(t)).at("tsdb").at("analysis_type"), "hang");
}

TEST(ReportRender, AMovedJobSaysInItsFirstLinesFromWhichNodeAndWhy) {
  Triage t;
  t.log_path = "job.log";
  t.status = kStatusCompleted;
  t.moved.push_back(
      {"gpu-a017", "triage preflight: drain recommended: GPU fell off the bus (Xid 79)"});
  const std::string md = render_markdown(t);
  const size_t at = md.find(
      "**Moved:** off node ` gpu-a017 ` before it started: triage preflight: "
      "drain recommended: GPU fell off the bus (Xid 79)");
  ASSERT_NE(at, std::string::npos) << md;
  EXPECT_LT(at, md.find("### What happened"));
  const nlohmann::json j = nlohmann::json::parse(render_json(t));
  ASSERT_EQ(j["moved"].size(), 1u);
  EXPECT_EQ(j["moved"][0]["node"], "gpu-a017");
  EXPECT_EQ(j["moved"][0]["reason"],
            "triage preflight: drain recommended: GPU fell off the bus (Xid 79)");
  // A job that was not moved has no such field (reports stay as they were).
  EXPECT_FALSE(nlohmann::json::parse(render_json(Triage{})).contains("moved"));
}

TEST(ReportRender, ASharedLeafSwitchIsOneSentenceAndAJsonObject) {
  Triage t;
  t.log_path = "job.log";
  t.status = kStatusFailed;
  t.shared_switch = SharedSwitch{"s1", {"n1", "n2", "n3"}, true};
  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("**Switch:** all 3 implicated nodes (n\\[1-3\\]) hang off leaf switch s1"),
            std::string::npos)
      << md;
  const nlohmann::json j = nlohmann::json::parse(render_json(t));
  EXPECT_EQ(j["shared_switch"]["switch"], "s1");
  EXPECT_EQ(j["shared_switch"]["nodes"], (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_EQ(j["shared_switch"]["sentence"],
            "all 3 implicated nodes (n[1-3]) hang off leaf switch s1");
}

}  // namespace
}  // namespace triage
