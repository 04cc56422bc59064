// What a live hang does: the decision (agent/node/hang_action.h), the AdminComment text and merge
// (agent/live/hang_comment.h), the Slurm commands (agent/live/hang_commands.h) and how the user's
// and the admin's choices reach and survive in the job record.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "agent/live/hang_commands.h"
#include "agent/live/hang_comment.h"
#include "agent/node/hang_action.h"
#include "agent/node/job_table.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::lifecycle;

// A job silent for 700 s against a 600 s threshold, nothing seen on its nodes.
HangFacts stalled_job(HangChoice asked, bool admin_allows) {
  HangFacts f;
  f.asked = asked;
  f.admin_allows = admin_allows;
  f.stalled = true;
  f.silence_s = 700;
  f.threshold_s = 600;
  f.batch = true;
  f.requeueable = true;
  return f;
}

bool says(const HangDecision& d, const std::string& text) {
  return d.reason.find(text) != std::string::npos;
}

TEST(HangDecision, AJobThatIsNotStalledIsLeftAlone) {
  HangFacts f = stalled_job(HangChoice::kCancel, true);
  f.stalled = false;
  f.dstate_tasks = 4;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNone);
}

TEST(HangDecision, NotifyRecordsTheHangOnceAndLeavesTheJobRunning) {
  HangFacts f = stalled_job(HangChoice::kNotify, true);
  f.dstate_tasks = 2;
  const HangDecision first = decide_hang_action(f);
  EXPECT_EQ(first.outcome, HangOutcome::kNotify);
  EXPECT_TRUE(first.corroborated);
  EXPECT_TRUE(says(first, "no step for 700 s (threshold 600 s)")) << first.reason;
  f.notified = true;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNone)
      << "the interim report is written once";
}

TEST(HangDecision, CancelWithoutTheAdminsPermissionIsOnlyRecordedAndSaysWhy) {
  HangFacts f = stalled_job(HangChoice::kCancel, false);
  f.silence_s = 5000;
  f.kernel_events = 3;
  const HangDecision d = decide_hang_action(f);
  EXPECT_EQ(d.outcome, HangOutcome::kNotify);
  EXPECT_TRUE(says(d, "--triage-on-hang=cancel is not allowed")) << d.reason;
  EXPECT_TRUE(says(d, "hang_action=allow")) << d.reason;
}

TEST(HangDecision, AnUncorroboratedStallWaitsForTwiceTheThresholdBeforeCancelling) {
  HangFacts f = stalled_job(HangChoice::kCancel, true);
  const HangDecision early = decide_hang_action(f);
  EXPECT_EQ(early.outcome, HangOutcome::kNotify);
  EXPECT_FALSE(early.corroborated);
  EXPECT_TRUE(says(early, "waits for a node fact or 1200 s of silence")) << early.reason;

  f.notified = true;
  f.silence_s = 1199;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNone) << "still waiting, already recorded";
  f.silence_s = 1200;
  const HangDecision late = decide_hang_action(f);
  EXPECT_EQ(late.outcome, HangOutcome::kCancel);
  EXPECT_TRUE(says(late, "after twice the threshold")) << late.reason;
}

TEST(HangDecision, EachNodeFactCorroboratesAtOnce) {
  for (int which = 0; which < 3; ++which) {
    HangFacts f = stalled_job(HangChoice::kCancel, true);
    f.dstate_tasks = which == 0 ? 1 : 0;
    f.kernel_events = which == 1 ? 1 : 0;
    f.busy_wait = which == 2;
    const HangDecision d = decide_hang_action(f);
    EXPECT_EQ(d.outcome, HangOutcome::kCancel) << which;
    EXPECT_TRUE(d.corroborated);
  }
  HangFacts f = stalled_job(HangChoice::kCancel, true);
  f.busy_wait = true;
  f.dstate_tasks = 8;
  EXPECT_TRUE(says(decide_hang_action(f), "corroborated by 8 task(s) in D state, GPUs busy"));
}

TEST(HangDecision, RequeueNeedsABatchJobThatAllowsIt) {
  HangFacts f = stalled_job(HangChoice::kRequeue, true);
  f.busy_wait = true;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kRequeue);

  f.requeueable = false;
  const HangDecision no_requeue = decide_hang_action(f);
  EXPECT_EQ(no_requeue.outcome, HangOutcome::kNotify);
  EXPECT_TRUE(says(no_requeue, "requeues only batch jobs")) << no_requeue.reason;

  f.requeueable = true;
  f.batch = false;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNotify) << "an srun-only allocation";
}

