// What the analysis hands over: triage.json's `tsdb` object, the triage.md section, the SVG
// timeline, and the `slurm-triage tsdb` command driving all of it end to end.
#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analyzer/tsdb/playbook_table.h"
#include "common/kv_config.h"
#include "common/privilege.h"
#include "common/safe_io.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

class ReportTest : public TsdbTest {
 protected:
  // A hang on two nodes, one of them with a name nobody should paste into Markdown or SVG raw.
  void make_hang(const std::vector<std::string>& hosts = {"node001", "evil<b>|`x*"}) {
    sc_ = std::make_unique<Scenario>(
        ScenarioSpec{.hosts = hosts, .checkpoint_period = 20, .stop_after_s = 2400});
    sc_->build_tsdb(job_dir());
  }
  std::unique_ptr<Scenario> sc_;
};

TEST_F(ReportTest, TheJsonCarriesSourceHostsWindowAndEachPlaybooksRealQueryResults) {
  make_hang();
  auto req = request(*sc_, "hang");
  req.failure_time = sc_->at(3500);
  const auto res = analyse(req);
  const json j = res.to_json();
  EXPECT_EQ(j["source"]["kind"], "job-tsdb");
  EXPECT_EQ(j["source"]["trusted"], false);
  EXPECT_EQ(j["hosts"].size(), 2u);
  EXPECT_TRUE(j["time_range"]["start"]["epoch"].is_number());
  EXPECT_EQ(j["guard"]["status"], "match");
  EXPECT_EQ(j["gpu_model"]["name"], "MI355X");
  ASSERT_TRUE(j["playbooks"].is_array());
  const json* hang = nullptr;
  for (const auto& p : j["playbooks"]) {
    if (p["id"] == "hang") hang = &p;
  }
  ASSERT_NE(hang, nullptr);
  EXPECT_EQ((*hang)["verdict"], "busy-wait-hang");
  EXPECT_EQ((*hang)["hosts"].size(), 2u);
  // The evidence holds what the server answered: the hang-window power of every GPU, ~300 W.
  bool saw_power = false;
  for (const auto& e : (*hang)["evidence"]) {
    if (e["query"].get<std::string>().rfind("avg_over_time(hw_gpu_power_watts", 0) != 0) continue;
    saw_power = true;
    EXPECT_EQ(e["total_rows"], 4);
    for (const auto& r : e["rows"]) {
      EXPECT_NEAR(r["value"].get<double>(), 300, 10);
      EXPECT_TRUE(r["labels"].contains("gpu"));
    }
  }
  EXPECT_TRUE(saw_power);
  EXPECT_EQ(j["correlation"]["stance"], "confirms");
  EXPECT_TRUE(j["chain"]["text"].is_string());
  EXPECT_GT(j["stats"]["queries"].get<int>(), 10);
  // Valid JSON text even with odd host names.
  EXPECT_TRUE(json::accept(j.dump()));
}

TEST_F(ReportTest, APlaybooksFindingsHaveTheLogFindingsKeysPlusTheirGradeAndHosts) {
  // GPU driver errors in node002's dmesg: a warning of the hardware playbook.
  sc_ = std::make_unique<Scenario>(ScenarioSpec{.hosts = {"node001", "node002"}});
  const double from = sc_->at(600);
  sc_->set("hw_dmesg_gpu_errors_total", [=](const SeriesKey& k, double t) -> std::optional<double> {
    return k.host == "node002" && t >= from ? std::floor((t - from) / 60) + 1 : 0;
  });
  sc_->build_tsdb(job_dir());
  const json j = analyse(request(*sc_, "signal-kill")).to_json();
  const json* hw = nullptr;
  for (const auto& p : j["playbooks"]) {
    if (p["id"] == "hardware") hw = &p;
  }
  ASSERT_NE(hw, nullptr);
  ASSERT_FALSE((*hw)["findings"].empty()) << j.dump(1);
  const json& f = (*hw)["findings"][0];
  std::set<std::string> keys;
  for (const auto& [k, v] : f.items())
    keys.insert(k);
  EXPECT_EQ(keys, (std::set<std::string>{"class", "source", "line", "text", "truncated", "trusted",
                                         "rank", "host", "time", "stage", "severity", "hosts"}));
  EXPECT_EQ(f["source"], "metrics:hardware");
  EXPECT_EQ(f["severity"], "warning");
  EXPECT_EQ(f["hosts"], json::array({"node002"}));
  EXPECT_EQ(f["host"], "node002");
  EXPECT_EQ(f["trusted"], false) << "the job's own TSDB is user-writable";
}

