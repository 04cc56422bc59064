// Requeue around failed nodes (issue 14, item 3) and the summary in Slurm's accounting (item 4):
// the decision, the Slurm commands and their answers, one write of the summary against a scripted
// sacct/sacctmgr, and how the job record takes the user's and the admin's choices.
#include <gtest/gtest.h>

#include <deque>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/node/job_table.h"
#include "agent/requeue/job_requeue.h"
#include "agent/requeue/requeue_decision.h"
#include "agent/slurm/accounting_comment.h"
#include "agent/slurm/slurm_commands.h"
#include "common/error.h"
#include "common/report_names.h"
#include "tests/agent/history_fixture.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::lifecycle;

// A 2-node job that died of an Xid 79 on gpu-a017: the kernel said so (trusted), the user asked
// for one requeue, the admin allows it, Slurm can do it.
RequeueFacts xid79_on_a017() {
  RequeueFacts f;
  f.asked_max = 1;
  f.admin_allows = true;
  f.known = true;
  f.batch = true;
  f.requeueable = true;
  f.restarts = 0;
  f.status = "failed";
  f.blame = "platform";
  f.cls = "gpu-fell-off-bus";
  f.implicated = {{"gpu-a017", "Xid 79 (GPU fell off the bus)", true}};
  f.job_nodes = {"gpu-a017", "gpu-a018"};
  return f;
}

bool says(const RequeueDecision& d, const std::string& text) {
  return d.reason.find(text) != std::string::npos;
}

TEST(RequeueDecision, APlatformFailureOnTrustedEvidenceIsRequeuedAwayFromItsNode) {
  const RequeueDecision d = decide_requeue(xid79_on_a017());
  EXPECT_EQ(d.outcome, RequeueOutcome::kRequeue);
  EXPECT_EQ(d.exclude, std::vector<std::string>{"gpu-a017"});
  EXPECT_TRUE(says(d, "platform failure on gpu-a017 (trusted evidence)")) << d.reason;
  EXPECT_TRUE(says(d, "requeue 1 of 1")) << d.reason;
  EXPECT_EQ(d.code, "platform") << "the metrics' reason label";
}

TEST(RequeueDecision, NothingToSayWhenTheUserDidNotAsk) {
  RequeueFacts f = xid79_on_a017();
  f.asked_max = 0;
  EXPECT_EQ(decide_requeue(f).outcome, RequeueOutcome::kNotAsked);
}

TEST(RequeueDecision, UserSideFailuresAreNeverRequeuedWhateverTheNodesSay) {
  for (const char* blame : {"user-code", "user-config", "input-data"}) {
    RequeueFacts f = xid79_on_a017();
    f.blame = blame;
    f.cls = "python-exception";
    f.suspects = {"gpu-a017"};
    const RequeueDecision d = decide_requeue(f);
    EXPECT_EQ(d.outcome, RequeueOutcome::kDecline) << blame;
    EXPECT_TRUE(says(d, std::string("blamed on ") + blame)) << d.reason;
    EXPECT_TRUE(d.exclude.empty());
  }
}

TEST(RequeueDecision, ALogOnlyPlatformHintIsNotEnough) {
  RequeueFacts f = xid79_on_a017();
  f.implicated = {{"gpu-a017", "the log names it", false}};
  const RequeueDecision d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kDecline);
  EXPECT_TRUE(says(d, "no node to avoid")) << d.reason;
}

TEST(RequeueDecision, AnUnknownFailureOnASuspectNodeIsRequeuedAwayFromTheSuspect) {
  RequeueFacts f = xid79_on_a017();
  f.blame = "unknown";
  f.cls = "nccl-timeout";
  f.implicated.clear();
  f.suspects = {"gpu-a018", "gpu-b999"};
  const RequeueDecision d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kRequeue) << d.reason;
  EXPECT_EQ(d.exclude, std::vector<std::string>{"gpu-a018"}) << "only the job's own suspects";
  EXPECT_TRUE(says(d, "unknown failure on suspect node(s) gpu-a018")) << d.reason;
  EXPECT_EQ(d.code, "suspect-node");
}

