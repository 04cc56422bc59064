// The fixture corpus: one directory per situation (fixtures/<name>/), each a job's files as the
// training harness leaves them plus case.json (how to analyse it) and expected.json (the golden
// triage.json). Every fixture is copied to a scratch directory, its log's modification time is set
// to the case's clock, and the analysis must reproduce the golden exactly. UPDATE_GOLDEN=1 rewrites
// the goldens instead (review the diff before committing).
#include <fcntl.h>
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "analyzer/job_analysis.h"
#include "analyzer/report_render.h"
#include "common/model.h"
#include "common/text.h"
#include "common/time_util.h"
#include "test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(TRIAGE_FIXTURES_DIR)) {
    if (fs::exists(e.path() / "case.json")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct CaseRun {
  json triage;
  std::string markdown;
  std::string description;
};

CaseRun run_case(const std::string& name) {
  test::use_source_rules();
  const fs::path src = fs::path(TRIAGE_FIXTURES_DIR) / name;
  const json c = json::parse(test::read_file(src / "case.json"));
  test::ScratchDir scratch("fixture");
  test::copy_tree(src, scratch.path());
  const int64_t now = c.at("now").get<int64_t>();
  pin_now_usec(now * 1000000);
  // The log's mtime is when the generator stopped writing it (or the case's clock): mtimes of
  // checked-out files mean nothing.
  const int64_t mtime = c.value("mtime", now);
  const fs::path job = scratch.path() / c.at("path").get<std::string>();
  for (const fs::path& p : {job, fs::path(job.string() + ".log")}) {
    if (fs::is_regular_file(p)) {
      const struct timespec ts[2] = {{mtime, 0}, {mtime, 0}};
      ::utimensat(AT_FDCWD, p.c_str(), ts, 0);
    }
  }
  const fs::path cwd = fs::current_path();
  fs::current_path(scratch.path());
  AnalysisOptions opt;
  opt.now_usec = now * 1000000;
  opt.mode = c.value("mode", "basic");
  opt.slurm_state_option = c.value("slurm_state", "");
  std::optional<Evidence> ev;
  if (c.contains("evidence"))
    ev = parse_evidence(test::read_file(c.at("evidence").get<std::string>()), "evidence.json");
  if (opt.slurm_state_option.empty() && !ev) opt.slurm_state_option = "none";
  const JobTarget target = resolve_job_path(c.at("path").get<std::string>());
  const JobReport rep = analyze_job(target, test::shipped_plan(), ev ? &*ev : nullptr, opt);
  fs::current_path(cwd);
  pin_now_usec(std::nullopt);
  CaseRun r;
  r.triage = json::parse(triage_to_json(rep.triage).dump());
  r.triage.erase("tool");  // carries the version number
  r.markdown = render_markdown(rep.triage);
  r.description = c.value("description", "");
  return r;
}

// A gtest-friendly name for a fixture ("cancel-after-hang" -> "cancel_after_hang").
std::string test_name(std::string n) {
  for (char& ch : n) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')))
      ch = '_';
  }
  return n;
}

class Fixture : public ::testing::TestWithParam<std::string> {};

TEST_P(Fixture, MatchesItsGoldenTriageJson) {
  const std::string name = GetParam();
  const CaseRun run = run_case(name);
  const fs::path golden = fs::path(TRIAGE_FIXTURES_DIR) / name / "expected.json";
  const std::string got = run.triage.dump(2, ' ', false, json::error_handler_t::replace) + "\n";
  if (const char* u = std::getenv("UPDATE_GOLDEN"); u != nullptr && std::string(u) == "1") {
    test::write_file(golden, got);
    GTEST_SKIP() << "golden rewritten: " << golden;
  }
  ASSERT_TRUE(fs::exists(golden)) << "no golden yet; run with UPDATE_GOLDEN=1 (" << run.description
                                  << ")";
  const json expected = json::parse(test::read_file(golden));
  if (expected != run.triage) {
    const json patch = json::diff(expected, run.triage);
    FAIL() << name << " (" << run.description << ") differs from its golden:\n" << patch.dump(2);
  }
  // The Markdown report must be displayable whatever the log held.
  EXPECT_TRUE(is_valid_utf8(run.markdown));
  EXPECT_EQ(run.markdown.find('\0'), std::string::npos);
  EXPECT_EQ(run.markdown.find('\x1b'), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Corpus, Fixture, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return test_name(p.param);
                         });

// Beyond the goldens: the facts each situation is about, stated plainly, so that a golden
// regenerated carelessly cannot silently accept a wrong diagnosis.
struct Expect {
  const char* fixture;
  const char* status;
  const char* primary;  // "" = none
};

class FixtureVerdict : public ::testing::TestWithParam<Expect> {};

