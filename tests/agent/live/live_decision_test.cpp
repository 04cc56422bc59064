// The live loop's decisions: which jobs are followed, what corroborates a stall, how a poll's news
// enters the record, when the state is saved, and what a stall costs.
#include "agent/live/live_decision.h"

#include <gtest/gtest.h>

#include "common/live_cost.h"

namespace triage::agent {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = int64_t{1795860000} * kSec;

JobRecord running_batch_job() {
  JobRecord j;
  j.job_id = 42;
  j.uid = 1000;
  j.mode = "basic";
  j.batch_here = true;
  return j;
}

KernelEvent event(const std::string& kind, Severity sev, int64_t at) {
  KernelEvent e;
  e.kind = kind;
  e.severity = sev;
  e.time_usec = e.last_usec = at;
  e.summary = kind + " summary";
  return e;
}

StallVerdict stalled_at_step(int64_t step) {
  StallVerdict v;
  v.stalled = v.judged = true;
  v.last_step = step;
  v.last_step_line = step + 1;
  v.last_step_usec = kT0;
  v.silence_s = 61;
  v.threshold_s = 60;
  v.basis = "stalled: 61 s since step 29";
  return v;
}

TEST(LiveFollow, ARunningBatchJobWithTriageOnIsFollowed) {
  EXPECT_TRUE(should_follow(running_batch_job()));
}

TEST(LiveFollow, EndedOffUnknownOwnerOrNotTheBatchHostIsNot) {
  JobRecord ended = running_batch_job();
  ended.ended = true;
  JobRecord off = running_batch_job();
  off.mode = "off";
  JobRecord unregistered = running_batch_job();
  unregistered.mode = "";
  JobRecord no_owner = running_batch_job();
  no_owner.uid.reset();
  JobRecord other_node = running_batch_job();
  other_node.batch_here = false;
  for (const JobRecord& j : {ended, off, unregistered, no_owner, other_node})
    EXPECT_FALSE(should_follow(j));
}

TEST(LiveCorroboration, DStateTasksAndSevereKernelEventsOnAnyNodeDuringTheJobCount) {
  NodeEvidence here;
  here.host = "n1";
  here.job_dstate = 3;
  here.events = {event("hung-task", Severity::kError, kT0 + 10 * kSec),
                 event("link-up", Severity::kInfo, kT0 + 20 * kSec),
                 event("nvidia-xid", Severity::kCritical, kT0 - 10 * kSec)};  // before the job
  NodeEvidence peer;
  peer.host = "n2";
  peer.job_dstate = 1;
  peer.events = {event("gpu-reset", Severity::kWarning, kT0 + 30 * kSec)};
  const Corroboration c = corroborate({here, peer}, kT0);
  EXPECT_EQ(c.dstate_tasks, 4U);
  EXPECT_EQ(c.kernel_events, 2U);
  EXPECT_FALSE(c.busy_wait);
  ASSERT_EQ(c.lines.size(), 4U);
  EXPECT_EQ(c.lines[0], "n1: 3 of the job's tasks in D state (uninterruptible sleep)");
  EXPECT_EQ(c.lines[1], "n1: kernel hung-task: hung-task summary");
  EXPECT_EQ(c.lines[2], "n2: 1 of the job's tasks in D state (uninterruptible sleep)");
  EXPECT_EQ(c.lines[3], "n2: kernel gpu-reset: gpu-reset summary");
}

TEST(LiveCorroboration, NothingOnTheNodesIsNoCorroboration) {
  const Corroboration c = corroborate({NodeEvidence{}}, kT0);
  EXPECT_EQ(c.dstate_tasks + c.kernel_events, 0U);
  EXPECT_TRUE(c.lines.empty());
}

TEST(LiveCorroboration, AnUnreachablePeerBacksNothing) {
  NodeEvidence down;
  down.host = "n7";
  down.reachable = false;
  down.error = "connection refused";
  down.events = {event("gpu-reset", Severity::kCritical, kT0 + kSec)};  // never trusted
  const Corroboration c = corroborate({NodeEvidence{}, down}, kT0);
  EXPECT_EQ(c.kernel_events, 0U);
  EXPECT_TRUE(c.lines.empty());
}

TEST(LiveCorroboration, GpusSpinningAtIdlePowerInTheClusterPrometheusCorroborate) {
  RemoteEvidence remote;
  remote.busy_wait = true;
  remote.busy_wait_line = "cluster Prometheus: 16 of 16 GPUs at idle-level power, 99% busy";
  const Corroboration c = corroborate({NodeEvidence{}}, kT0, remote);
  EXPECT_TRUE(c.busy_wait);
  EXPECT_EQ(c.lines, std::vector<std::string>{remote.busy_wait_line});
  JobRecord j = running_batch_job();
  j.on_hang = HangChoice::kCancel;
  j.hang_action_allowed = true;
  // Inside 2x the threshold, the signature alone lets the cancel go ahead.
  EXPECT_EQ(
      decide_hang_action(hang_facts(j, LiveRecord{}, stalled_at_step(29), c, true, JobFacts{}))
          .outcome,
      HangOutcome::kCancel);
}

TEST(LiveCorroboration, PeersAndThePrometheusAreAskedOnceAMinuteAtMost) {
  EXPECT_TRUE(remote_evidence_due(0, kT0, 60 * kSec));
  EXPECT_FALSE(remote_evidence_due(kT0, kT0 + 59 * kSec, 60 * kSec));
  EXPECT_TRUE(remote_evidence_due(kT0, kT0 + 60 * kSec, 60 * kSec));
}

TEST(LiveWarnings, TheFirstLineOfEachClassIsKeptOnceAndBounded) {
  LiveRecord r;
  const std::vector<EarlyWarning> seen = {
      {"nccl-timeout", 120, "[Rank 3] Watchdog caught collective operation timeout", false, 0},
      {"cuda-error", 130, std::string(5000, 'x'), false, kT0}};
  EXPECT_EQ(add_warnings(r, seen, kT0 + kSec), 2U);
  ASSERT_EQ(r.warnings.size(), 2U);
  EXPECT_EQ(r.warnings[0].seen_usec, kT0 + kSec);  // no arrival time: now
  EXPECT_EQ(r.warnings[1].text.size(), 1024U);
  EXPECT_EQ(add_warnings(r, {{"nccl-timeout", 400, "again", false, kT0}}, kT0), 0U);
  std::vector<EarlyWarning> many;
  many.reserve(40);
  for (int i = 0; i < 40; ++i)
    many.push_back({"class-" + std::to_string(i), i, "line", false, kT0});
  add_warnings(r, many, kT0);
  EXPECT_EQ(r.warnings.size(), kMaxLiveWarnings);
}

TEST(LiveFlag, TheFlagRecordsTheStepSilenceBasisAndCorroboration) {
  LiveRecord r;
  r.followed_since_usec = kT0 - kSec;
  Corroboration c;
  c.lines = {"n1: kernel hung-task"};
  flag_stall(r, stalled_at_step(29), c, kT0 + 61 * kSec);
  EXPECT_EQ(r.flagged_usec, kT0 + 61 * kSec);
  EXPECT_EQ(r.step, 29);
  EXPECT_EQ(r.step_line, 30);
  EXPECT_DOUBLE_EQ(r.threshold_s, 60);
  EXPECT_EQ(r.corroboration, c.lines);
  EXPECT_EQ(r.followed_since_usec, kT0 - kSec);
}

TEST(LiveFlag, StepsAfterTheFlagMarkItResumedOnce) {
  LiveRecord r;
  EXPECT_FALSE(mark_resumed(r, true, kT0));  // never flagged
  flag_stall(r, stalled_at_step(29), {}, kT0);
  EXPECT_FALSE(mark_resumed(r, false, kT0 + kSec));
  EXPECT_TRUE(mark_resumed(r, true, kT0 + 2 * kSec));
  EXPECT_FALSE(mark_resumed(r, true, kT0 + 3 * kSec));
  EXPECT_EQ(r.resumed_usec, kT0 + 2 * kSec);
}

TEST(LiveFlag, WatchdogLinesRefreshTheInterimReportOnlyWhileTheFlaggedStallLasts) {
  LiveRecord r;
  EXPECT_FALSE(interim_report_due(r, true)) << "not flagged: there is no interim report";
  flag_stall(r, stalled_at_step(29), {}, kT0);
  EXPECT_TRUE(interim_report_due(r, true));
  EXPECT_FALSE(interim_report_due(r, false)) << "nothing new to place the hang with";
  ASSERT_TRUE(mark_resumed(r, true, kT0 + kSec));
  EXPECT_FALSE(interim_report_due(r, true)) << "resumed: the stall is over";
}

TEST(LivePace, TheRunningReportFollowsWhatTheWarningIsAboutNotItsNumbers) {
  EXPECT_FALSE(pace_report_due("", "")) << "no warning ever: no report";
  EXPECT_TRUE(pace_report_due("", "slowdown")) << "raised";
  EXPECT_FALSE(pace_report_due("slowdown", "slowdown")) << "the same slowdown, its numbers moved";
  EXPECT_TRUE(pace_report_due("slowdown", "slowdown;straggler 3")) << "a straggler joined it";
  EXPECT_TRUE(pace_report_due("slowdown;straggler 3", ""))
      << "cleared: the report must not keep it";
}

TEST(LiveFlag, AStallAfterAResumedOneIsFlaggedAgainAndTheEarlierKept) {
  LiveRecord r;
  EXPECT_TRUE(stall_unflagged(r));
  flag_stall(r, stalled_at_step(29), {}, kT0 + 61 * kSec);
  EXPECT_FALSE(stall_unflagged(r));
  r.action = "notify";
  ASSERT_TRUE(mark_resumed(r, true, kT0 + 90 * kSec));
  EXPECT_TRUE(stall_unflagged(r));
  flag_stall(r, stalled_at_step(200), {}, kT0 + 400 * kSec);
  EXPECT_EQ(r.stalls, 2);
  EXPECT_EQ(r.step, 200);
  EXPECT_EQ(r.resumed_usec, 0);
  ASSERT_EQ(r.earlier_stalls.size(), 1U);
  EXPECT_EQ(r.earlier_stalls[0].flagged_usec, kT0 + 61 * kSec);
  EXPECT_EQ(r.earlier_stalls[0].step, 29);
  EXPECT_EQ(r.earlier_stalls[0].resumed_usec, kT0 + 90 * kSec);
  EXPECT_EQ(r.action, "notify");  // the record's action is the loop's to set
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(mark_resumed(r, true, kT0 + (500 + i) * kSec));
    flag_stall(r, stalled_at_step(300 + i), {}, kT0 + (600 + i) * kSec);
  }
  EXPECT_EQ(r.stalls, 22);
  ASSERT_EQ(r.earlier_stalls.size(), kMaxEarlierStalls);
  EXPECT_EQ(r.earlier_stalls.back().step, 318);  // the latest ones are kept
}

