// The slurm-triage binary as users and the agent run it: exit codes, formats, --write, outputs/
// folders, job ids, evidence on stdin, and the rules subcommand.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;
using test::run_cli;

const std::vector<std::string> kOffline = {"--slurm-state", "none", "--now", "1795341600"};

std::vector<std::string> args(std::initializer_list<std::string> extra, bool offline = true) {
  std::vector<std::string> a = {"analyze"};
  if (offline) a.insert(a.end(), kOffline.begin(), kOffline.end());
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// A copy of a fixture's outputs/ folder.
struct Copy {
  test::ScratchDir d{"cli"};
  explicit Copy(const std::string& fixture) {
    test::copy_tree(fs::path(TRIAGE_FIXTURES_DIR) / fixture, d.path());
  }
  fs::path operator/(const std::string& rel) const { return d / rel; }
};

TEST(Cli, HelpListsTheOptionsAndExitCodes) {
  const auto r = run_cli({"analyze", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* s :
       {"--format md|json", "--write", "--evidence FILE|-", "--mode basic|full", "--slurm-state",
        "--now EPOCH", "--report-path", "exit status:", "3  an input could not be read"}) {
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  }
  EXPECT_EQ(run_cli({"--help"}).exit_code, 0);
}

TEST(Cli, UsageErrorsExitWith2) {
  EXPECT_EQ(run_cli({"analyze", "--bogus"}).exit_code, 2);
  EXPECT_EQ(run_cli({"analyze", "--format", "xml", "x"}).exit_code, 2);
  EXPECT_EQ(run_cli({"analyze"}).exit_code, 2);
  EXPECT_EQ(run_cli({"analyze", "--report-path", "x.md", "x"}).exit_code, 2);
  EXPECT_EQ(run_cli({"nope"}).exit_code, 2);
}

TEST(Cli, AMissingInputExitsWith3) {
  const auto r = run_cli(args({"/nonexistent/outputs/1-x"}));
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_NE(r.err.find("no such log file"), std::string::npos);
}

TEST(Cli, AMissingInputPrintsOnlyItsErrorAndNoEmptySummary) {
  for (const char* format : {"md", "json"}) {
    const auto r = run_cli(args({"--format", format, "/nonexistent/outputs/1-x"}));
    EXPECT_EQ(r.exit_code, 3) << format;
    EXPECT_NE(r.err.find("no such log file"), std::string::npos) << format;
    EXPECT_EQ(r.out, "") << format;
  }
}

TEST(Cli, AFailedJobExitsWith1AndACompletedOneWith0) {
  Copy failed("oom-gpu");
  const auto r = run_cli(args({(failed / "outputs/9121-llama3-70b").string()}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("**Primary failure:** ` oom-gpu `"), std::string::npos) << r.out;
  Copy ok("completed-ray-tunnel");
  EXPECT_EQ(run_cli(args({(ok / "outputs/7950-llama3-8b").string()})).exit_code, 0);
}

TEST(Cli, JsonOutputIsTheTriageDocument) {
  Copy c("cancel-after-hang");
  const auto r =
      run_cli(args({"--format", "json", (c / "outputs/7901-mixtral-8x7b.log").string()}));
  ASSERT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("status"), "cancelled");
  EXPECT_EQ(j.at("primary_failure"), "hang");
  EXPECT_EQ(j.at("job_dir"), (c / "outputs/7901-mixtral-8x7b").string());
  for (const char* k : {"schema_version", "stage", "findings", "progress", "nodes",
                        "recommendations", "additional_findings", "tsdb"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
}

TEST(Cli, WriteFillsTheJobDirectoryAtomicallyAndReplacesAPlantedSymlink) {
  Copy c("python-exception");
  const fs::path job = c / "outputs/9124-llama3-8b";
  test::write_file(c / "precious", "do not touch");
  fs::create_symlink(c / "precious", job / "triage.md");
  ::chmod((c / "outputs/9124-llama3-8b.log").c_str(), 0600);
  const auto r = run_cli(args({"--write", "-q", job.string()}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(r.out.empty());
  EXPECT_EQ(test::read_file(c / "precious"), "do not touch");
  ASSERT_FALSE(fs::is_symlink(job / "triage.md"));
  EXPECT_NE(test::read_file(job / "triage.md").find("python-exception"), std::string::npos);
  EXPECT_EQ(nlohmann::json::parse(test::read_file(job / "triage.json")).at("primary_failure"),
            "python-exception");
  struct stat st {};
  ASSERT_EQ(::stat((job / "triage.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "a private log gives a private report";
  for (const auto& e : fs::directory_iterator(job)) {
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos)
        << "temporary left behind";
  }
}

TEST(Cli, WithoutAJobDirectoryTheReportGoesBesideTheLogNamedByJobId) {
  Copy c("plain-sbatch-torch-oom");
  const auto r = run_cli(args({"--write", "-q", (c / "slurm-9151.out").string()}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(fs::exists(c / "triage-9151.md"));
  EXPECT_TRUE(fs::exists(c / "triage-9151.json"));
  const auto r2 = run_cli(args({"--write", "-q", "--report-path", (c / "reports-x.md").string(),
                                (c / "slurm-9151.out").string()}));
  EXPECT_EQ(r2.exit_code, 1);
  EXPECT_TRUE(fs::exists(c / "reports-x.md"));
  EXPECT_TRUE(fs::exists(c / "reports-x.json"));
}

TEST(Cli, AnOutputsFolderGetsASummaryTableAndSkipsSharedCheckpointDirectories) {
  test::ScratchDir d("folder");
  for (const char* f : {"oom-gpu", "completed-ray-tunnel", "cancel-after-hang"}) {
    test::copy_tree(fs::path(TRIAGE_FIXTURES_DIR) / f / "outputs", d / "outputs");
  }
  fs::create_directories(d / "outputs/ckpt-llama3-70b/checkpoints/200");
  const auto r = run_cli(args({"--write", (d / "outputs").string()}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.out.find("JOB"), std::string::npos);
  auto row = [&](const std::string& job) {
    const size_t at = r.out.find("\n" + job + " ");
    return at == std::string::npos ? std::string()
                                   : r.out.substr(at + 1, r.out.find('\n', at + 1) - at - 1);
  };
  EXPECT_NE(row("7901-mixtral-8x7b").find(" cancelled  hang "), std::string::npos) << r.out;
  EXPECT_NE(row("7950-llama3-8b").find(" completed "), std::string::npos) << r.out;
  EXPECT_NE(row("9121-llama3-70b").find(" failed     oom-gpu "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("skipped (no 'log' entry"), std::string::npos);
  EXPECT_NE(r.out.find("ckpt-llama3-70b"), std::string::npos);
  EXPECT_TRUE(fs::exists(d / "outputs/9121-llama3-70b/triage.md"));
  EXPECT_FALSE(fs::exists(d / "outputs/ckpt-llama3-70b/triage.md"));
  const auto js = run_cli(args({"--format", "json", (d / "outputs").string()}));
  const auto j = nlohmann::json::parse(js.out);
  EXPECT_EQ(j.at("jobs").size(), 3u);
  EXPECT_EQ(j.at("skipped").size(), 1u);
}

TEST(Cli, AJobIdIsFoundUnderOutputs) {
  Copy c("signal-kill");
  const auto r = run_cli(args({"--outputs", (c / "outputs").string(), "--format", "json", "9125"}));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("primary_failure"), "signal-kill");
  EXPECT_EQ(run_cli(args({"--outputs", (c / "outputs").string(), "1"})).exit_code, 3);
}

TEST(Cli, EvidenceOnStdinDrivesTheDiagnosisAndNamesTheReportPath) {
  Copy c("evidence-oom-host");
  auto ev = nlohmann::json::parse(test::read_file(c / "evidence.json"));
  ev["job"]["stdout"] = (c / "outputs/9140-llama3-70b.log").string();
  ev["report_path"] = (c / "agent-report.md").string();
  const auto r =
      run_cli({"analyze", "--now", "1795341600", "--evidence", "-", "--write", "--format", "json"},
              ev.dump());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("primary_failure"), "oom-host");
  EXPECT_EQ(j.at("job").at("slurm_state_source"), "evidence");
  EXPECT_TRUE(fs::exists(c / "agent-report.md"));
  EXPECT_TRUE(fs::exists(c / "agent-report.json"));
  const auto bad =
      run_cli({"analyze", "--evidence", "-", "x"}, "{\"schema_version\": 1, \"nodes\": 5}");
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_NE(bad.err.find("nodes"), std::string::npos) << bad.err;
}

TEST(Cli, ARequeueNoteIsReportedAndTheAttemptKeepsItsOwnCopy) {
  Copy c("evidence-oom-host");
  auto ev = nlohmann::json::parse(test::read_file(c / "evidence.json"));
  ev["job"]["stdout"] = (c / "outputs/9140-llama3-70b.log").string();
  ev["report_path"] = (c / "triage.md").string();
  ev["requeue"] = {{"outcome", "requeued"},
                   {"reason", "platform failure on gpu-a017 (trusted evidence)"},
                   {"excluded", {"gpu-a017"}},
                   {"attempt", 0},
                   {"max", 1},
                   {"steps", {"scontrol requeuehold 9140: done"}}};
  const auto r =
      run_cli({"analyze", "--now", "1795341600", "--evidence", "-", "--write", "--format", "json"},
              ev.dump());
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("report_path"), (c / "triage.md").string());
  EXPECT_EQ(j.at("requeue").at("outcome"), "requeued");
  EXPECT_EQ(j.at("requeue").at("attempt_report"), (c / "triage.attempt0.md").string());
  for (const char* name : {"triage.md", "triage.attempt0.md", "triage.attempt0.json"})
    EXPECT_TRUE(fs::exists(c / name)) << name;
  const std::string md = test::read_file(c / "triage.attempt0.md");
  EXPECT_NE(md.find("### Requeue (--triage-requeue=1)"), std::string::npos) << md;
  EXPECT_NE(md.find("platform failure on gpu-a017"), std::string::npos) << md;
  EXPECT_NE(md.find("Nodes excluded from the next attempt: ` gpu-a017 `"), std::string::npos) << md;

  ev["requeue"]["outcome"] = "maybe";
  EXPECT_EQ(run_cli({"analyze", "--evidence", "-", "x"}, ev.dump()).exit_code, 3)
      << "an outcome the agent never writes is bad evidence";
}

TEST(Cli, FullModeReadsRankAndRayWorkerLogs) {
  Copy c("subprocess-fail");
  const fs::path job = c / "outputs/9126-llama3-8b";
  test::write_file(job / "rank-0.log",
                   "Traceback (most recent call last):\nKeyError: 'vocab_size'\n");
  test::write_file(job / "ray_logs/session_1/worker-abc.err",
                   "ray.exceptions.RayActorError: actor died\n");
  const auto basic = run_cli(args({"--format", "json", job.string()}));
  const auto full = run_cli(args({"--format", "json", "--mode", "full", job.string()}));
  auto classes = [](const std::string& out) {
    std::set<std::string> s;
    const auto j = nlohmann::json::parse(out);
    if (!j.at("primary_failure").is_null()) s.insert(j.at("primary_failure").get<std::string>());
    for (const auto& a : j.at("additional_findings"))
      s.insert(a.at("class"));
    return s;
  };
  EXPECT_EQ(classes(basic.out).count("actor-fail"), 0u);
  const auto f = classes(full.out);
  EXPECT_EQ(f.count("actor-fail"), 1u) << full.out;
  EXPECT_EQ(f.count("python-exception"), 1u);
}

TEST(Cli, ABrokenRuleCatalogStopsTheAnalysisWith5) {
  test::ScratchDir d("rules");
  test::write_file(d / "bad.rules", "[signature oops]\npattern = (unclosed\nexplain = x\n");
  const auto r = run_cli(args({"--rules", d.str(), "x"}));
  EXPECT_EQ(r.exit_code, 5);
  EXPECT_NE(r.err.find("bad.rules:2:"), std::string::npos) << r.err;
}

TEST(Cli, RulesCheckAndList) {
  const auto ok = run_cli({"rules", "check"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find(": ok"), std::string::npos);
  test::ScratchDir d("rules");
  test::write_file(d / "site.rules", "[signature x-y]\npattern = \\d+\nexplain = x\n");
  const auto bad = run_cli({"rules", "check", d.str()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("site.rules:2: pattern: has no literal"), std::string::npos) << bad.out;
  const auto list = run_cli({"rules", "list"});
  EXPECT_EQ(list.exit_code, 0);
  EXPECT_NE(list.out.find("oom-host"), std::string::npos);
  EXPECT_NE(list.out.find("scancel-cascade"), std::string::npos);
}

TEST(Cli, RulesCheckRunsTheKernelRulesExamplesToo) {
  test::ScratchDir d("rules");
  test::write_file(d / "site.rules",
                   "[kernel-rule beegfs-down]\nkind = nfs-timeout\n"
                   "pattern = ^beegfs: .*Communication error with\n"
                   "example = beegfs: connection to meta01 restored\n");
  const auto bad = run_cli({"rules", "check", d.str()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("site.rules:4: [kernel-rule beegfs-down]: example: no event of this "
                         "rule: it opens no event"),
            std::string::npos)
      << bad.out;
}

TEST(Cli, RulesCheckRejectsASiteClassClaimingAnExitCodeAnotherClassHas) {
  test::ScratchDir d("rules");
  test::write_file(d / "site.rules",
                   "[signature watchdog-kill]\npattern = killed by the watchdog\nexit-code = 137\n"
                   "playbook = thermal\nexplain = x\n");
  const auto bad = run_cli({"rules", "check", d.str()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("site.rules:3: [signature watchdog-kill]: exit-code: 137 is already "
                         "claimed by [signature signal-kill]"),
            std::string::npos)
      << bad.out;
  EXPECT_NE(bad.out.find("site.rules:4: [signature watchdog-kill]: playbook: unknown playbook "
                         "'thermal'"),
            std::string::npos)
      << bad.out;
}

TEST(Cli, RulesShowPrintsAClassesRolesBlameAndPlaybooks) {
  const auto hang = run_cli({"rules", "show", "hang"});
  EXPECT_EQ(hang.exit_code, 0) << hang.err;
  EXPECT_NE(hang.out.find("[signature hang]\n"), std::string::npos) << hang.out;
  EXPECT_NE(hang.out.find("\nderived          stall\n"), std::string::npos) << hang.out;
  EXPECT_NE(hang.out.find("\nplaybook         hang\n"), std::string::npos) << hang.out;
  const auto death = run_cli({"rules", "show", "unknown-death"});
  EXPECT_NE(death.out.find("\nplaybook         oom hardware\n"), std::string::npos) << death.out;
  const auto oom = run_cli({"rules", "show", "oom-host"});
  EXPECT_NE(oom.out.find("\nblame            user-config\n"), std::string::npos) << oom.out;
  EXPECT_EQ(run_cli({"rules", "show", "no-such-class"}).exit_code, 1);
  EXPECT_EQ(run_cli({"rules", "show"}).exit_code, 2);
  const auto list = run_cli({"rules", "list"});
  EXPECT_NE(list.out.find(" BLAME "), std::string::npos) << list.out;
}

}  // namespace
}  // namespace triage