TEST_P(FixtureVerdict, HasTheExpectedStatusAndPrimaryFailure) {
  const Expect e = GetParam();
  const CaseRun run = run_case(e.fixture);
  EXPECT_EQ(run.triage.at("status"), e.status) << e.fixture;
  if (std::string(e.primary).empty()) {
    EXPECT_TRUE(run.triage.at("primary_failure").is_null())
        << e.fixture << ": " << run.triage.at("primary_failure");
  } else {
    EXPECT_EQ(run.triage.at("primary_failure"), e.primary) << e.fixture;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, FixtureVerdict,
    ::testing::Values(
        Expect{"container-pull-fail", "failed", "container-pull-fail"},
        Expect{"container-load-fail", "failed", "container-load-fail"},
        Expect{"no-gpu", "failed", "no-gpu"}, Expect{"nccl-nic-fail", "failed", "nccl-nic-fail"},
        Expect{"port-fail", "failed", "port-fail"},
        Expect{"rendezvous-fail", "failed", "rendezvous-fail"},
        Expect{"srun-launch-fail", "failed", "srun-launch-fail"},
        Expect{"model-not-found", "failed", "model-not-found"},
        Expect{"patch-branch-fail", "failed", "patch-branch-fail"},
        Expect{"ray-start-fail", "completed", ""},
        Expect{"preflight-timeout", "failed", "preflight-timeout"},
        Expect{"pull-timeout", "failed", "pull-timeout"},
        Expect{"ecc-timeout", "failed", "ecc-timeout"},
        Expect{"train-timeout", "failed", "train-timeout"},
        Expect{"stage-fail", "failed", "stage-fail"},
        Expect{"cascade-oom-nccl-heartbeat", "failed", "oom-host"},
        Expect{"heartbeat-false-positive", "failed", "heartbeat-timeout"},
        Expect{"oom-gpu", "failed", "oom-gpu"}, Expect{"nccl-timeout", "failed", "nccl-timeout"},
        Expect{"xla-compile-fail", "failed", "xla-compile-fail"},
        Expect{"python-exception", "failed", "python-exception"},
        Expect{"signal-kill", "failed", "signal-kill"},
        Expect{"subprocess-fail", "failed", "subprocess-fail"},
        Expect{"actor-fail", "failed", "actor-fail"},
        Expect{"dataloader-fail", "failed", "dataloader-fail"},
        Expect{"storage-error", "failed", "storage-error"},
        Expect{"storage-full", "failed", "storage-full"},
        Expect{"gpu-error", "failed", "gpu-error"},
        Expect{"gpu-hardware-error", "failed", "gpu-hardware-error"},
        Expect{"gpu-device-assert", "failed", "gpu-device-assert"},
        Expect{"ray-node-died", "failed", "ray-node-died"},
        Expect{"cancel-after-hang", "cancelled", "hang"},
        Expect{"cancelled", "cancelled", "cancelled"},
        Expect{"time-limit-restored", "cancelled", "time-limit"},
        Expect{"preempted", "cancelled", "preempted"}, Expect{"node-fail", "failed", "node-fail"},
        Expect{"unknown-death", "unknown", "unknown-death"}, Expect{"hanging", "hanging", "hang"},
        Expect{"running", "running", ""}, Expect{"completed-ray-tunnel", "completed", ""},
        Expect{"harmless-only", "completed", ""}, Expect{"evidence-oom-host", "failed", "oom-host"},
        Expect{"evidence-hardware-fault", "failed", "hardware-fault"},
        Expect{"messy-crlf-ansi-binary", "failed", "oom-gpu"},
        Expect{"plain-sbatch-torch-oom", "failed", "oom-gpu"}),
    [](const ::testing::TestParamInfo<Expect>& p) { return test_name(p.param.fixture); });

TEST(FixtureCorpus, HasAPositiveCaseForEveryClassInTheCatalog) {
  std::set<std::string> seen;
  for (const auto& name : fixture_names()) {
    const CaseRun run = run_case(name);
    if (!run.triage.at("primary_failure").is_null())
      seen.insert(run.triage.at("primary_failure").get<std::string>());
    for (const auto& a : run.triage.at("additional_findings"))
      seen.insert(a.at("class").get<std::string>());
  }
  for (const auto& c : test::shipped_catalog().classes()) {
    EXPECT_TRUE(seen.count(c.id) != 0) << "no fixture exercises class " << c.id;
  }
}

TEST(FixtureCorpus, HarmlessLinesAreNeverReported) {
  const CaseRun run = run_case("harmless-only");
  EXPECT_TRUE(run.triage.at("findings").empty());
  EXPECT_TRUE(run.triage.at("additional_findings").empty())
      << run.triage.at("additional_findings").dump(2);
  EXPECT_GE(run.triage.at("scan").at("harmless_lines").get<int>(), 10);
}

}  // namespace
}  // namespace triage