TEST(RequeueDecision, ACompletedOrCancelledJobIsNotRequeued) {
  for (const char* status : {"completed", "cancelled"}) {
    RequeueFacts f = xid79_on_a017();
    f.status = status;
    EXPECT_EQ(decide_requeue(f).outcome, RequeueOutcome::kDecline) << status;
  }
}

TEST(RequeueDecision, NeverMoreThanTheUserAskedFor) {
  RequeueFacts f = xid79_on_a017();
  f.asked_max = 2;
  f.restarts = 1;
  EXPECT_EQ(decide_requeue(f).outcome, RequeueOutcome::kRequeue);
  f.restarts = 2;
  const RequeueDecision d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kDecline);
  EXPECT_TRUE(says(d, "already requeued 2 time(s) of the 2 --triage-requeue=2 allows")) << d.reason;
}

TEST(RequeueDecision, RefusedWithoutTheAdminOrWhereSlurmCannotAndSaysWhy) {
  RequeueFacts f = xid79_on_a017();
  f.admin_allows = false;
  RequeueDecision d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kRefuse);
  EXPECT_TRUE(says(d, "requeue=allow is not set")) << d.reason;
  EXPECT_EQ(d.code, "not-allowed");

  f = xid79_on_a017();
  f.requeueable = false;
  d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kRefuse);
  EXPECT_TRUE(says(d, "not requeueable")) << d.reason;
  EXPECT_EQ(d.code, "not-requeueable");

  f = xid79_on_a017();
  f.batch = false;
  EXPECT_TRUE(says(decide_requeue(f), "not a batch job"));

  f = xid79_on_a017();
  f.known = false;
  EXPECT_EQ(decide_requeue(f).outcome, RequeueOutcome::kRefuse) << "Slurm's answer is required";
}

// Job 77, a plain job: its bare id names it alone (array tasks: job_identity_test.cpp).
JobRef job77() {
  JobFacts f;
  f.job_id = 77;
  return job_ref(f);
}

TEST(SlurmCommands, TheRequeueIsHoldExcludeRelease) {
  EXPECT_EQ(requeue_hold_argv(job77()),
            (std::vector<std::string>{"scontrol", "requeuehold", "77"}));
  EXPECT_EQ(
      exclude_nodes_argv(job77(), "gpu-a[017-018]"),
      (std::vector<std::string>{"scontrol", "update", "JobId=77", "ExcNodeList=gpu-a[017-018]"}));
  EXPECT_EQ(release_argv(job77()), (std::vector<std::string>{"scontrol", "release", "77"}));
  EXPECT_THROW(exclude_nodes_argv(job77(), ""), std::invalid_argument);
  EXPECT_THROW(release_argv(JobRef{}), std::invalid_argument);
}

TEST(SlurmCommands, TheSummaryIsReadWithSacctAndWrittenWithSacctmgr) {
  EXPECT_EQ(
      read_comment_argv(job77(), CommentField::kAdminComment),
      (std::vector<std::string>{"sacct", "-n", "-X", "-P", "-j", "77", "-o", "AdminComment"}));
  EXPECT_EQ(write_comment_argv(job77(), CommentField::kComment, "a triage=x"),
            (std::vector<std::string>{"sacctmgr", "-i", "modify", "job", "where", "jobid=77", "set",
                                      "Comment=a triage=x"}));
  EXPECT_THROW(read_comment_argv(job77(), CommentField::kNone), std::invalid_argument);
  EXPECT_EQ(parse_comment_field("admincomment"), CommentField::kAdminComment);
  EXPECT_EQ(parse_comment_field("None"), CommentField::kNone);
  EXPECT_FALSE(parse_comment_field("SystemComment"));
}

TEST(SlurmCommands, SacctsAnswerIsOneLineOrNothingReadable) {
  EXPECT_EQ(parse_read_comment("JS1:abc triage=x\n"), "JS1:abc triage=x");
  EXPECT_EQ(parse_read_comment("\n"), "") << "an empty field of a record that exists";
  EXPECT_FALSE(parse_read_comment("")) << "no record yet";
  EXPECT_FALSE(parse_read_comment("first\nsecond\n")) << "a newline inside the field";
}