TEST(LiveHangFacts, AStallThatResumedIsNoLongerNotified) {
  JobRecord j = running_batch_job();
  LiveRecord r;
  flag_stall(r, stalled_at_step(29), {}, kT0);
  r.action = "notify";
  EXPECT_TRUE(hang_facts(j, r, stalled_at_step(29), {}, true, JobFacts{}).notified);
  mark_resumed(r, true, kT0 + kSec);
  const HangFacts again = hang_facts(j, r, stalled_at_step(40), {}, true, JobFacts{});
  EXPECT_FALSE(again.notified);
  EXPECT_EQ(decide_hang_action(again).outcome, HangOutcome::kNotify);
}

TEST(LiveHangFacts, TheRegistrationRecordAndVerdictBecomeTheActionsFacts) {
  JobRecord j = running_batch_job();
  j.on_hang = HangChoice::kCancel;
  j.hang_action_allowed = true;
  LiveRecord r;
  Corroboration c;
  c.dstate_tasks = 2;
  HangFacts f = hang_facts(j, r, stalled_at_step(29), c, true, JobFacts{});
  EXPECT_EQ(f.asked, HangChoice::kCancel);
  EXPECT_TRUE(f.admin_allows);
  EXPECT_TRUE(f.stalled);
  EXPECT_EQ(f.dstate_tasks, 2);
  EXPECT_FALSE(f.notified);
  EXPECT_FALSE(f.acted);
  r.flagged_usec = kT0;
  r.action = "cancel";
  f = hang_facts(j, r, stalled_at_step(29), c, true, JobFacts{});
  EXPECT_TRUE(f.notified);
  EXPECT_TRUE(f.acted);
  // The whole chain: corroborated, allowed and asked for: cancel; once.
  EXPECT_EQ(
      decide_hang_action(hang_facts(j, LiveRecord{}, stalled_at_step(29), c, true, JobFacts{}))
          .outcome,
      HangOutcome::kCancel);
  EXPECT_EQ(decide_hang_action(f).outcome, HangOutcome::kNone);
}

