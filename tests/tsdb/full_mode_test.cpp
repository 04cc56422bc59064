// `slurm-triage analyze --mode full` end to end: a real hung job's log (the analyzer's
// cancel-after-hang fixture: 4 nodes, training stopped at step 316, scancel three hours later) with
// the job's own TSDB beside it, made by promtool from OpenMetrics, read through a private
// prometheus the analyzer starts and stops itself.
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "analyzer/tsdb/tsdb_dir.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kJob = "7901-mixtral-8x7b";
constexpr double kStepZero = 1795255442;   // 2026-11-21 10:04:02 UTC: "completed step: 0"
constexpr double kStep316 = 1795257939;    // 2026-11-21 10:45:39 UTC: the last completed step
constexpr double kCancelled = 1795269339;  // 2026-11-21 13:55:39 UTC: scancel

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Enough of XML to tell a well-formed SVG from a broken one: every element closed in order, no
// stray '<' or '&' in text, one root.
bool well_formed_xml(const std::string& doc, std::string* why) {
  std::vector<std::string> open;
  size_t i = 0;
  int roots = 0;
  auto fail = [&](const std::string& w) {
    *why = w + " at byte " + std::to_string(i);
    return false;
  };
  while (i < doc.size()) {
    if (doc[i] == '<') {
      if (doc.compare(i, 4, "<!--") == 0) {
        const size_t e = doc.find("-->", i);
        if (e == std::string::npos) return fail("unclosed comment");
        i = e + 3;
        continue;
      }
      const size_t e = doc.find('>', i);
      if (e == std::string::npos) return fail("unclosed tag");
      std::string tag = doc.substr(i + 1, e - i - 1);
      if (tag.find('<') != std::string::npos) return fail("'<' inside a tag");
      if (!tag.empty() && tag.front() == '?') {
        if (tag.back() != '?') return fail("bad processing instruction");
      } else if (!tag.empty() && tag.front() == '/') {
        if (open.empty() || open.back() != tag.substr(1)) return fail("mismatched </" + tag + ">");
        open.pop_back();
      } else {
        const bool self_closing = !tag.empty() && tag.back() == '/';
        const std::string name = tag.substr(0, tag.find_first_of(" \t\n/"));
        if (name.empty()) return fail("empty tag name");
        if (open.empty()) ++roots;
        if (!self_closing) open.push_back(name);
        // Attribute values must be quoted and carry no raw '<' or unescaped '&'.
        for (size_t a = tag.find('&'); a != std::string::npos; a = tag.find('&', a + 1)) {
          const size_t semi = tag.find(';', a);
          if (semi == std::string::npos || semi - a > 8) return fail("raw '&' in a tag");
        }
      }
      i = e + 1;
    } else {
      if (doc[i] == '&') {
        const size_t semi = doc.find(';', i);
        if (semi == std::string::npos || semi - i > 8) return fail("raw '&' in text");
      }
      if (open.empty() && !std::isspace(static_cast<unsigned char>(doc[i])))
        return fail("text outside the root element");
      ++i;
    }
  }
  if (!open.empty()) return fail("unclosed <" + open.back() + ">");
  if (roots != 1) return fail(std::to_string(roots) + " root elements");
  return true;
}

// The real prometheus, searched in $PATH before the test puts its wrapper first.
std::string real_prometheus(const std::string& path_var) {
  std::stringstream ss(path_var);
  std::string d;
  while (std::getline(ss, d, ':')) {
    std::string p = (d.empty() ? "." : d) + "/prometheus";
    if (::access(p.c_str(), X_OK) == 0) return p;
  }
  return "prometheus";
}

const json* json_playbook(const json& tsdb, const std::string& id) {
  for (const auto& p : tsdb.at("playbooks")) {
    if (p.at("id") == id) return &p;
  }
  return nullptr;
}

