// The catalog's example lines: every shipped class and harmless entry carries real lines that the
// scanner reads as the section says, and a broken example, shipped or in a site layer, is named
// with its file, line and the reason the scanner read it otherwise.
#include "analyzer/signature_examples.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.h"

namespace triage {
namespace {

const char* const kNccl =
    "[signature nccl-timeout]\n"
    "priority = 95\n"
    "pattern = NCCL WARN\n"
    "pattern = Watchdog caught collective operation timeout\n"
    "exclude = NCCL WARN .*performance\n"
    "explain = x\n";

std::string all(const std::vector<InputError>& errors) {
  std::string s;
  for (const auto& e : errors)
    s += std::string(e.what()) + "\n";
  return s;
}

// Loads `text` as site.rules and checks its examples; load errors come first.
std::string check_text(const std::string& text) {
  RulesLoad rl = parse_rules_text(text, "site.rules");
  std::vector<InputError> errors = rl.errors;
  const SignatureCatalog cat = SignatureCatalog::from_sections(rl.sections, errors);
  return all(errors) + all(check_signature_examples(cat));
}

TEST(SignatureExamples, EveryShippedExampleIsReadAsItsSectionSays) {
  EXPECT_EQ(all(check_signature_examples(test::shipped_catalog())), "");
}

TEST(SignatureExamples, EveryShippedClassWithPatternsAndEveryHarmlessEntryHasAnExample) {
  size_t lines = 0;
  for (const auto& c : test::shipped_catalog().classes()) {
    if (!c.patterns.empty()) EXPECT_FALSE(c.examples.empty()) << c.id << " has no example";
    lines += c.examples.size() + c.counter_examples.size();
  }
  for (const auto& h : test::shipped_catalog().harmless()) {
    EXPECT_FALSE(h.examples.empty()) << "[harmless " << h.id << "] has no example";
    lines += h.examples.size();
  }
  EXPECT_GE(lines, 60u);
}

TEST(SignatureExamples, AnExampleOfTheClassAndACounterExampleItExcludesPass) {
  EXPECT_EQ(check_text(std::string(kNccl) +
                       "example = [rank3]:[E ProcessGroupNCCL.cpp:754] [Rank 3] Watchdog caught "
                       "collective operation timeout: WorkNCCL(SeqNum=305)\n"
                       "counter-example = host:1:2 [0] NCCL WARN slow path, performance may "
                       "suffer\n"),
            "");
}

TEST(SignatureExamples, AnExampleNoPatternMatchesIsNamedAtItsLine) {
  EXPECT_EQ(check_text(std::string(kNccl) + "example = NCCL INFO Bootstrap : Using eth0\n"),
            "site.rules:7: [signature nccl-timeout]: example: not a finding of this class: no "
            "pattern of the class matches it; the scanner finds nothing in it\n");
}

TEST(SignatureExamples, AnExampleTheExcludeRemovesNamesTheExcludeLine) {
  EXPECT_EQ(check_text(std::string(kNccl) + "example = NCCL WARN performance is degraded\n"),
            "site.rules:7: [signature nccl-timeout]: example: not a finding of this class: the "
            "exclude at line 5 removes it; the scanner finds nothing in it\n");
}

TEST(SignatureExamples, AnExampleAMoreSpecificClassTakesNamesThatClass) {
  EXPECT_EQ(check_text(std::string(kNccl) +
                       "example = NCCL WARN Cuda failure 'out of memory'\n"
                       "[signature oom-gpu]\npriority = 90\npattern = out of memory\n"
                       "explain = x\n"),
            "site.rules:7: [signature nccl-timeout]: example: not a finding of this class: the "
            "scanner reads it as [signature oom-gpu] (priority 90, site.rules:8) first\n");
}

TEST(SignatureExamples, ACounterExampleTheClassMatchesIsNamedWithThePattern) {
  EXPECT_EQ(
      check_text(std::string(kNccl) + "counter-example = NCCL WARN Cannot get incoming CPU.\n"),
      "site.rules:7: [signature nccl-timeout]: counter-example: the scanner reads it as a "
      "finding of this class (the pattern at line 3 matches it)\n");
}

TEST(SignatureExamples, ExamplesAreReadUnderTheirSrunLabel) {
  EXPECT_EQ(check_text(std::string(kNccl) + "example = 3: gpu-a020:2234:2234 [0] NCCL WARN x\n"),
            "");
}

TEST(SignatureExamples, AHarmlessEntryMustSilenceItsExample) {
  const std::string entry =
      "[harmless mscclpp-notice]\npattern = NCCL WARN MSCCL\\+\\+: Feature not enabled\n"
      "why = x\n";
  EXPECT_EQ(check_text(std::string(kNccl) + entry +
                       "example = gpu-a017:2231:2231 [0] NCCL WARN MSCCL++: Feature not enabled\n"),
            "");
  EXPECT_EQ(check_text(std::string(kNccl) + entry + "example = NCCL WARN MSCCL++ is enabled\n"),
            "site.rules:10: [harmless mscclpp-notice]: example: not silenced by this entry: no "
            "pattern of the entry matches it; the scanner reads it as [signature nccl-timeout] "
            "(priority 95, site.rules:1)\n");
}

TEST(SignatureExamples, AnExampleOfAClassWithoutPatternsIsAnError) {
  EXPECT_EQ(check_text("[signature stuck]\nderived = stall\nexplain = x\nexample = step 10\n"),
            "site.rules:4: [signature stuck]: example: the class has no patterns, so no log line "
            "can be a finding of it\n");
}

TEST(SignatureExamples, AnEmptyExampleIsALoadError) {
  EXPECT_NE(check_text(std::string(kNccl) + "example =\n")
                .find("site.rules:7: example: expected "
                      "a log line"),
            std::string::npos);
}

TEST(SignatureExamples, TheScannerSaysWhichClassOrHarmlessEntryALineIs) {
  const SignatureCatalog& cat = test::shipped_catalog();
  const ScanPlan& plan = test::shipped_plan();
  const LineVerdict oom = classify_line(plan, "srun: error: nid001277: tasks 1-3: Out Of Memory");
  ASSERT_GE(oom.cls, 0);
  EXPECT_EQ(cat.classes()[static_cast<size_t>(oom.cls)].id, "oom-host");
  EXPECT_EQ(oom.harmless, -1);
  const LineVerdict cascade = classify_line(plan, "srun: Terminating StepId=440575.0");
  EXPECT_EQ(cascade.cls, -1);
  ASSERT_GE(cascade.harmless, 0);
  EXPECT_EQ(cat.harmless()[static_cast<size_t>(cascade.harmless)].id, "scancel-cascade");
  const LineVerdict nothing = classify_line(plan, "Epoch 3/10: loss 0.41");
  EXPECT_EQ(nothing.cls, -1);
  EXPECT_EQ(nothing.harmless, -1);
}

// A site's harmless entry that is too broad silences a shipped class's own example: rules check
// says so at the shipped example, naming the site entry.
TEST(SignatureExamples, ASiteHarmlessEntryThatSilencesAShippedExampleIsReported) {
  test::ScratchDir d("site");
  test::write_file(d / "site.rules",
                   "[harmless all-slurm-errors]\npattern = srun: error:\nwhy = too broad\n"
                   "example = srun: error: c002: task 0: Killed\n");
  test::use_source_rules();
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load({d.str()}, errors);
  ASSERT_EQ(all(errors), "");
  const std::string problems = all(check_signature_examples(cat));
  EXPECT_NE(problems.find("log-signatures.rules:"), std::string::npos) << problems;
  EXPECT_NE(problems.find(": example: not a finding of this class: it is silenced by [harmless "
                          "all-slurm-errors] (" +
                          (d / "site.rules").string() + ":1)"),
            std::string::npos)
      << problems;
  EXPECT_EQ(problems.find("[harmless all-slurm-errors]: example"), std::string::npos) << problems;
}

// The case: a healthy job's NCCL transport warning was read as an NCCL failure. The shipped
// catalog declares the shape benign, with the real line as its example.
TEST(SignatureExamples, AHealthyJobsNcclTransportWarningIsHarmlessChatter) {
  const std::string chatter =
      "v100-gpu-1:14926:14926 [0] misc/ibvwrap.cc:63 NCCL WARN Failed to open libibverbs.so[.1]";
  const LineVerdict shipped = classify_line(test::shipped_plan(), chatter);
  EXPECT_EQ(shipped.cls, -1);
  ASSERT_GE(shipped.harmless, 0);
  const HarmlessEntry& h =
      test::shipped_catalog().harmless()[static_cast<size_t>(shipped.harmless)];
  EXPECT_EQ(h.id, "nccl-transport-fallback");
  EXPECT_NE(std::find_if(h.examples.begin(), h.examples.end(),
                         [&](const auto& x) { return x.value == chatter; }),
            h.examples.end());
}

// A site declares one more shape benign in triage.d, with its example, and the check agrees.
TEST(SignatureExamples, ASiteLayerDeclaresAShippedClassesLineHarmlessWithItsExample) {
  const std::string line =
      "a100-st-p4d24xlarge-22:183006:183220 [1] misc/socket.cc:518 NCCL WARN Net : Call to recv "
      "from 10.200.84.247<58355> failed : Broken pipe";
  const LineVerdict shipped = classify_line(test::shipped_plan(), line);
  ASSERT_GE(shipped.cls, 0);
  EXPECT_EQ(test::shipped_catalog().classes()[static_cast<size_t>(shipped.cls)].id, "nccl-timeout");

  test::ScratchDir d("site");
  test::write_file(d / "site.rules", "[harmless teardown-broken-pipe]\nexample = " + line +
                                         "\npattern = NCCL WARN Net : Call to recv from\n"
                                         "why = this site's jobs close their sockets at exit\n");
  test::use_source_rules();
  std::vector<InputError> errors;
  const SignatureCatalog cat = SignatureCatalog::load({d.str()}, errors);
  ASSERT_EQ(all(errors), "");
  const ScanPlan plan(cat);
  const LineVerdict site = classify_line(plan, line);
  EXPECT_EQ(site.cls, -1);
  ASSERT_GE(site.harmless, 0);
  EXPECT_EQ(cat.harmless()[static_cast<size_t>(site.harmless)].id, "teardown-broken-pipe");
  // The shipped example it now swallows is reported, at the site's entry.
  EXPECT_NE(all(check_signature_examples(cat)).find("teardown-broken-pipe"), std::string::npos);
}

TEST(SignatureExamples, RulesCheckFailsOnABrokenExampleInASiteLayer) {
  test::ScratchDir d("triage.d");
  test::write_file(d / "site.rules",
                   "[signature site-watchdog]\npriority = 5\npattern = killed by the site "
                   "watchdog\nexplain = x\nexample = job 12 killed by the site watchdog\n"
                   "counter-example = the site watchdog is watching\n"
                   "example = killed by the watchdog\n");
  const auto r = test::run_cli({"rules", "check", "--rules", d.str()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, (d / "site.rules").string() +
                       ":7: [signature site-watchdog]: example: not a finding of this class: no "
                       "pattern of the class matches it; the scanner finds nothing in it\n");
  EXPECT_NE(r.err.find("1 error(s)"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace triage