TEST(LiveSave, ARecordChangeSavesAtOnceMovementOnlyEveryInterval) {
  EXPECT_TRUE(save_due(true, false, kT0, kT0, 60 * kSec));
  EXPECT_FALSE(save_due(false, true, kT0, kT0 + 59 * kSec, 60 * kSec));
  EXPECT_TRUE(save_due(false, true, kT0, kT0 + 60 * kSec, 60 * kSec));
  EXPECT_FALSE(save_due(false, false, kT0, kT0 + 600 * kSec, 60 * kSec));
}

TEST(LiveCost, StalledGpuHoursCountFromTheLastStepUntilResumed) {
  LiveRecord r;
  EXPECT_EQ(stalled_gpu_hours(r, 8, kT0, 0, kT0), 0);  // not flagged
  flag_stall(r, stalled_at_step(29), {}, kT0 + 600 * kSec);
  // From the last step (kT0) to the flag: 8 GPUs x 10 minutes.
  EXPECT_DOUBLE_EQ(stalled_gpu_hours(r, 8, kT0, 0, kT0 + 600 * kSec), 8.0 / 6);
  EXPECT_DOUBLE_EQ(stalled_gpu_hours(r, 8, kT0, kT0 + 600 * kSec, kT0 + 1050 * kSec), 1.0);
  EXPECT_EQ(stalled_gpu_hours(r, std::nullopt, kT0, kT0, kT0 + 1000 * kSec), 0);
  r.resumed_usec = kT0 + 1100 * kSec;
  EXPECT_EQ(stalled_gpu_hours(r, 8, kT0, kT0 + 1050 * kSec, kT0 + 1200 * kSec), 0);
  EXPECT_EQ(gpu_hours(8, kT0, kT0 - kSec), 0);
}

