// The agent's live record in the report: the interim `hang (live)` report while the job runs, and
// the post-mortem's account of the flag and the early cancel once it has ended.
#include "analyzer/live_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "analyzer/diagnosis.h"
#include "analyzer/report_render.h"
#include "common/time_util.h"
#include "test_support.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kStart = 1795255200;  // 2026-11-21 10:00:00 UTC

std::string steps(int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += "0: completed step: " + std::to_string(i) + ", seconds: 1.000\n";
  return s;
}

LiveRecord flagged_at_step_29() {
  LiveRecord r;
  r.followed_since_usec = kStart * kSec;
  r.flagged_usec = (kStart + 95) * kSec;
  r.step = 29;
  r.step_line = 30;
  r.last_step_usec = (kStart + 29) * kSec;
  r.silence_s = 66;
  r.threshold_s = 60;
  r.basis =
      "stalled: 66 s since step 29 (line 30); allowed 60 s = max(10 x 1.0 s step time, 60 s "
      "minimum)";
  r.action = "notify";
  r.action_reason = "no step for 66 s (threshold 60 s); recorded, the job is left running";
  r.action_usec = r.flagged_usec;
  r.warnings.push_back({"nccl-timeout", 12, "[Rank 2] Watchdog caught collective operation timeout",
                        (kStart + 12) * kSec});
  return r;
}

Evidence evidence_with(const LiveRecord& live, const std::string& state) {
  Evidence ev;
  ev.job.job_id = 4242;
  ev.job.state = state;
  ev.job.start_time = kStart;
  ev.job.time_limit_sec = 3600;
  ev.job.gpus = 8;
  ev.live = live;
  return ev;
}

Triage diagnosed(const Evidence& ev, int64_t now_s) {
  static ScanResult scan;
  scan = test::scan_text(steps(30));
  DiagnosisInput in;
  in.catalog = &test::shipped_catalog();
  in.scan = &scan;
  in.evidence = &ev;
  in.slurm_state = ev.job.state;
  in.slurm_state_source = "evidence";
  in.now_usec = now_s * kSec;
  in.log_path = "slurm-4242.out";
  in.job_id = 4242;
  return diagnose(in);
}

TEST(LiveReport, AFlaggedRunningJobGetsTheInterimHangReport) {
  const Triage t = diagnosed(evidence_with(flagged_at_step_29(), "RUNNING"), kStart + 100);
  EXPECT_EQ(t.status, kStatusHanging);
  EXPECT_EQ(t.status_reason.rfind("flagged live by the batch host's agent: stalled: 66 s", 0), 0U)
      << t.status_reason;
  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("**Status:** hang (live)"), std::string::npos) << md;
  EXPECT_NE(md.find("### Live hang detection"), std::string::npos);
  EXPECT_NE(md.find("after step 29 (line 30)"), std::string::npos) << md;
  EXPECT_NE(md.find("nccl-timeout ` at line 12"), std::string::npos) << md;
  const auto j = triage_to_json(t);
  EXPECT_EQ(j["status"], "hanging");
  EXPECT_EQ(j["live"], true);
  EXPECT_EQ(j["flagged_at"], format_utc((kStart + 95) * kSec));
  EXPECT_EQ(j["live_record"]["step"], 29);
}

TEST(LiveReport, AJobThatResumedIsNotReportedHanging) {
  LiveRecord r = flagged_at_step_29();
  r.resumed_usec = (kStart + 200) * kSec;
  const Triage t = diagnosed(evidence_with(r, "RUNNING"), kStart + 201);
  EXPECT_NE(t.status, kStatusHanging);
  const auto j = triage_to_json(t);
  EXPECT_EQ(j["live"], false);
  EXPECT_NE(j["live_record"]["summary"].get<std::string>().find("Steps came again"),
            std::string::npos);
}