TEST_F(ReportTest, TheMarkdownFollowsTheDiagnosisLayoutAndEscapesWhatTheTsdbSays) {
  make_hang();
  const auto res = analyse(request(*sc_, "hang"));
  const std::string md = res.render_markdown({"tsdb-timeline.svg", 2});
  const std::vector<std::string> order = {"## TSDB Diagnosis:",
                                          "**Analysis type:** hang",
                                          "**Time window:**",
                                          "**Nodes:** 2",
                                          "### Findings",
                                          "### Metric evidence",
                                          "### Anomalies detected",
                                          "### Correlation with triage",
                                          "### Recommended next steps"};
  size_t pos = 0;
  for (const auto& h : order) {
    const auto at = md.find(h, pos);
    ASSERT_NE(at, std::string::npos) << "missing or out of order: " << h << "\n" << md;
    pos = at;
  }
  EXPECT_NE(md.find("![TSDB timeline"), std::string::npos);
  EXPECT_NE(md.find("busy-wait-hang"), std::string::npos);
  EXPECT_EQ(md.find("evil<b>"), std::string::npos)
      << "raw HTML from a label value reached the report";
  EXPECT_EQ(md.find("|`x*"), std::string::npos);
}

TEST_F(ReportTest, TheSvgTimelineShowsStepsPowerCheckpointsAndTheFailure) {
  make_hang();
  auto req = request(*sc_, "hang");
  req.failure_time = sc_->at(3500);
  const auto res = analyse(req);
  fs::create_directories(dir_ + "/out");
  UniqueFd d = open_dir(dir_ + "/out");
  ASSERT_TRUE(write_svg_timeline(res, d.get(), "tsdb-timeline.svg"));
  const std::string svg = slurp(dir_ + "/out/tsdb-timeline.svg");
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg"), std::string::npos);
  EXPECT_NE(svg.find("Training step"), std::string::npos);
  EXPECT_NE(svg.find("GPU power per host"), std::string::npos);
  EXPECT_NE(svg.find("checkpoint step 20"), std::string::npos);
  EXPECT_NE(svg.find("failure "), std::string::npos);
  EXPECT_NE(svg.find(">hang<"), std::string::npos);
  EXPECT_NE(svg.find("evil&lt;b&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("evil<b>"), std::string::npos);
  EXPECT_EQ(svg.find("<script"), std::string::npos);
  // Nothing to draw without metrics: no file.
  TsdbResult empty;
  EXPECT_FALSE(write_svg_timeline(empty, d.get(), "none.svg"));
  EXPECT_FALSE(fs::exists(dir_ + "/out/none.svg"));
}

TEST_F(ReportTest, TheCommandRunsThePlaybooksEndToEnd) {
  make_hang({"node001", "node002"});
  const std::string svg = dir_ + "/timeline.svg";
  std::string out;
  const int rc = run_program({SLURM_TRIAGE_BIN,
                              "tsdb",
                              job_dir(),
                              "--class",
                              "hang",
                              "--hosts",
                              "node[001-002]",
                              "--start",
                              std::to_string(sc_->start()),
                              "--end",
                              std::to_string(sc_->end()),
                              "--last-step",
                              std::to_string(sc_->last_step()),
                              "--last-step-time",
                              std::to_string(sc_->last_step_time()),
                              "--checkpoint-period",
                              "20",
                              "--scratch",
                              dir_ + "/scratch",
                              "--rules",
                              TSDB_RULES_DIR,
                              "--format",
                              "json",
                              "--svg",
                              svg},
                             &out);
  ASSERT_EQ(rc, 0) << out;
  const json j = json::parse(out.substr(out.find('{')));
  EXPECT_EQ(j["source"]["kind"], "job-tsdb");
  bool hang = false;
  for (const auto& p : j["playbooks"])
    hang = hang || (p["id"] == "hang" && p["verdict"] == "busy-wait-hang");
  EXPECT_TRUE(hang) << out;
  EXPECT_TRUE(fs::exists(svg));
  EXPECT_TRUE(fs::is_empty(dir_ + "/scratch"));

  // The wrong database: exit 1, no diagnosis.
  ASSERT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", job_dir(), "--class", "hang", "--last-step", "3",
                         "--scratch", dir_ + "/scratch"},
                        &out),
            1)
      << out;
  EXPECT_NE(out.find("refused"), std::string::npos) << out;
  // Usage errors name the problem: exit 2.
  EXPECT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", job_dir(), "--playbook", "9"}, &out), 2);
  EXPECT_NE(out.find("1 to 7"), std::string::npos) << out;
  EXPECT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", job_dir(), "--start", "yesterday-ish"}, &out),
            2);
  EXPECT_NE(out.find("--start"), std::string::npos) << out;
  EXPECT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", "--help"}, &out), 0);
  EXPECT_NE(out.find("--svg FILE"), std::string::npos);
}

