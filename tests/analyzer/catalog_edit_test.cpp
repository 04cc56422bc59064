// Failure classes are data: moving an exit code or a playbook to another class, or adding a class
// with an exit code, is an edit to a rules file that changes the verdict with no code change.
#include <gtest/gtest.h>

#include "analyzer/catalog_consistency.h"
#include "analyzer/diagnosis.h"
#include "analyzer/tsdb_handoff.h"
#include "test_support.h"

namespace triage {
namespace {

const std::vector<std::string> kEveryPlaybook = {
    "hang", "heartbeat", "oom", "hardware", "gpu-health", "network-health", "training-stability"};

std::string shipped_rules_text() {
  return test::read_file(std::filesystem::path(TRIAGE_SOURCE_DIR) / "rules/log-signatures.rules");
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

// A catalog loaded from `text` written as the only rules file of a scratch directory; it must be
// loadable and consistent.
SignatureCatalog edited_catalog(const std::string& text) {
  test::ScratchDir d("edited-rules");
  test::write_file(d / "log-signatures.rules", text);
  RulesLoad rl = load_rule_layers({d.str()});
  std::vector<InputError> errors = rl.errors;
  SignatureCatalog cat = SignatureCatalog::from_sections(rl.sections, errors);
  for (auto& e : check_catalog_consistency(cat, kEveryPlaybook))
    errors.push_back(std::move(e));
  for (const auto& e : errors)
    ADD_FAILURE() << e.what();
  return cat;
}

// A job that failed with `code` and printed nothing any class matches.
std::string primary_of_failed_job(const SignatureCatalog& cat, int code) {
  const ScanPlan plan(cat);
  const ScanResult scan =
      test::scan_text_with(plan, "starting training\n JOB SUMMARY\n Status: FAILED (exit " +
                                     std::to_string(code) + ")\n");
  DiagnosisInput in;
  in.catalog = &cat;
  in.scan = &scan;
  in.slurm_state = "FAILED";
  in.slurm_state_source = "option";
  return diagnose(in).primary_failure;
}

TEST(CatalogEdit, MovingExitCode137FromSignalKillToOomHostChangesThePrimaryFailure) {
  const std::string shipped = shipped_rules_text();
  EXPECT_EQ(primary_of_failed_job(edited_catalog(shipped), 137), "signal-kill");

  std::string edited =
      replaced(shipped, "exit-code = 134 135 137 139\n", "exit-code = 134 135 139\n");
  edited = replaced(edited, "slurm-state = OUT_OF_MEMORY\n",
                    "slurm-state = OUT_OF_MEMORY\nexit-code = 137\n");
  EXPECT_EQ(primary_of_failed_job(edited_catalog(edited), 137), "oom-host");
}

TEST(CatalogEdit, ANewClassWithAnExitCodeNamesTheFailureOfJobsEndingWithIt) {
  const std::string shipped = shipped_rules_text();
  EXPECT_EQ(primary_of_failed_job(edited_catalog(shipped), 42), "");

  const std::string edited = shipped +
                             "\n[signature watchdog-exit]\n"
                             "title = The site's GPU watchdog ended the job\n"
                             "pattern = gpu-watchdog: giving up on\n"
                             "exit-code = 42\n"
                             "blame = platform\n"
                             "playbook = gpu-health\n"
                             "explain = The site's GPU watchdog found a GPU unresponsive.\n";
  const SignatureCatalog cat = edited_catalog(edited);
  EXPECT_EQ(primary_of_failed_job(cat, 42), "watchdog-exit");
  ASSERT_NE(cat.find("watchdog-exit"), nullptr);
  EXPECT_EQ(cat.find("watchdog-exit")->blame, Blame::kPlatform);
  EXPECT_EQ(cat.playbooks_for("watchdog-exit"), std::vector<std::string>{"gpu-health"});
}

TEST(CatalogEdit, MovingAPlaybookToAnotherClassChangesWhatFullModeRunsForIt) {
  Triage t;
  t.primary_failure = "nccl-timeout";
  const std::string shipped = shipped_rules_text();
  EXPECT_EQ(tsdb_request_for(t, edited_catalog(shipped), nullptr, {}).class_playbooks,
            std::vector<std::string>{"network-health"});

  // network-health moves from nccl-timeout to heartbeat-timeout; nccl-timeout gets hardware.
  std::string edited = replaced(shipped, "playbook = network-health\n", "playbook = hardware\n");
  edited = replaced(edited, "playbook = heartbeat\n",
                    "playbook = heartbeat\nplaybook = network-health\n");
  const SignatureCatalog cat = edited_catalog(edited);
  EXPECT_EQ(tsdb_request_for(t, cat, nullptr, {}).class_playbooks,
            std::vector<std::string>{"hardware"});
  t.primary_failure = "heartbeat-timeout";
  EXPECT_EQ(tsdb_request_for(t, cat, nullptr, {}).class_playbooks,
            (std::vector<std::string>{"heartbeat", "network-health"}));
}

// Every `explains` line with the class id `from` renamed `to`.
std::string renamed_in_explains(const std::string& text, const std::string& from,
                                const std::string& to) {
  std::string out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(pos, end - pos);
    if (line.rfind("explains = ", 0) == 0) {
      line += ' ';
      for (size_t at = line.find(' ' + from + ' '); at != std::string::npos;
           at = line.find(' ' + from + ' '))
        line.replace(at + 1, from.size(), to);
      line.pop_back();
    }
    out += line + (end < text.size() ? "\n" : "");
    pos = end + 1;
  }
  return out;
}

TEST(CatalogEdit, AHangIsFoundByItsStallRoleWhateverTheClassIsCalled) {
  std::string edited = replaced(shipped_rules_text(), "[signature hang]\n", "[signature stall]\n");
  edited = renamed_in_explains(edited, "hang", "stall");
  const SignatureCatalog cat = edited_catalog(edited);
  ASSERT_EQ(cat.find("hang"), nullptr);

  std::string log;
  for (int step = 0; step <= 5; ++step) {
    log += "0: [2026-11-21 10:00:0" + std::to_string(step) +
           "] completed step: " + std::to_string(step) + ", seconds: 1.000\n";
  }
  const ScanPlan plan(cat);
  const ScanResult scan = test::scan_text_with(plan, log);
  DiagnosisInput in;
  in.catalog = &cat;
  in.scan = &scan;
  in.slurm_state = "RUNNING";
  in.slurm_state_source = "option";
  in.now_usec = (1795255200LL + 4LL * 3600) * 1000000;  // four hours after the last step
  const Triage t = diagnose(in);
  EXPECT_EQ(t.status, kStatusHanging);
  EXPECT_EQ(t.primary_failure, "stall");
}

}  // namespace
}  // namespace triage