TEST(HangDecision, HangRequeuesCountAgainstTheSameNAsTriageRequeueFromSlurmsRestarts) {
  HangFacts f = stalled_job(HangChoice::kRequeue, true);
  f.dstate_tasks = 1;
  f.requeue_max = 2;
  f.restarts = 1;  // requeued once already, on whichever node
  const HangDecision second = decide_hang_action(f);
  EXPECT_EQ(second.outcome, HangOutcome::kRequeue);
  EXPECT_TRUE(says(second, "requeue as the user asked (requeue 2 of 2)")) << second.reason;

  f.restarts = 2;
  const HangDecision third = decide_hang_action(f);
  EXPECT_EQ(third.outcome, HangOutcome::kCancel) << "the hung attempt still ends";
  EXPECT_TRUE(says(third,
                   "requeue refused: Slurm shows the job requeued 2 time(s), the 2 "
                   "--triage-requeue=2 allows, so it is cancelled instead, corroborated by 1 "
                   "task(s) in D state"))
      << third.reason;
}

TEST(HangDecision, OnHangRequeueAloneAllowsOneRequeue) {
  HangFacts f = stalled_job(HangChoice::kRequeue, true);
  f.silence_s = 1300;  // twice the threshold: no node fact needed
  EXPECT_EQ(hang_requeues_allowed(f), 1);
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kRequeue);
  f.restarts = 1;
  const HangDecision d = decide_hang_action(f);
  EXPECT_EQ(d.outcome, HangOutcome::kCancel);
  EXPECT_TRUE(says(d, "the one --triage-on-hang=requeue allows without --triage-requeue"))
      << d.reason;
  // Not corroborated and not yet twice the threshold: still only recorded, cancel or requeue.
  f.silence_s = 700;
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNotify);
}

TEST(HangDecision, ACancelIsNeverIssuedTwice) {
  HangFacts f = stalled_job(HangChoice::kCancel, true);
  f.dstate_tasks = 1;
  f.notified = true;
  f.acted = true;
  f.silence_s = 9000;
  const HangDecision d = decide_hang_action(f);
  EXPECT_EQ(d.outcome, HangOutcome::kNone);
  EXPECT_TRUE(says(d, "already issued")) << d.reason;
}

TEST(HangChoiceText, RoundTripsAndRefusesOtherWords) {
  for (const HangChoice c : {HangChoice::kNotify, HangChoice::kCancel, HangChoice::kRequeue})
    EXPECT_EQ(parse_hang_choice(to_string(c)), c);
  EXPECT_FALSE(parse_hang_choice("kill"));
  EXPECT_FALSE(parse_hang_choice(""));
  EXPECT_EQ(to_string(HangOutcome::kNone), "none");
}

constexpr int64_t kFlagged = 1795550544LL * 1000000;  // 2026-11-24T20:02:24Z

TEST(HangComment, TheSummarySaysHangWhenAndAtWhichStep) {
  EXPECT_EQ(hang_comment_summary(kFlagged, 1200),
            "triage=hang;flagged=2026-11-24T20:02:24Z;step=1200");
  EXPECT_EQ(hang_comment_summary(kFlagged, -1), "triage=hang;flagged=2026-11-24T20:02:24Z");
}

TEST(HangComment, AnEmptyFieldTakesOursAsItIs) {
  const CommentMerge m = merge_triage_comment("", "triage=hang;step=3");
  EXPECT_TRUE(m.write);
  EXPECT_EQ(m.value, "triage=hang;step=3");
}

TEST(HangComment, AnotherToolsTextIsKeptAndOursAppended) {
  const std::string jobstats = "JS1:H4sIAAAAAAAAA+2Y";
  const CommentMerge m = merge_triage_comment(jobstats, "triage=hang;step=3");
  EXPECT_TRUE(m.write);
  EXPECT_EQ(m.value, jobstats + " triage=hang;step=3");
}