TEST(LiveCost, AnEarlyCancelSavesTheRestOfTheTimeLimit) {
  JobFacts job;
  job.start_time = kT0 / kSec;
  job.time_limit_sec = 4 * 3600;
  job.gpus = 16;
  LiveRecord r;
  r.action = "cancel";
  r.action_usec = kT0 + 3600 * kSec;
  ASSERT_TRUE(gpu_hours_saved(r, job));
  EXPECT_DOUBLE_EQ(*gpu_hours_saved(r, job), 48);  // 16 GPUs x the 3 hours left
  r.action_error = "scancel: exit 1";
  EXPECT_FALSE(gpu_hours_saved(r, job));
  r.action_error.clear();
  r.action = "notify";
  EXPECT_FALSE(gpu_hours_saved(r, job));
  r.action = "cancel";
  job.time_limit_sec.reset();
  EXPECT_FALSE(gpu_hours_saved(r, job));
}

TEST(LiveSpool, TheNewestGoodLiveRecordIsResumedFrom) {
  FollowState follow{.path = "/home/u/slurm-42.out", .offset = 4096};
  LiveRecord rec;
  rec.flagged_usec = kT0;
  rec.step = 29;
  const std::vector<nlohmann::json> records = {
      {{"r", "msg"}, {"m", nlohmann::json::object()}},
      live_spool_record(FollowState{.path = "/home/u/slurm-42.out"}, LiveRecord{}, 0, {}),
      live_spool_record(follow, rec, 120, {}),
      {{"r", "live"}, {"follow", {{"offset", "bad"}}}, {"record", {}}}};
  const auto e = latest_live_entry(records);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->follow.offset, 4096U);
  EXPECT_EQ(e->record.step, 29);
  EXPECT_EQ(e->lines, 120);
  EXPECT_FALSE(latest_live_entry({records[0]}));
}