TEST_F(ReportTest, RunAsRootTheCommandReadsTheJobDirectoryAsItsOwner) {
  if (!running_as_root()) GTEST_SKIP() << "needs root to change owners";
  make_hang({"node001", "node002"});
  // The job belongs to nobody (65534); its prometheus/ was made root-only. Only root could read it,
  // so a report that reads it would prove the privilege drop did not happen.
  const uid_t nobody = 65534;
  for (const auto& e : fs::recursive_directory_iterator(job_dir())) {
    ASSERT_EQ(::lchown(e.path().c_str(), nobody, nobody), 0);
  }
  ASSERT_EQ(::chown(job_dir().c_str(), nobody, nobody), 0);
  ASSERT_EQ(::chown((job_dir() + "/prometheus").c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod((job_dir() + "/prometheus").c_str(), 0700), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  fs::permissions(dir_ + "/scratch", fs::perms::all | fs::perms::sticky_bit);
  std::string out;
  ASSERT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", job_dir(), "--class", "hang", "--scratch",
                         dir_ + "/scratch", "--rules", TSDB_RULES_DIR, "--format", "json"},
                        &out),
            0)
      << out;
  const json j = json::parse(out.substr(out.find('{')));
  EXPECT_FALSE(j["available"].get<bool>()) << out;
  EXPECT_NE(j.dump().find("Permission denied"), std::string::npos) << out;

  // Given back to its owner, the same directory is read (as nobody) and diagnosed.
  ASSERT_EQ(::chown((job_dir() + "/prometheus").c_str(), nobody, nobody), 0);
  ASSERT_EQ(run_program({SLURM_TRIAGE_BIN, "tsdb", job_dir(), "--class", "hang", "--scratch",
                         dir_ + "/scratch", "--rules", TSDB_RULES_DIR, "--format", "json"},
                        &out),
            0)
      << out;
  const json ok = json::parse(out.substr(out.find('{')));
  EXPECT_TRUE(ok["available"].get<bool>()) << out;
  EXPECT_TRUE(fs::is_empty(dir_ + "/scratch"));
  // Cleanup as root (the copy was made as nobody and already removed).
  for (const auto& e : fs::recursive_directory_iterator(dir_))
    ::lchown(e.path().c_str(), 0, 0);
}

TEST(TsdbConfig, TriageConfKeysFillTheRequest) {
  KvConfig conf(tsdb_config_keys());
  const auto errs = conf.parse(
      "PrometheusURL=http://prom.cluster:9090\nPrometheusHostLabel=instance\nTsdbQueryTimeout=2m\n"
      "TsdbScratchDir=/var/tmp\n",
      "triage.conf");
  // cppcheck-suppress containerOutOfBounds ; gtest streams the message only when errors exist
  ASSERT_TRUE(errs.empty()) << errs.front().what();
  TsdbRequest req;
  apply_tsdb_config(conf, req);
  EXPECT_EQ(req.cluster_url, "http://prom.cluster:9090");
  EXPECT_EQ(req.host_label, "instance");
  EXPECT_EQ(req.query_timeout_s, 120);
  EXPECT_EQ(req.scratch_dir, "/var/tmp");
  EXPECT_EQ(req.prometheus_binary, "prometheus");
  KvConfig bad(tsdb_config_keys());
  const auto e = bad.parse("PrometheusHostLabel=host\nTsdbScratchDir=tmp\n", "triage.conf");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0].line(), 2);
}

TEST(TsdbHandOff, EachTriageClassGetsTheCatalogsPlaybooksAndFullModeAddsTheHealthChecks) {
  auto playbooks_of = [](const std::string& cls, bool full) {
    return playbooks_for(catalog_class_playbooks({TSDB_RULES_DIR}, cls), full);
  };
  EXPECT_EQ(playbooks_of("hang", false), std::vector<int>{1});
  EXPECT_EQ(playbooks_of("hang", true), (std::vector<int>{1, 5, 6, 7}));
  EXPECT_EQ(playbooks_of("heartbeat-timeout", false), std::vector<int>{2});
  EXPECT_EQ(playbooks_of("oom-host", false), std::vector<int>{3});
  EXPECT_EQ(playbooks_of("node-fail", false), std::vector<int>{4});
  EXPECT_EQ(playbooks_of("signal-kill", false), std::vector<int>{4});
  EXPECT_EQ(playbooks_of("nccl-timeout", true), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(playbooks_of("unknown-death", false), (std::vector<int>{3, 4}));
  EXPECT_EQ(playbooks_of("python-exception", false), (std::vector<int>{5, 6, 7}));
}

TEST(TsdbHandOff, TheReportLabelsTheAnalysisByTheClasssPlaybooks) {
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "hang")), "hang");
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "heartbeat-timeout")),
            "heartbeat");
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "signal-kill")), "hardware");
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "nccl-timeout")),
            "network-health");
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "unknown-death")),
            "oom + hardware");
  EXPECT_EQ(analysis_label(catalog_class_playbooks({TSDB_RULES_DIR}, "python-exception")),
            "health-check");
}

TEST(TsdbHandOff, AnUnknownPlaybookIdInTheCatalogRunsOnlyTheHealthChecks) {
  std::vector<std::string> unknown;
  EXPECT_EQ(playbooks_for({"hnag"}, false, &unknown), (std::vector<int>{5, 6, 7}));
  EXPECT_EQ(unknown, std::vector<std::string>{"hnag"});
  EXPECT_EQ(known_playbook_ids(),
            (std::vector<std::string>{"hang", "heartbeat", "oom", "hardware", "gpu-health",
                                      "network-health", "training-stability"}));
}

}  // namespace
}  // namespace triage::tsdb::testing