TEST(HangComment, AnEarlierTriageSegmentIsReplacedInPlace) {
  const CommentMerge m =
      merge_triage_comment("site=abc TRIAGE=hang;step=3 ticket=42", "triage=hang;step=9");
  EXPECT_TRUE(m.write);
  EXPECT_EQ(m.value, "site=abc triage=hang;step=9 ticket=42");
}

TEST(HangComment, TriageInsideSomeoneElsesWordIsNotOurs) {
  const CommentMerge m = merge_triage_comment("note=x-triage=1", "triage=hang");
  EXPECT_EQ(m.value, "note=x-triage=1 triage=hang");
}

TEST(HangComment, TheSameSummaryTwiceWritesNothing) {
  const CommentMerge m = merge_triage_comment("a=1 triage=hang;step=3", "triage=hang;step=3");
  EXPECT_FALSE(m.write);
  EXPECT_TRUE(m.value.empty());
}

TEST(HangComment, AFullFieldIsLeftWholeRatherThanCut) {
  const std::string theirs(kMaxAdminCommentBytes - 5, 'x');
  const CommentMerge m = merge_triage_comment(theirs, "triage=hang;step=3");
  EXPECT_FALSE(m.write);
  EXPECT_NE(m.reason.find("1024-byte bound"), std::string::npos) << m.reason;
  EXPECT_TRUE(merge_triage_comment(std::string(10, 'x'), "triage=hang", 22).write)
      << "exactly at the bound still fits";
  EXPECT_FALSE(merge_triage_comment(std::string(10, 'x'), "triage=hang", 21).write);
}

TEST(HangCommands, CancelTakesSlurmsOwnTerminationPath) {
  JobFacts f;
  f.job_id = 4242;
  const JobRef job = job_ref(f);
  EXPECT_EQ(cancel_job_argv(job), (std::vector<std::string>{"scancel", "4242"}))
      << "no --signal: SIGTERM, KillWait, then SIGKILL";
  EXPECT_EQ(requeue_job_argv(job), (std::vector<std::string>{"scontrol", "requeue", "4242"}));
  EXPECT_EQ(set_admin_comment_argv(job, "a b triage=hang"),
            (std::vector<std::string>{"scontrol", "update", "JobId=4242",
                                      "AdminComment=a b triage=hang"}));
  EXPECT_THROW(cancel_job_argv(JobRef{}), std::invalid_argument) << "no job at all";
}

TEST(JobRecordHang, TheRegistrationCarriesTheUsersChoiceAndTheAdminsRule) {
  JobTable jobs;
  jobs.apply(parse_lifecycle(
                 lifecycle("job_start", 7, "s", {{"on_hang", "cancel"}, {"hang_action", "allow"}})),
             1);
  const JobRecord& j = *jobs.find(7);
  EXPECT_EQ(j.on_hang, HangChoice::kCancel);
  EXPECT_TRUE(j.hang_action_allowed);
}

TEST(JobRecordHang, TheChoiceSurvivesARestartFromTheSpool) {
  const nlohmann::json start =
      lifecycle("job_start", 7, "s", {{"on_hang", "requeue"}, {"hang_action", "allow"}});
  JobTable restarted;
  restarted.restore(7, {{{"r", "msg"}, {"t", 5}, {"m", start}}}, 0);
  ASSERT_NE(restarted.find(7), nullptr);
  EXPECT_EQ(restarted.find(7)->on_hang, HangChoice::kRequeue);
  EXPECT_TRUE(restarted.find(7)->hang_action_allowed);
}

TEST(JobRecordHang, ARecordFromBeforeTheOptionMeansNotifyNotAllowed) {
  JobTable restarted;
  restarted.restore(8, {{{"r", "msg"}, {"m", lifecycle("job_start", 8, "s", {{"mode", "basic"}})}}},
                    0);
  EXPECT_EQ(restarted.find(8)->on_hang, HangChoice::kNotify);
  EXPECT_FALSE(restarted.find(8)->hang_action_allowed);
}

TEST(JobRecordHang, BadValuesAreRefusedNamingTheField) {
  EXPECT_THROW(parse_lifecycle(lifecycle("job_start", 1, "m", {{"on_hang", "kill"}})), InputError);
  try {
    parse_lifecycle(lifecycle("job_start", 1, "m", {{"hang_action", "yes"}}));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("job_start.hang_action"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace triage::agent