TEST(LiveReport, ASecondStallSaysTheJobHadStalledAndResumedBefore) {
  LiveRecord r = flagged_at_step_29();
  r.earlier_stalls = {{(kStart + 40) * kSec, 12, 66, (kStart + 50) * kSec}};
  r.stalls = 2;
  const Triage t = diagnosed(evidence_with(r, "RUNNING"), kStart + 100);
  EXPECT_EQ(t.status, kStatusHanging);
  const std::string summary = triage_to_json(t)["live_record"]["summary"];
  EXPECT_NE(summary.find("It had stalled and resumed before (1 time): flagged " +
                         format_utc((kStart + 40) * kSec) +
                         " after step 12, 66 s silent, steps "
                         "again " +
                         format_utc((kStart + 50) * kSec) + "."),
            std::string::npos)
      << summary;
}

TEST(LiveReport, AnEarlyCancelIsReportedWithItsStepAndTheGpuHoursItSaved) {
  LiveRecord r = flagged_at_step_29();
  r.action = "cancel";
  r.action_usec = (kStart + 600) * kSec;  // 50 minutes of the hour's limit left, 8 GPUs
  r.action_reason = "cancel as the user asked, after twice the threshold without a node fact";
  const Triage t = diagnosed(evidence_with(r, "CANCELLED"), kStart + 700);
  EXPECT_EQ(t.status, kStatusCancelled);
  EXPECT_NE(t.status_reason.find("cancelled as hung by slurm-triage at step 29"), std::string::npos)
      << t.status_reason;
  ASSERT_TRUE(t.live && t.live->gpu_hours_saved);
  EXPECT_NEAR(*t.live->gpu_hours_saved, 8 * 50.0 / 60, 1e-9);
  const std::string md = render_markdown(t);
  EXPECT_NE(md.find("It was cancelled as hung by slurm-triage (--triage-on-hang=cancel)"),
            std::string::npos)
      << md;
  EXPECT_NE(
      md.find("at step 29; the early cancel left 0.83 h of its time limit unused, saving 6.67 "
              "GPU-hours against its time limit"),
      std::string::npos)
      << md;
  const auto j = triage_to_json(t);
  EXPECT_EQ(j["live"], false);
  EXPECT_NEAR(j["live_record"]["gpu_hours_saved"].get<double>(), 6.6667, 1e-3);
}

TEST(LiveReport, ACancelThatFailedOrWasNotRunIsNeverToldAsDone) {
  LiveRecord r = flagged_at_step_29();
  r.action = "cancel";
  r.action_usec = (kStart + 600) * kSec;
  r.action_result = "failed";
  r.action_tries = 3;
  r.action_error = "scancel 4242: scancel: error: Socket timed out (try 3 of 3)";
  Triage t = diagnosed(evidence_with(r, "RUNNING"), kStart + 700);
  std::string md = render_markdown(t);
  EXPECT_NE(md.find("slurm-triage tried to cancel it as hung at 2026-11-21T10:10:00Z, at step 29, "
                    "but the command failed: scancel 4242: scancel: error: Socket timed out (try 3 "
                    "of 3)."),
            std::string::npos)
      << md;
  EXPECT_EQ(md.find("It was cancelled"), std::string::npos) << md;
  EXPECT_FALSE(t.live->gpu_hours_saved);

  r.action_result = "not-done";
  r.action_tries = 0;
  r.action_error =
      "not done: slurmctld shows another attempt of the job (Restarts=1 started "
      "2026-11-21T10:09:00Z) than the one flagged (Restarts=0 started 2026-11-21T10:00:00Z)";
  t = diagnosed(evidence_with(r, "RUNNING"), kStart + 700);
  md = render_markdown(t);
  EXPECT_NE(
      md.find("slurm-triage was to cancel it as hung at 2026-11-21T10:10:00Z, at step 29, but "
              "did not: not done: slurmctld shows another attempt"),
      std::string::npos)
      << md;
  EXPECT_EQ(t.status_reason.find("cancelled as hung"), std::string::npos) << t.status_reason;
}