class FullModeTest : public TsdbTest {
 protected:
  // The hung job's metrics, built once: the same four nodes and step schedule as its log, GPUs at
  // training power until step 316, then spinning at busy-wait power until the cancel.
  static void SetUpTestSuite() {
    ::setenv("SLURM_TRIAGE_DATADIR", TRIAGE_SOURCE_DIR, 1);
    ::setenv("SLURM_TRIAGE_RULES_OVERRIDE", "", 1);
    ::setenv("TZ", "UTC", 1);
    built_ = std::string(TSDB_TEST_TMP) + "/FullModeTest.tsdb." + std::to_string(::getpid());
    fs::remove_all(built_);
    const double step_time = 7.9;
    const double start = kStepZero - 2 * step_time;
    Scenario sc({.hosts = {"gpu-a017", "gpu-a018", "gpu-a019", "gpu-a020"},
                 .start = start,
                 .duration_s = std::ceil(kCancelled + 30 - start),
                 .interval_s = 30,
                 .step_time_s = step_time,
                 .checkpoint_period = 200,
                 .checkpoint_extra_s = 0,
                 .stop_after_s = kStep316 + 5 - start});
    ASSERT_EQ(sc.last_step(), 316);
    sc.build_tsdb(built_);
  }
  static void TearDownTestSuite() { fs::remove_all(built_); }

