#include "analyzer/signature_catalog.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

std::vector<InputError> load_errors(const std::string& text, SignatureCatalog* out = nullptr) {
  std::vector<InputError> errors;
  RulesLoad rl = parse_rules_text(text, "site.rules");
  errors = rl.errors;
  SignatureCatalog c = SignatureCatalog::from_sections(rl.sections, errors);
  if (out != nullptr) *out = std::move(c);
  return errors;
}

TEST(SignatureCatalog, TheShippedCatalogLoadsCleanlyWithEveryFixedClassId) {
  const auto& cat = test::shipped_catalog();
  for (const char* id : {"container-pull-fail",
                         "container-load-fail",
                         "no-gpu",
                         "nccl-nic-fail",
                         "port-fail",
                         "model-not-found",
                         "patch-branch-fail",
                         "ray-start-fail",
                         "preflight-timeout",
                         "pull-timeout",
                         "ecc-timeout",
                         "train-timeout",
                         "hang",
                         "heartbeat-timeout",
                         "oom-host",
                         "oom-gpu",
                         "nccl-timeout",
                         "xla-compile-fail",
                         "python-exception",
                         "signal-kill",
                         "subprocess-fail",
                         "actor-fail",
                         "cancelled",
                         "node-fail",
                         "unknown-death",
                         "stage-fail",
                         "time-limit",
                         "preempted"}) {
    const SignatureClass* c = cat.find(id);
    ASSERT_NE(c, nullptr) << id;
    EXPECT_FALSE(c->explain.empty()) << id;
  }
  EXPECT_GE(cat.harmless().size(), 10u);
}

TEST(SignatureCatalog, EveryPatternHasATriggerLiteralOfAtLeastTheMinimumLength) {
  for (const auto& c : test::shipped_catalog().classes()) {
    for (const auto& p : c.patterns) {
      ASSERT_FALSE(p.required.empty()) << c.id << ": " << p.source;
      for (const auto& lit : p.required)
        EXPECT_GE(lit.size(), kMinTriggerLength) << c.id << ": " << p.source;
    }
  }
}

TEST(SignatureCatalog, ThePatternsMatchTheLinesJobsPrint) {
  const auto& cat = test::shipped_catalog();
  auto classify = [&](const std::string& line) -> std::string {
    std::string best;
    int prio = 1 << 30;
    for (const auto& c : cat.classes()) {
      for (const auto& p : c.patterns) {
        if (pattern_matches(p, line) && c.priority < prio) {
          bool excluded = false;
          for (const auto& e : c.excludes)
            excluded = excluded || pattern_matches(e, line);
          if (!excluded) {
            best = c.id;
            prio = c.priority;
          }
        }
      }
    }
    return best;
  };
  EXPECT_EQ(classify("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE TO "
                     "TIME LIMIT ***"),
            "time-limit");
  EXPECT_EQ(classify("slurmstepd: error: *** STEP 42.0 ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE "
                     "TO PREEMPTION ***"),
            "preempted");
  EXPECT_EQ(classify("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2026-11-21T10:00:00 DUE TO "
                     "JOB REQUEUE ***"),
            "preempted");
  EXPECT_EQ(classify("slurmstepd: error: *** JOB 42 ON n1 CANCELLED AT 2026-11-21T10:00:00 ***"),
            "cancelled");
  EXPECT_EQ(
      classify(
          "slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.0. Some of your processes"),
      "oom-host");
  EXPECT_EQ(classify("slurmstepd: error: Detected 2 oom-kill event(s) in step 42.0 cgroup."),
            "oom-host");
  EXPECT_EQ(classify("srun: error: n3: tasks 1-3: Out Of Memory"), "oom-host");
  EXPECT_EQ(classify("/var/spool/slurmd/job00042/slurm_script: line 12: 31337 Killed               "
                     "   python3 train.py"),
            "oom-host");
  EXPECT_EQ(classify("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB."),
            "oom-gpu");
  EXPECT_EQ(
      classify("torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB"),
      "oom-gpu");
  EXPECT_EQ(
      classify(
          "[rank0]:[E1121 ProcessGroupNCCL.cpp:632] [Rank 0] Watchdog caught collective operation "
          "timeout: "
          "WorkNCCL(SeqNum=1, OpType=ALLREDUCE) ran for 600034 milliseconds before timing out."),
      "nccl-timeout");
  EXPECT_EQ(classify("Fatal Python error: Segmentation fault"), "signal-kill");
  EXPECT_EQ(classify("E1121 api.py:869] Signal 11 (SIGSEGV) received by PID 7214"), "signal-kill");
  EXPECT_EQ(classify("srun: error: n1: task 3: Bus error"), "signal-kill");
  EXPECT_EQ(
      classify(
          "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task."),
      "actor-fail");
  EXPECT_EQ(classify("srun: error: Node failure on gpu-a020"), "node-fail");
  EXPECT_EQ(classify("srun: error: Job allocation 42 has been revoked."), "node-fail");
  EXPECT_EQ(classify("NODE_EXIT host=n1 exit=137"), "node-fail");
  EXPECT_EQ(classify("NODE_EXIT host=n1 exit=143"), "");
  EXPECT_EQ(classify("NODE_EXIT host=n1 exit=0"), "");
  EXPECT_EQ(classify("== Preflight FAILED (exit=3)"), "stage-fail");
  EXPECT_EQ(classify("srun: error: n1: task 0: Exited with exit code 143"), "");
}