TEST(SlurmCommands, ExclusionsAreMergedWithTheJobsOwn) {
  EXPECT_EQ(merge_exclusions("", {"gpu-a017"}), "gpu-a017");
  EXPECT_EQ(merge_exclusions("gpu-a[016-017]", {"gpu-a017", "gpu-a018"}), "gpu-a[016-018]");
  EXPECT_THROW(merge_exclusions("gpu-a[1-", {"x"}), InputError);
}

TEST(ReportNames, EachAttemptKeepsItsOwnCopy) {
  EXPECT_EQ(attempt_report_name("/home/u/run/triage.md", 0), "/home/u/run/triage.attempt0.md");
  EXPECT_EQ(attempt_report_name("triage.json", 2), "triage.attempt2.json");
  EXPECT_EQ(attempt_report_name("/a.b/report", 1), "/a.b/report.attempt1");
}

TEST(RequeueSummary, ClassBlameAndTheImplicatedNodesOfTheRecord) {
  OutcomeRecord r;
  r.status = "failed";
  r.cls = "gpu-fell-off-bus";
  r.blame = "platform";
  r.implicated = {{"gpu-a017", "Xid 79", true}};
  EXPECT_EQ(compose_triage_summary(summary_of(r, "/r/triage.attempt0.md")),
            "triage=gpu-fell-off-bus;blame=platform;nodes=gpu-a017;report=/r/triage.attempt0.md");
  OutcomeRecord ok;
  ok.status = "completed";
  EXPECT_EQ(compose_triage_summary(summary_of(ok, "")), "triage=completed;blame=none;nodes=");
}

TEST(RequeueSuspects, TheLemonIsASuspectInTheHistoryOfANodeItSharedJobsWith) {
  const testing::HistorySpec spec;
  const auto by_node = testing::histories_by_node(testing::generate_history(spec), 10000);
  // The busy healthy node's own history: every job it ran, the lemon's among them.
  std::deque<OutcomeRecord> history;
  for (const nlohmann::json& r : by_node.at(spec.busy))
    history.push_back(outcome_from_json(r));
  const std::set<std::string> suspects = suspects_in(history);
  EXPECT_EQ(suspects.count(spec.lemon), 1u);
  EXPECT_EQ(suspects.count(spec.busy), 0u) << "running many jobs makes no suspect";
  EXPECT_EQ(suspects.count(spec.careless), 0u) << "user-code failures never count";
  EXPECT_TRUE(suspects_in({}).empty());
}

// sacct and sacctmgr as a test scripts them: each call is recorded, answers come in order.
struct ScriptedSlurm {
  std::vector<std::vector<std::string>> calls;
  std::vector<SlurmCommandResult> answers;
  SlurmCommandRunner runner() {
    return [this](const std::vector<std::string>& argv) {
      calls.push_back(argv);
      if (calls.size() > answers.size()) return SlurmCommandResult{false, "", "unexpected call"};
      return answers[calls.size() - 1];
    };
  }
};

TEST(AccountingWrite, ReadsMergesAndWritesKeepingJobstats) {
  ScriptedSlurm s;
  s.answers = {{true, "JS1:abc\n", ""}, {true, " Modified jobs...\n  77 submitted at ...\n", ""}};
  const CommentWrite w =
      write_accounting_comment(s.runner(), CommentField::kAdminComment, job77(), "triage=oom");
  EXPECT_EQ(w.state, CommentWriteState::kWritten) << w.detail;
  ASSERT_EQ(s.calls.size(), 2u);
  EXPECT_EQ(s.calls[1].back(), "AdminComment=JS1:abc triage=oom");
}