// The attempt a record was saved for, and who may resume it.
TEST(LiveSpool, ARecordIsResumedOnlyByItsOwnAttemptOfTheSameFile) {
  const std::string path = "/home/u/slurm-42.out";
  LiveRecord first;
  first.flagged_usec = kT0;
  first.action = "requeue";
  const LiveAttempt a0{0, 1795860000};
  const LiveAttempt a1{1, 1795860300};
  const std::vector<nlohmann::json> records = {
      live_spool_record(FollowState{.path = path, .offset = 9000}, first, 40, a0),
      {{"r", "live"},  // written before attempts were recorded
       {"follow", follow_state_json(FollowState{.path = path})},
       {"record", LiveRecord{}},
       {"lines", 3}}};
  EXPECT_FALSE(latest_live_entry(records)->attempt) << "the newest is the legacy one";
  const auto e0 = live_entry_of(records, 0);
  ASSERT_TRUE(e0);
  EXPECT_EQ(e0->record.action, "requeue");
  EXPECT_TRUE(resumes(*e0, a0, path)) << "an agent restarted within the attempt";
  EXPECT_FALSE(resumes(*e0, a1, path)) << "the requeued job's next attempt starts afresh";
  EXPECT_FALSE(resumes(*e0, LiveAttempt{0, 1795869999}, path)) << "another start";
  EXPECT_FALSE(resumes(*e0, a0, "/home/u/other.out"));
  EXPECT_FALSE(resumes(*latest_live_entry(records), a0, path)) << "no attempt: not trusted";
  EXPECT_FALSE(live_entry_of(records, 1));
}

JobFacts shown(int restarts, int64_t start, const std::string& state) {
  JobFacts f;
  f.restart_count = restarts;
  f.start_time = start;
  f.state = state;
  return f;
}

TEST(AttemptCheck, OnlyTheFlaggedAttemptStillRunningMayBeActedOn) {
  const LiveAttempt flagged{0, 1795860000};
  EXPECT_EQ(attempt_mismatch(flagged, shown(0, 1795860000, "RUNNING")), "");
  EXPECT_EQ(attempt_mismatch(flagged, shown(1, 1795860300, "RUNNING")),
            "slurmctld shows another attempt of the job (Restarts=1 started "
            "2026-11-28T10:05:00Z) than the one flagged (Restarts=0 started 2026-11-28T10:00:00Z)");
  EXPECT_NE(attempt_mismatch(flagged, shown(1, 0, "PENDING")).find("another attempt"),
            std::string::npos);
  EXPECT_EQ(attempt_mismatch(flagged, shown(0, 1795860000, "SUSPENDED")),
            "slurmctld shows the flagged attempt SUSPENDED, not RUNNING");
}