// Issue 28 part 4: a job that keeps stepping, 30% slower for a while; the agent's interim report
// of the running job says so among its first lines, as a warning, and calls nothing a hang.
TEST(LiveReport, ARunningJobWithAPaceWarningSaysSoInItsFirstLines) {
  LiveRecord r;
  r.followed_since_usec = kStart * kSec;
  r.pace_warning =
      "Pace (live): slowdown: step time 1 s -> 1.3 s since step 22, steady step times, warm-up "
      "and pauses left out";
  r.pace_warning_usec = (kStart + 25) * kSec;
  const Triage t = diagnosed(evidence_with(r, "RUNNING"), kStart + 31);
  EXPECT_EQ(t.status, kStatusRunning);
  const std::string md = render_markdown(t);
  const size_t warning = md.find("**Warning:** Pace (live): slowdown: step time 1 s -\\> 1.3 s");
  ASSERT_NE(warning, std::string::npos) << md;
  EXPECT_LT(warning, md.find("###")) << "among the first lines";
  EXPECT_NE(md.find("### Live watch"), std::string::npos) << md;
  EXPECT_EQ(md.find("Live hang detection"), std::string::npos) << "a warning is not a hang";
  EXPECT_EQ(md.find("hang (live)"), std::string::npos) << md;
  const auto j = triage_to_json(t);
  EXPECT_EQ(j["live"], false);
  EXPECT_EQ(j["live_record"]["pace_warning"], r.pace_warning);
  // After the job, the post-mortem keeps the warning in its section but not among the first lines.
  const std::string after = render_markdown(diagnosed(evidence_with(r, "COMPLETED"), kStart + 40));
  EXPECT_EQ(after.find("**Warning:** Pace"), std::string::npos) << after;
  EXPECT_NE(after.find("- Pace (live): slowdown"), std::string::npos) << after;
}

TEST(LiveReport, ARecordWithoutAFlagOrWarningsAddsNoSection) {
  LiveRecord r;
  r.followed_since_usec = kStart * kSec;
  const Triage t = diagnosed(evidence_with(r, "COMPLETED"), kStart + 100);
  EXPECT_EQ(render_markdown(t).find("### Live hang detection"), std::string::npos);
  EXPECT_EQ(triage_to_json(t)["flagged_at"], nullptr);
}

TEST(LiveReport, TheEvidenceCarriesTheRecordBothWays) {
  const Evidence ev = evidence_with(flagged_at_step_29(), "RUNNING");
  const Evidence back = parse_evidence(nlohmann::json(ev).dump(), "test");
  ASSERT_TRUE(back.live);
  EXPECT_EQ(back.live->step, 29);
  EXPECT_EQ(back.live->warnings.size(), 1U);
  EXPECT_EQ(back.job.time_limit_sec, 3600);
  EXPECT_EQ(back.job.gpus, 8);
  EXPECT_EQ(back.live->stalls, 1);  // a record from before stalls were counted: its one flag
  LiveRecord twice = flagged_at_step_29();
  twice.stalls = 2;
  twice.earlier_stalls = {{kStart * kSec, 3, 70.5, (kStart + 80) * kSec}};
  const Evidence back2 =
      parse_evidence(nlohmann::json(evidence_with(twice, "RUNNING")).dump(), "test");
  ASSERT_TRUE(back2.live);
  EXPECT_EQ(back2.live->stalls, 2);
  ASSERT_EQ(back2.live->earlier_stalls.size(), 1U);
  EXPECT_EQ(back2.live->earlier_stalls[0].step, 3);
  EXPECT_DOUBLE_EQ(back2.live->earlier_stalls[0].silence_s, 70.5);
  EXPECT_EQ(back2.live->earlier_stalls[0].resumed_usec, (kStart + 80) * kSec);
  nlohmann::json bad = ev;
  bad["live"]["action"] = "reboot";
  EXPECT_THROW(parse_evidence(bad.dump(), "test"), InputError);
}

}  // namespace
}  // namespace triage