TEST(SignatureCatalog, ReportsProblemsWithFileAndLine) {
  const auto errors = load_errors(
      "[signature broken-regex]\n"
      "pattern = foo(bar\n"
      "explain = x\n"
      "[signature no-literal]\n"
      "pattern = \\d+ \\w+\n"
      "explain = x\n"
      "[signature typo]\n"
      "patern = something long enough\n"
      "explain = x\n"
      "[signature dangling]\n"
      "pattern = a long enough phrase\n"
      "explains = no-such-class\n"
      "explain = x\n"
      "[harmless h]\n"
      "why = nothing to match\n");
  std::vector<std::string> msgs;
  msgs.reserve(errors.size());
  for (const auto& e : errors)
    msgs.push_back(e.what());
  ASSERT_EQ(msgs.size(), 5u) << ::testing::PrintToString(msgs);
  EXPECT_NE(msgs[0].find("site.rules:2: pattern: does not compile"), std::string::npos) << msgs[0];
  EXPECT_NE(msgs[1].find("site.rules:5: pattern: has no literal"), std::string::npos) << msgs[1];
  EXPECT_NE(msgs[2].find("site.rules:8: patern: unknown key"), std::string::npos) << msgs[2];
  EXPECT_NE(msgs[3].find("site.rules:14: [harmless h]"), std::string::npos) << msgs[3];
  EXPECT_NE(
      msgs[4].find("site.rules:10: [signature dangling]: explains: unknown class 'no-such-class'"),
      std::string::npos)
      << msgs[4];
}

TEST(SignatureCatalog, ABlameWhenOrATwoLineHarmlessShapeWrittenWrongIsNamed) {
  const auto errors = load_errors(
      "[signature x]\n"
      "pattern = a long enough phrase\n"
      "blame-when = somebody else's phrase\n"  // line 3: not a blame
      "blame-when = platform (unclosed\n"      // line 4
      "explain = x\n"
      "[harmless two-lines]\n"
      "pattern = a long enough phrase\n"
      "after = ^killall\n");  // no example-before: the section (line 6) is named
  std::vector<std::string> msgs;
  msgs.reserve(errors.size());
  for (const auto& e : errors)
    msgs.push_back(e.what());
  ASSERT_EQ(msgs.size(), 3u) << ::testing::PrintToString(msgs);
  EXPECT_NE(msgs[0].find("site.rules:3: blame-when: expected 'BLAME PATTERN'"), std::string::npos)
      << msgs[0];
  EXPECT_NE(msgs[1].find("site.rules:4: blame-when: does not compile"), std::string::npos)
      << msgs[1];
  EXPECT_NE(msgs[2].find("site.rules:6: [harmless two-lines]"), std::string::npos) << msgs[2];
  EXPECT_NE(msgs[2].find("'after' and 'example-before' go together"), std::string::npos) << msgs[2];
}

