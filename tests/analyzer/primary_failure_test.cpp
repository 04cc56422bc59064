// The primary-failure stage alone: derived classes, the exit-code fallback, ranking and evidence.
#include "analyzer/primary_failure.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

const SignatureCatalog& cat() {
  return test::shipped_catalog();
}

DerivedFacts stalled_job(const std::string& status) {
  DerivedFacts f;
  f.status = status;
  f.progress.has_steps = true;
  f.progress.stalled = true;
  f.progress.last_step_line = 40;
  f.progress.last_step_time_usec = 123;
  f.last_step_text = "completed step: 99";
  f.log_lines = 60;
  f.last_line_text = "the last line";
  return f;
}

TEST(DerivedFindings, StepsThatStoppedBeforeACancellationAreTheStallClass) {
  const auto found = derived_findings(stalled_job(kStatusCancelled), cat());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].cls, "hang");
  EXPECT_EQ(found[0].line, 40);
  EXPECT_EQ(found[0].text, "completed step: 99");
  EXPECT_EQ(found[0].time_usec, 123);
}

TEST(DerivedFindings, ARunningJobHasNoStallAndACompletedOneNone) {
  EXPECT_TRUE(derived_findings(stalled_job(kStatusRunning), cat()).empty());
  EXPECT_TRUE(derived_findings(stalled_job(kStatusCompleted), cat()).empty());
}

TEST(DerivedFindings, AnUnknownEndIsTheNoEvidenceClassAtTheLogsLastLine) {
  DerivedFacts f = stalled_job(kStatusUnknown);
  f.progress.stalled = false;
  const auto found = derived_findings(f, cat());
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].cls, "unknown-death");
  EXPECT_EQ(found[0].line, 60);
  EXPECT_EQ(found[0].text, "the last line");
  EXPECT_EQ(found[0].stage, "Training");
}

Triage::Summary exited(int code) {
  Triage::Summary s;
  s.found = true;
  s.line = 77;
  s.status_word = "FAILED";
  s.exit_code = code;
  return s;
}

TEST(ExitCodeFinding, ASignalsExitCodeNamesItsClassButACancellationsDoesNot) {
  const auto f = exit_code_finding(exited(139), cat());
  ASSERT_TRUE(f);
  EXPECT_EQ(f->cls, "signal-kill");
  EXPECT_EQ(f->line, 77);
  EXPECT_EQ(f->text.rfind("JOB SUMMARY exit 139: ", 0), 0u) << f->text;
  EXPECT_FALSE(exit_code_finding(exited(143), cat()));
  EXPECT_FALSE(exit_code_finding(exited(1), cat()));
  EXPECT_FALSE(exit_code_finding(Triage::Summary{}, cat()));
}

TEST(ChoosePrimary, AFailedJobWithNothingFoundTakesItsExitCodesClass) {
  FoundClasses found;
  const RankingResult r = choose_primary(found, true, exited(137), cat());
  ASSERT_EQ(r.primary, 0);
  EXPECT_EQ(cat().classes()[found.occ[0].cls].id, "signal-kill");
  EXPECT_EQ(found.occ[0].first->line, 77);
}

TEST(ChoosePrimary, ACompletedJobHasNoPrimaryWhateverWasFound) {
  const ScanResult scan = test::scan_text("RuntimeError: NCCL error in: foo\n");
  FoundClasses found;
  add_log_classes(found, &scan, {});
  ASSERT_FALSE(found.occ.empty());
  EXPECT_EQ(choose_primary(found, false, exited(137), cat()).primary, -1);
  EXPECT_EQ(choose_primary(found, true, exited(137), cat()).primary, 0);
}

TEST(PrimaryEvidence, ATracebacksExceptionLineJoinsTheEvidence) {
  const ScanResult scan = test::scan_text(
      "0: Traceback (most recent call last):\n"
      "0:   File \"train.py\", line 1, in <module>\n"
      "0: ValueError: bad batch\n");
  FoundClasses found;
  add_log_classes(found, &scan, {});
  const RankingResult r = choose_primary(found, true, Triage::Summary{}, cat());
  ASSERT_GE(r.primary, 0);
  const PrimaryEvidence e = primary_evidence(found, r.primary, scan.facts.tracebacks, cat());
  ASSERT_EQ(e.evidence.size(), 2u);
  EXPECT_EQ(e.evidence[0].line, 1);
  EXPECT_EQ(e.evidence[1].line, 3);
  EXPECT_EQ(e.evidence[1].text, "0: ValueError: bad batch");
  EXPECT_EQ(e.stage, "Training");
}

TEST(AddTrustedClasses, OneOccurrencePerClassCountedAndDecisiveWhenAnyIs) {
  std::vector<TrustedFinding> trusted(3);
  trusted[0].finding.cls = "oom-host";
  trusted[1].finding.cls = "oom-host";
  trusted[1].decisive = true;
  trusted[2].finding.cls = "no-such-class";
  FoundClasses found;
  add_trusted_classes(found, trusted, cat());
  ASSERT_EQ(found.occ.size(), 1u);
  EXPECT_EQ(found.occ[0].count, 2u);
  EXPECT_TRUE(found.occ[0].decisive);
  EXPECT_EQ(found.occ[0].first, &found.trusted[1].finding);
  EXPECT_EQ(found.trusted.size(), 3u) << "unknown classes are kept for the primary's evidence";
}

}  // namespace
}  // namespace triage