TEST(ActionTries, AFailedCommandIsTriedAgainWithBackoffAtMostThreeTimes) {
  LiveRecord r;
  EXPECT_FALSE(action_pending(r)) << "nothing to do";
  r.action = "notify";
  EXPECT_FALSE(action_pending(r));
  r.action = "cancel";
  EXPECT_TRUE(action_pending(r)) << "recorded, never answered (an agent that stopped)";
  r.action_tries = 1;
  record_action_try(r, false, "scancel 7: exit 1");
  EXPECT_EQ(r.action_result, "retry");
  EXPECT_EQ(r.action_error, "scancel 7: exit 1 (try 1 of 3)");
  EXPECT_TRUE(action_pending(r));
  EXPECT_EQ(action_retry_delay_usec(1), 10 * kSec);
  EXPECT_EQ(action_retry_delay_usec(2), 20 * kSec);
  r.action_tries = 3;
  record_action_try(r, false, "scancel 7: exit 1");
  EXPECT_EQ(r.action_result, "failed");
  EXPECT_FALSE(action_pending(r));
  LiveRecord ok;
  ok.action = "requeue";
  ok.action_tries = 2;
  ok.action_error = "x (try 1 of 3)";
  record_action_try(ok, true, "");
  EXPECT_EQ(ok.action_result, "done");
  EXPECT_TRUE(ok.action_error.empty());
  EXPECT_FALSE(action_pending(ok));
}

TEST(HangFactsFromSlurm, RestartsAndRequeueComeFromWhatSlurmShowsNow) {
  JobRecord j;
  j.requeue_max = 3;
  JobFacts now = shown(2, 1795860000, "RUNNING");
  now.requeue_allowed = true;
  StallVerdict v;
  v.stalled = true;
  const HangFacts f = hang_facts(j, LiveRecord{}, v, {}, true, now);
  EXPECT_EQ(f.restarts, 2);
  EXPECT_EQ(f.requeue_max, 3);
  EXPECT_TRUE(f.requeueable);
}

}  // namespace
}  // namespace triage::agent

namespace triage::agent {
namespace {

// Issue 28: the pace warning is raised once, stands (its since kept, its numbers refreshed) while
// the judgement keeps finding it, clears when it is gone, and never touches the stall or action.
TEST(LivePace, AWarningIsRaisedOnceStandsWithItsSinceAndClears) {
  LiveRecord r;
  r.flagged_usec = 7;
  r.action = "notify";
  EXPECT_EQ(take_pace_warning(r, "", 100), PaceChange::kNone);
  EXPECT_EQ(take_pace_warning(r, "Pace (live): slowdown: step time 10 s -> 13 s", 200),
            PaceChange::kRaised);
  EXPECT_EQ(r.pace_warning_usec, 200);
  EXPECT_EQ(take_pace_warning(r, "Pace (live): slowdown: step time 10 s -> 13.1 s", 300),
            PaceChange::kNone);
  EXPECT_EQ(r.pace_warning, "Pace (live): slowdown: step time 10 s -> 13.1 s");
  EXPECT_EQ(r.pace_warning_usec, 200) << "it stands since it was raised";
  EXPECT_EQ(take_pace_warning(r, "", 400), PaceChange::kCleared);
  EXPECT_EQ(r.pace_warning, "");
  EXPECT_EQ(r.pace_warning_usec, 0);
  EXPECT_EQ(r.flagged_usec, 7);
  EXPECT_EQ(r.action, "notify");
}

TEST(LivePace, TheWarningSurvivesTheSpoolRecord) {
  LiveRecord r;
  (void)take_pace_warning(r, "Pace (live): straggler: rank 3", 500);
  const auto back = latest_live_entry({live_spool_record(FollowState{.path = "/x"}, r, 10, {})});
  ASSERT_TRUE(back);
  EXPECT_EQ(back->record.pace_warning, "Pace (live): straggler: rank 3");
  EXPECT_EQ(back->record.pace_warning_usec, 500);
}

}  // namespace
}  // namespace triage::agent