TEST(AccountingWrite, SlurmdbdDownIsAFailureWorthRetryingAndNothingIsWritten) {
  ScriptedSlurm s;
  s.answers = {{false, "", "sacct: error: Problem talking to the database: Connection refused"}};
  const CommentWrite w =
      write_accounting_comment(s.runner(), CommentField::kAdminComment, job77(), "triage=oom");
  EXPECT_EQ(w.state, CommentWriteState::kFailed);
  EXPECT_NE(w.detail.find("Connection refused"), std::string::npos) << w.detail;
  EXPECT_EQ(s.calls.size(), 1u);
}

TEST(AccountingWrite, ARecordNotThereYetOrNothingModifiedIsRetried) {
  ScriptedSlurm none;
  none.answers = {{true, "", ""}};
  EXPECT_EQ(
      write_accounting_comment(none.runner(), CommentField::kAdminComment, job77(), "triage=x")
          .state,
      CommentWriteState::kFailed);
  ScriptedSlurm nothing;
  nothing.answers = {{true, "\n", ""}, {true, " Modified jobs...\n  Nothing modified\n", ""}};
  EXPECT_EQ(
      write_accounting_comment(nothing.runner(), CommentField::kAdminComment, job77(), "triage=x")
          .state,
      CommentWriteState::kFailed);
}

TEST(AccountingWrite, AlreadyThereOrNoAccountingAtAllIsNotRetried) {
  ScriptedSlurm same;
  same.answers = {{true, "triage=x\n", ""}};
  EXPECT_EQ(
      write_accounting_comment(same.runner(), CommentField::kAdminComment, job77(), "triage=x")
          .state,
      CommentWriteState::kUnchanged);
  EXPECT_EQ(same.calls.size(), 1u) << "no sacctmgr call";
  ScriptedSlurm off;
  off.answers = {{false, "", "sacct: error: Slurm accounting storage is disabled"}};
  EXPECT_EQ(write_accounting_comment(off.runner(), CommentField::kAdminComment, job77(), "triage=x")
                .state,
            CommentWriteState::kLeftAlone);
}

TEST(RequeueRegistration, TheUsersAskAndTheAdminsRuleReachTheJobRecord) {
  JobTable t;
  const JobRecord& j = t.apply(
      parse_lifecycle(lifecycle("job_start", 7, "s", {{"requeue_max", 2}, {"requeue", "allow"}})),
      1);
  EXPECT_EQ(j.requeue_max, 2);
  EXPECT_TRUE(j.requeue_allowed);
  const JobRecord& old = t.apply(parse_lifecycle(lifecycle("job_start", 8, "s")), 1);
  EXPECT_EQ(old.requeue_max, 0) << "a record from before the option: not asked";
  EXPECT_FALSE(old.requeue_allowed);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 9, "e", {{"requeue_max", 11}})), InputError);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_end", 9, "e", {{"requeue", "yes"}})), InputError);
}

TEST(RequeueRegistration, TheNextAttemptOnTheSameNodeIsAJobToAnalyseAgain) {
  JobTable t;
  t.apply(parse_lifecycle(lifecycle("job_start", 7, "a0", {{"requeue_max", 1}})), 1);
  t.apply(parse_lifecycle(lifecycle("task_start", 7, "t0",
                                    {{"step", "batch"}, {"task", 0}, {"rank", 0}, {"pid", 4242}})),
          2);
  t.apply(parse_lifecycle(lifecycle("job_end", 7, "e0", {{"wait_status", 256}})), 3);
  t.set_analysis(7, {{"r", "analysis"}, {"result", "ok"}});
  EXPECT_EQ(t.jobs_with_pid(4242).size(), 1u);

  const JobRecord& again =
      t.apply(parse_lifecycle(lifecycle("job_start", 7, "a1", {{"restart_count", 1}})), 4);
  EXPECT_FALSE(again.ended);
  EXPECT_FALSE(again.analysis) << "the first attempt's analysis is not this one's";
  EXPECT_TRUE(again.tasks.empty());
  EXPECT_TRUE(t.jobs_with_pid(4242).empty());
  EXPECT_EQ(again.requeue_max, 1) << "the job's own settings stay";
}