TEST(SignatureCatalog, TheShippedClassesPlayTheRolesTheDiagnosisLooksUp) {
  const auto& cat = test::shipped_catalog();
  EXPECT_EQ(cat.derived_class(Derivation::kStall)->id, "hang");
  EXPECT_EQ(cat.derived_class(Derivation::kNoEvidence)->id, "unknown-death");
  EXPECT_EQ(cat.task_end_class(TaskEnd::kSignal)->id, "signal-kill");
  EXPECT_EQ(cat.task_end_class(TaskEnd::kNonzeroExit)->id, "subprocess-fail");
  EXPECT_EQ(cat.traceback_class()->id, "python-exception");
  EXPECT_EQ(cat.heartbeat_class()->id, "heartbeat-timeout");
  for (const int code : {134, 135, 137, 139})
    EXPECT_EQ(cat.exit_code_class(code)->id, "signal-kill") << code;
  for (const int code : {130, 143})
    EXPECT_TRUE(cat.exit_code_class(code)->cancellation) << code;
  for (const char* id : {"cancelled", "time-limit", "preempted"})
    EXPECT_TRUE(cat.find(id)->cancellation) << id;
  EXPECT_EQ(cat.slurm_state_class("DEADLINE")->id, "time-limit");
  EXPECT_EQ(cat.playbooks_for("unknown-death"), (std::vector<std::string>{"oom", "hardware"}));
  EXPECT_EQ(cat.playbooks_for("signal-kill"), std::vector<std::string>{"hardware"});
  EXPECT_TRUE(cat.playbooks_for("port-fail").empty());
  EXPECT_EQ(cat.find("preempted")->blame, Blame::kScheduler);
  // An exception alone names no party; the frame that raised it can (blame_decision_test).
  EXPECT_EQ(cat.find("python-exception")->blame, Blame::kUnknown);
}

TEST(SignatureCatalog, DerivedTrueIsStillReadAsDerivedFromEvidence) {
  SignatureCatalog cat;
  const auto errors = load_errors(
      "[signature gpu-gone]\nderived = true\nkernel-event = gpu-fallen-off-bus\n"
      "explain = x\n",
      &cat);
  EXPECT_TRUE(errors.empty());
  ASSERT_NE(cat.find("gpu-gone"), nullptr);
  EXPECT_EQ(cat.find("gpu-gone")->derived, Derivation::kEvidence);
  EXPECT_EQ(cat.find("gpu-gone")->blame, Blame::kUnknown) << "blame defaults to unknown";
}

TEST(SignatureCatalog, PlainPatternsMatchWithoutRegexAndCaseAsWritten) {
  std::string err;
  const auto exact = compile_pattern("\\[Ray\\] HEAD timeout", err);
  ASSERT_TRUE(exact) << err;
  EXPECT_EQ(exact->re, nullptr);
  EXPECT_TRUE(pattern_matches(*exact, "x [Ray] HEAD timeout after 60s"));
  EXPECT_FALSE(pattern_matches(*exact, "x [ray] head timeout after 60s"));
  const auto icase = compile_pattern("(?i)prolog failure", err);
  ASSERT_TRUE(icase) << err;
  EXPECT_TRUE(pattern_matches(*icase, "error: PROLOG FAILURE on node"));
  const auto re = compile_pattern("Detected (?P<n>\\d+) oom_kill event", err);
  ASSERT_TRUE(re);
  std::vector<std::pair<std::string, std::string>> caps;
  EXPECT_TRUE(pattern_matches(*re, "Detected 3 oom_kill event", &caps));
  ASSERT_EQ(caps.size(), 1u);
  EXPECT_EQ(caps[0], (std::pair<std::string, std::string>{"n", "3"}));
}

TEST(SignatureCatalog, ALaterLayerReplacesOrDisablesASection) {
  test::ScratchDir d("layers");
  test::write_file(d / "site.rules",
                   "[signature oom-host]\n"
                   "priority = 1\n"
                   "pattern = our-own OOM banner\n"
                   "explain = site text\n"
                   "[harmless tokenizer-length]\n"
                   "disable = true\n");
  test::use_source_rules();
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load({d.str()}, errors);
  EXPECT_TRUE(errors.empty());
  ASSERT_NE(cat.find("oom-host"), nullptr);
  EXPECT_EQ(cat.find("oom-host")->explain, "site text");
  EXPECT_EQ(cat.find("oom-host")->patterns.size(), 1u);
  for (const auto& h : cat.harmless())
    EXPECT_NE(h.id, "tokenizer-length");
}

}  // namespace
}  // namespace triage