  void SetUp() override {
    TsdbTest::SetUp();
    fs::copy(fs::path(TRIAGE_FIXTURES_DIR) / "cancel-after-hang/outputs", outputs(),
             fs::copy_options::recursive | fs::copy_options::copy_symlinks);
    fs::copy(built_ + "/prometheus", job() / "prometheus", fs::copy_options::recursive);
    // A prometheus on PATH that leaves a mark when it is started, then is the real one.
    fs::create_directories(dir_ + "/bin");
    saved_path_ = std::getenv("PATH") != nullptr ? std::getenv("PATH") : "/usr/bin:/bin";
    const std::string wrapper = dir_ + "/bin/prometheus";
    std::ofstream(wrapper) << "#!/bin/sh\necho started >> '" << marker() << "'\n"
                           << "exec '" << real_prometheus(saved_path_) << "' \"$@\"\n";
    fs::permissions(wrapper, fs::perms::owner_all);
    ::setenv("PATH", (dir_ + "/bin:" + saved_path_).c_str(), 1);
    ::setenv("TMPDIR", (dir_ + "/scratch").c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", saved_path_.c_str(), 1);
    ::unsetenv("TMPDIR");
    TsdbTest::TearDown();
  }

  fs::path outputs() const { return fs::path(dir_) / "outputs"; }
  fs::path job() const { return outputs() / kJob; }
  std::string marker() const { return dir_ + "/prometheus-started"; }
  bool prometheus_started() const { return fs::exists(marker()); }

  int analyze(const std::vector<std::string>& extra, std::string* out) const {
    std::vector<std::string> argv = {SLURM_TRIAGE_BIN, "analyze",    "--slurm-state", "none",
                                     "--now",          "1795341600", "--write",       "-q"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    argv.push_back(job().string());
    return run_program(argv, out);
  }
  json triage_json() const { return json::parse(slurp(job() / "triage.json")); }
  std::string triage_md() const { return slurp(job() / "triage.md"); }

  static std::string built_;
  std::string saved_path_;
};

std::string FullModeTest::built_;

TEST_F(FullModeTest, AFullAnalysisOfAHungJobConfirmsTheBusyWaitHangAndDrawsTheTimeline) {
  std::string out;
  // 1: analysed, and the job did not end well.
  ASSERT_EQ(analyze({"--mode", "full"}, &out), 1) << out;
  EXPECT_TRUE(prometheus_started());

  const json j = triage_json();
  EXPECT_EQ(j.at("mode"), "full");
  EXPECT_EQ(j.at("primary_failure"), "hang");
  const json& t = j.at("tsdb");
  ASSERT_TRUE(t.is_object()) << j.dump(1);
  EXPECT_EQ(t.at("source").at("kind"), "job-tsdb") << t.dump(1);
  EXPECT_EQ(t.at("source").at("trusted"), false);
  EXPECT_EQ(t.at("hosts").size(), 4u);
  EXPECT_TRUE(t.at("time_range").at("start").at("epoch").is_number());
  EXPECT_EQ(t.at("guard").at("status"), "match") << t.at("guard").dump();
  const json* hang = json_playbook(t, "hang");
  ASSERT_NE(hang, nullptr) << t.dump(1);
  EXPECT_EQ(hang->at("verdict"), "busy-wait-hang") << hang->dump(1);
  EXPECT_EQ(hang->at("hosts").size(), 4u);
  EXPECT_TRUE(hang->at("findings").is_array());
  // The verdict rests on real query results: GPU power per host and GPU after the last step.
  bool power_rows = false;
  for (const auto& q : hang->at("evidence")) {
    if (q.at("query").get<std::string>().find("hw_gpu_power_watts") != std::string::npos)
      power_rows = power_rows || !q.at("rows").empty();
  }
  EXPECT_TRUE(power_rows) << hang->at("evidence").dump(1);
  // Full mode always adds the GPU and network health summaries.
  EXPECT_NE(json_playbook(t, "gpu-health"), nullptr);
  EXPECT_NE(json_playbook(t, "network-health"), nullptr);
  EXPECT_EQ(t.at("timeline_svg"), "triage-timeline.svg");

  const std::string md = triage_md();
  EXPECT_NE(md.find("TSDB Diagnosis"), std::string::npos) << md;
  EXPECT_NE(md.find("Correlation with triage"), std::string::npos);
  EXPECT_NE(md.find("busy-wait-hang"), std::string::npos);
  EXPECT_NE(md.find("](triage-timeline.svg)"), std::string::npos);

  const fs::path svg = job() / "triage-timeline.svg";
  ASSERT_TRUE(fs::is_regular_file(fs::symlink_status(svg)));
  // Never readable by more people than the log (and the report) are.
  EXPECT_EQ(fs::status(svg).permissions() & fs::perms::others_write, fs::perms::none);
  const std::string doc = slurp(svg);
  std::string why;
  EXPECT_TRUE(well_formed_xml(doc, &why)) << why;
  EXPECT_NE(doc.find("<svg"), std::string::npos);
  EXPECT_NE(doc.find("gpu-a017"), std::string::npos);

  // Nothing of the private server or its copy is left.
  EXPECT_TRUE(fs::is_empty(dir_ + "/scratch"));
}

TEST_F(FullModeTest, ABasicAnalysisOfTheSameJobNeverStartsPrometheus) {
  std::string out;
  ASSERT_EQ(analyze({"--mode", "basic"}, &out), 1) << out;
  EXPECT_FALSE(prometheus_started());
  const json j = triage_json();
  EXPECT_EQ(j.at("mode"), "basic");
  EXPECT_TRUE(j.at("tsdb").is_null());
  EXPECT_EQ(triage_md().find("TSDB Diagnosis"), std::string::npos);
  EXPECT_FALSE(fs::exists(job() / "triage-timeline.svg"));
}

TEST_F(FullModeTest, ACorruptTsdbIsANoteAndTheLogTriageStillStands) {
  const auto scan = scan_tsdb_dir(job().string());
  ASSERT_FALSE(scan.blocks.empty());
  for (const auto& b : scan.blocks)
    std::ofstream(job() / "prometheus" / b.ulid / "index", std::ios::trunc) << "garbage";
  std::string out;
  EXPECT_EQ(analyze({"--mode", "full"}, &out), 1) << out;
  const json j = triage_json();
  EXPECT_EQ(j.at("primary_failure"), "hang");
  EXPECT_EQ(j.at("tsdb").at("available"), false);
  EXPECT_TRUE(j.at("tsdb").at("timeline_svg").is_null());
  const std::string md = triage_md();
  EXPECT_NE(md.find("No metrics could be read"), std::string::npos) << md;
  EXPECT_NE(md.find("could not start a private prometheus"), std::string::npos) << md;
  EXPECT_NE(md.find("Full mode: the TSDB playbooks could not read"), std::string::npos);
  // No "all clear" from metrics nobody read.
  EXPECT_EQ(md.find("stayed within the thresholds"), std::string::npos);
  EXPECT_FALSE(fs::exists(job() / "triage-timeline.svg"));
  EXPECT_TRUE(fs::is_empty(dir_ + "/scratch"));
}

TEST_F(FullModeTest, NoPrometheusBinaryIsANoteNotAFailedAnalysis) {
  std::string out;
  EXPECT_EQ(analyze({"--mode", "full", "--prometheus", dir_ + "/nowhere/prometheus"}, &out), 1)
      << out;
  EXPECT_FALSE(prometheus_started());
  const json j = triage_json();
  EXPECT_EQ(j.at("tsdb").at("available"), false);
  EXPECT_NE(triage_md().find("no prometheus binary"), std::string::npos) << triage_md();
}

TEST_F(FullModeTest, AJobThatRanWithoutItsMetricsStackSaysSo) {
  fs::remove_all(job() / "prometheus");
  std::string out;
  EXPECT_EQ(analyze({"--mode", "full"}, &out), 1) << out;
  EXPECT_FALSE(prometheus_started());
  EXPECT_NE(triage_md().find("RAY=0"), std::string::npos) << triage_md();
}

// Issue 28: a job whose step time rises by 30% from some step on while one of its two nodes'
// GPU clocks drop (the node throttles) at that time: full mode names that node for the slowdown
// and as a node-only straggler, and draws the step time and the nodes' clocks.
TEST_F(TsdbTest, AFullAnalysisNamesTheNodeWhoseClocksDroppedWhenTheStepTimeRose) {
  ::setenv("SLURM_TRIAGE_DATADIR", TRIAGE_SOURCE_DIR, 1);
  ::setenv("SLURM_TRIAGE_RULES_OVERRIDE", "", 1);
  ::setenv("TZ", "UTC", 1);
  ::setenv("TMPDIR", (dir_ + "/scratch").c_str(), 1);
  const double start = 1795255200;  // 2026-11-21 10:00:00 UTC
  Scenario sc({.hosts = {"node001", "node002"},
               .start = start,
               .duration_s = 3000,
               .interval_s = 15,
               .step_time_s = 10});
  const double drop = start + 1500;
  sc.set("hw_gpu_clock_mhz", [&](const SeriesKey& k, double t) -> std::optional<double> {
    return (k.host == "node002" && t >= drop ? 1400 : 2100) + 20 * Scenario::jitter(k, t, 3);
  });
  const fs::path out = fs::path(dir_) / "outputs";
  const fs::path job = out / "9160-llama3-8b";
  fs::create_directories(job);
  // The log: both ranks print every step the TSDB's tb_step saw, with its time; from the drop on
  // each step states 30% more seconds.
  std::string log;
  for (const auto& [step, t] : sc.steps()) {
    char stamp[32];
    const auto tt = static_cast<time_t>(t);
    struct tm tm {};
    gmtime_r(&tt, &tm);
    (void)std::strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &tm);
    for (int r = 0; r < 2; ++r) {
      char line[160];
      (void)std::snprintf(line, sizeof line, "%d: [%s] completed step: %lld, seconds: %.3f\n", r,
                          stamp, static_cast<long long>(step), t >= drop ? 13.0 : 10.0);
      log += line;
    }
  }
  std::ofstream(out / "9160-llama3-8b.log") << log;
  fs::create_symlink("../9160-llama3-8b.log", job / "log");
  sc.build_tsdb(job.string());

  std::string output;
  run_program({SLURM_TRIAGE_BIN, "analyze", "--slurm-state", "none", "--now", "1795341600",
               "--write", "-q", "--mode", "full", job.string()},
              &output);
  const json j = json::parse(slurp(job / "triage.json"));
  ASSERT_TRUE(j.at("slowdown").is_object()) << j.dump(1);
  EXPECT_EQ(j.at("slowdown").at("node"), "node002") << j.at("slowdown").dump();
  EXPECT_NEAR(j.at("slowdown").at("from_s").get<double>(), 10.0, 0.01);
  EXPECT_NEAR(j.at("slowdown").at("to_s").get<double>(), 13.0, 0.01);
  // The log has no per-rank pace; the TSDB's clocks make node002 a node-only straggler from the
  // drop on: 1400 MHz against node001's 2100 MHz.
  ASSERT_EQ(j.at("stragglers").size(), 1u) << j.at("stragglers").dump(1);
  const json& st = j.at("stragglers").at(0);
  EXPECT_TRUE(st.at("rank").is_null());
  EXPECT_EQ(st.at("node"), "node002");
  EXPECT_NEAR(st.at("relative_speed").get<double>(), 1400.0 / 2100.0, 0.02);
  EXPECT_EQ(st.at("since"), "2026-11-21T10:25:00Z");
  EXPECT_EQ(st.at("basis"), "gpu-core-clock");
  const std::string md = slurp(job / "triage.md");
  EXPECT_NE(md.find("node ` node002 `: its GPU clocks fell from"), std::string::npos) << md;
  EXPECT_NE(md.find("](triage-step-time.svg)"), std::string::npos);
  EXPECT_NE(md.find("](triage-gpu-clocks.svg)"), std::string::npos);
  for (const char* name : {"triage-step-time.svg", "triage-gpu-clocks.svg"}) {
    std::string why;
    const std::string doc = slurp(job / name);
    EXPECT_TRUE(well_formed_xml(doc, &why)) << name << ": " << why;
  }
  EXPECT_NE(slurp(job / "triage-gpu-clocks.svg").find(">node002</text>"), std::string::npos);
  ::unsetenv("TMPDIR");
}

}  // namespace
}  // namespace triage::tsdb::testing