TEST(RequeueRegistration, AJobStartOfALaterAttemptIsAFreshRecordEvenWithoutTheJobEnd) {
  JobTable t;
  t.apply(parse_lifecycle(lifecycle("job_start", 7, "a0", {{"restart_count", 0}})), 1);
  t.apply(parse_lifecycle(lifecycle("task_start", 7, "t0",
                                    {{"step", "batch"}, {"task", 0}, {"rank", 0}, {"pid", 4242}})),
          2);
  // The first attempt's job_end never reached this node.
  const JobRecord& again =
      t.apply(parse_lifecycle(lifecycle("job_start", 7, "a1", {{"restart_count", 1}})), 4);
  EXPECT_EQ(again.restart_count, 1);
  EXPECT_TRUE(again.tasks.empty()) << "the first attempt's tasks are not this one's";
  EXPECT_TRUE(t.jobs_with_pid(4242).empty());
  // The same attempt's job_start again (a duplicate) changes nothing.
  t.apply(parse_lifecycle(lifecycle("task_start", 7, "t1",
                                    {{"step", "batch"}, {"task", 0}, {"rank", 0}, {"pid", 5252}})),
          5);
  EXPECT_EQ(t.apply(parse_lifecycle(lifecycle("job_start", 7, "a1b", {{"restart_count", 1}})), 6)
                .tasks.size(),
            1u);
  EXPECT_THROW(parse_lifecycle(lifecycle("job_start", 9, "x", {{"restart_count", -1}})),
               InputError);
}

TEST(RequeueRegistration, ATaskThatStartsAfterTheJobEndedBeginsTheNextAttempt) {
  // Slurm requeued the job onto this node without running its prolog again: no job_start.
  JobTable t;
  t.apply(parse_lifecycle(lifecycle("job_start", 7, "a0", {{"restart_count", 0}})), 1);
  t.apply(
      parse_lifecycle(lifecycle("task_start", 7, "t0",
                                {{"step", "batch"}, {"task", 0}, {"pid", 4242}, {"time_usec", 2}})),
      2);
  t.apply(parse_lifecycle(lifecycle("job_end", 7, "e0", {{"time_usec", 3}})), 3);
  // A late copy of the first attempt's task message (from the inbox) changes nothing.
  t.apply(
      parse_lifecycle(lifecycle("task_start", 7, "t0b",
                                {{"step", "batch"}, {"task", 0}, {"pid", 4242}, {"time_usec", 2}})),
      4);
  EXPECT_TRUE(t.find(7)->ended);
  const JobRecord& again = t.apply(
      parse_lifecycle(lifecycle("task_start", 7, "t1",
                                {{"step", "batch"}, {"task", 0}, {"pid", 5252}, {"time_usec", 9}})),
      9);
  EXPECT_FALSE(again.ended);
  EXPECT_TRUE(again.batch_here);
  EXPECT_FALSE(again.restart_count) << "not known until slurmctld says";
  ASSERT_EQ(again.tasks.size(), 1u);
  EXPECT_EQ(again.tasks.begin()->second.pid, 5252);
  EXPECT_TRUE(t.running().count(7));
}

TEST(RequeueRegistration, AnEarlierAttemptsLateSummaryDoesNotMarkTheNextOneAnalysed) {
  JobTable t;
  t.apply(parse_lifecycle(lifecycle("job_start", 7, "a0", {{"restart_count", 0}})), 1);
  t.apply(parse_lifecycle(lifecycle("job_end", 7, "e0", {{"restart_count", 0}})), 3);
  t.apply(parse_lifecycle(lifecycle("job_start", 7, "a1", {{"restart_count", 1}})), 4);
  // The first attempt's analysis finishes after the second attempt started: it stays in the spool
  // and the history, but the running attempt still waits for its own.
  t.set_analysis(7, {{"r", "analysis"}, {"result", "ok"}, {"restart_count", 0}});
  EXPECT_FALSE(t.find(7)->analysis);
  t.set_analysis(7, {{"r", "analysis"}, {"result", "ok"}, {"restart_count", 1}});
  EXPECT_TRUE(t.find(7)->analysis);
}

}  // namespace
}  // namespace triage::agent
