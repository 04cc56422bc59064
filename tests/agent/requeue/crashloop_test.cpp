// The crashloop stop of --triage-requeue (issue 28 part 5): two attempts in a row failing the same
// way without getting further end the requeues; progress, another failure, or a record that does
// not know how far its attempt got do not. And the records it compares: older ones still load,
// and an earlier attempt held only by another node is found in its answer.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "agent/history/history_gather.h"
#include "agent/history/outcome_record.h"
#include "agent/requeue/crashloop.h"
#include "agent/requeue/job_requeue.h"
#include "agent/requeue/requeue_decision.h"
#include "agent/slurm/job_comment.h"

namespace triage::agent {
namespace {

// Job 4242's attempt `attempt`: an NCCL timeout that ended at `step`, resuming from `checkpoint`.
OutcomeRecord nccl_timeout(int attempt, std::optional<int64_t> step,
                           std::optional<int64_t> checkpoint) {
  OutcomeRecord r;
  r.job_id = 4242;
  r.user = "alice";
  r.end_time = 1700000000 + attempt * 600;
  r.status = "failed";
  r.cls = "nccl-timeout";
  r.blame = "platform";
  r.nodelist = "gpu-a[017-018]";
  r.attempt = attempt;
  r.progress_known = true;
  r.last_step = step;
  r.last_checkpoint = checkpoint;
  return r;
}

TEST(Crashloop, TheSameFailureTwiceAtTheSameStepStopsTheRequeues) {
  const CrashloopVerdict v = decide_crashloop(nccl_timeout(0, 120, 100), nccl_timeout(1, 120, 100));
  EXPECT_TRUE(v.stop);
  EXPECT_EQ(v.reason.rfind("not requeued: the same failure twice without progress", 0), 0u)
      << v.reason;
  EXPECT_NE(v.reason.find("nccl-timeout in attempt 0 at step 120, checkpoint 100"),
            std::string::npos)
      << v.reason;
}

TEST(Crashloop, AnAttemptThatDiedEarlierAfterResumingGotNoFurther) {
  // Resumed from checkpoint 100, died at step 110: behind the first attempt's 120.
  EXPECT_TRUE(decide_crashloop(nccl_timeout(0, 120, 100), nccl_timeout(1, 110, 100)).stop);
}

TEST(Crashloop, TwoAttemptsThatNeverReachedAStepAreACrashloop) {
  // The classic: both die in start-up, before any step or checkpoint.
  const CrashloopVerdict v = decide_crashloop(nccl_timeout(2, std::nullopt, std::nullopt),
                                              nccl_timeout(3, std::nullopt, std::nullopt));
  EXPECT_TRUE(v.stop);
  EXPECT_NE(v.reason.find("no step seen, no checkpoint"), std::string::npos) << v.reason;
}

TEST(Crashloop, ALaterStepIsProgress) {
  const CrashloopVerdict v = decide_crashloop(nccl_timeout(0, 120, 100), nccl_timeout(1, 180, 100));
  EXPECT_FALSE(v.stop);
  EXPECT_NE(v.reason.find("progress since attempt 0"), std::string::npos) << v.reason;
}

TEST(Crashloop, ALaterCheckpointIsProgressEvenWhenTheStepIsBehind) {
  EXPECT_FALSE(decide_crashloop(nccl_timeout(0, 180, 100), nccl_timeout(1, 160, 150)).stop);
}

TEST(Crashloop, AFirstCheckpointAfterNoneIsProgress) {
  EXPECT_FALSE(decide_crashloop(nccl_timeout(0, 40, std::nullopt), nccl_timeout(1, 40, 40)).stop);
}

TEST(Crashloop, ADifferentFailureIsRequeued) {
  OutcomeRecord xid = nccl_timeout(1, 120, 100);
  xid.cls = "gpu-fell-off-bus";
  const CrashloopVerdict v = decide_crashloop(nccl_timeout(0, 120, 100), xid);
  EXPECT_FALSE(v.stop);
  EXPECT_NE(v.reason.find("nccl-timeout, then gpu-fell-off-bus"), std::string::npos) << v.reason;
}

TEST(Crashloop, ARecordWithoutProgressFieldsIsNotCalledACrashloop) {
  OutcomeRecord old = nccl_timeout(0, std::nullopt, std::nullopt);
  old.progress_known = false;  // written by an agent before these fields
  old.attempt.reset();
  const CrashloopVerdict v = decide_crashloop(old, nccl_timeout(1, 120, 100));
  EXPECT_FALSE(v.stop);
  EXPECT_NE(v.reason.find("does not say how far it got"), std::string::npos) << v.reason;
}

TEST(Crashloop, NoEarlierAttemptNoUnknownClassNoGapNoSuccess) {
  EXPECT_FALSE(decide_crashloop(std::nullopt, nccl_timeout(1, 120, 100)).stop);
  OutcomeRecord unknown = nccl_timeout(1, 120, 100);
  unknown.cls.reset();
  EXPECT_FALSE(decide_crashloop(nccl_timeout(0, 120, 100), unknown).stop);
  // Attempt 1's record is missing: attempts 0 and 2 are not two in a row.
  EXPECT_FALSE(decide_crashloop(nccl_timeout(0, 120, 100), nccl_timeout(2, 120, 100)).stop);
  OutcomeRecord completed = nccl_timeout(0, 120, 100);
  completed.status = "completed";
  EXPECT_FALSE(decide_crashloop(completed, nccl_timeout(1, 120, 100)).stop);
}

TEST(Crashloop, ThePreviousAttemptIsTheNewestEarlierOneOfTheSameJob) {
  OutcomeRecord other_job = nccl_timeout(1, 5, std::nullopt);
  other_job.job_id = 77;
  const std::vector<OutcomeRecord> records = {nccl_timeout(0, 10, std::nullopt),
                                              nccl_timeout(1, 20, std::nullopt), other_job,
                                              nccl_timeout(2, 30, std::nullopt)};
  const auto p = previous_attempt(records, nccl_timeout(2, 30, std::nullopt));
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->attempt, 1);
  EXPECT_EQ(p->last_step, 20);
  EXPECT_FALSE(previous_attempt(records, nccl_timeout(0, 10, std::nullopt)).has_value())
      << "the first attempt has none, and is not its own previous attempt";
}

TEST(Crashloop, TheRequeueDecisionDeclinesACrashloopBeforeLookingForNodes) {
  RequeueFacts f;
  f.asked_max = 3;
  f.admin_allows = true;
  f.known = true;
  f.batch = true;
  f.requeueable = true;
  f.restarts = 1;
  f.status = "failed";
  f.blame = "platform";
  f.cls = "nccl-timeout";
  f.implicated = {{"gpu-a017", "Xid 79", true}};
  f.job_nodes = {"gpu-a017"};
  f.crashloop = decide_crashloop(nccl_timeout(0, 120, 100), nccl_timeout(1, 120, 100)).reason;
  const RequeueDecision d = decide_requeue(f);
  EXPECT_EQ(d.outcome, RequeueOutcome::kDecline);
  EXPECT_EQ(d.code, "crashloop");
  EXPECT_EQ(d.reason, f.crashloop);
  f.crashloop.clear();
  EXPECT_EQ(decide_requeue(f).outcome, RequeueOutcome::kRequeue) << "the same job, no crashloop";
}

TEST(Crashloop, AccountingCarriesTheStopAheadOfTheNodes) {
  const OutcomeRecord r = nccl_timeout(1, 120, 100);
  EXPECT_EQ(compose_triage_summary(summary_of(r, "", "stopped-crashloop")),
            "triage=nccl-timeout;blame=platform;requeue=stopped-crashloop;nodes=");
  EXPECT_EQ(compose_triage_summary(summary_of(r, "")), "triage=nccl-timeout;blame=platform;nodes=");
}

TEST(Crashloop, TheEarlierAttemptsNodesAreTheJobsAndThoseItIsKeptOff) {
  JobFacts now;
  now.excluded_nodes = "gpu-a[017,019]";
  EXPECT_EQ(nodes_of_earlier_attempts(now, {"gpu-a018", "gpu-a019"}),
            (std::vector<std::string>{"gpu-a018", "gpu-a019", "gpu-a017"}));
  now.excluded_nodes = "gpu-a[017";
  EXPECT_EQ(nodes_of_earlier_attempts(now, {"gpu-a018"}), std::vector<std::string>{"gpu-a018"})
      << "an ExcNodeList that is not a hostlist names no node";
  now.excluded_nodes = "gpu-a[001-100]";
  EXPECT_EQ(nodes_of_earlier_attempts(now, {}, 4).size(), 4u);
}

TEST(OutcomeRecordProgress, ANewRecordCarriesItsAttemptAndProgressBothWays) {
  JobFacts facts;
  facts.job_id = 4242;
  facts.restart_count = 2;
  facts.nodes = {"gpu-a017"};
  const nlohmann::json triage = {{"status", "failed"},
                                 {"primary_failure", "nccl-timeout"},
                                 {"progress", {{"last_step", 120}, {"resume_step", 100}}}};
  const OutcomeRecord r = build_outcome_record(triage, facts, std::nullopt, 1700000000);
  EXPECT_EQ(r.attempt, 2);
  EXPECT_TRUE(r.progress_known);
  EXPECT_EQ(r.last_step, 120);
  EXPECT_EQ(r.last_checkpoint, 100);
  const OutcomeRecord back = outcome_from_json(outcome_to_compact_json(r));
  EXPECT_EQ(back.attempt, 2);
  EXPECT_TRUE(back.progress_known);
  EXPECT_EQ(back.last_step, 120);
  EXPECT_EQ(back.last_checkpoint, 100);
}

TEST(OutcomeRecordProgress, ResumingFromStepZeroIsNoCheckpoint) {
  JobFacts facts;
  facts.job_id = 4242;
  const nlohmann::json triage = {{"status", "failed"},
                                 {"progress", {{"last_step", 4}, {"resume_step", 0}}}};
  const OutcomeRecord r = build_outcome_record(triage, facts, std::nullopt, 1700000000);
  EXPECT_EQ(r.last_step, 4);
  EXPECT_FALSE(r.last_checkpoint.has_value());
}

TEST(OutcomeRecordProgress, ALogWithoutStepsIsKnownToHaveNone) {
  JobFacts facts;
  facts.job_id = 4242;
  const nlohmann::json triage = {{"status", "failed"}, {"progress", nullptr}};
  const OutcomeRecord r = build_outcome_record(triage, facts, std::nullopt, 1700000000);
  EXPECT_TRUE(r.progress_known);
  EXPECT_FALSE(r.last_step.has_value());
  const nlohmann::json j = outcome_to_json(r);
  EXPECT_TRUE(j.at("last_step").is_null());
  EXPECT_TRUE(j.at("last_checkpoint").is_null());
  EXPECT_TRUE(outcome_from_json(j).progress_known);
}

TEST(OutcomeRecordProgress, AnOlderAgentsRecordStillLoadsWithProgressUnknown) {
  const nlohmann::json old = nlohmann::json::parse(R"({"v":1,"job_id":4242,"user":"alice",
      "end_time":1700000000,"status":"failed","class":"nccl-timeout","blame":"platform",
      "nodes":"gpu-a017","implicated":[],"gpu_hours_lost":null})");
  const OutcomeRecord r = outcome_from_json(old);
  EXPECT_FALSE(r.attempt.has_value());
  EXPECT_FALSE(r.progress_known);
  EXPECT_FALSE(outcome_to_json(r).contains("last_step")) << "not invented on the way out";
}

TEST(OutcomeRecordProgress, HalfAProgressOrAWrongTypeIsNamed) {
  nlohmann::json j = outcome_to_json(nccl_timeout(1, 120, 100));
  j.erase("last_checkpoint");
  try {
    (void)outcome_from_json(j);
    FAIL() << "half a progress loaded";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("\"last_checkpoint\" is missing"), std::string::npos)
        << e.what();
  }
  j = outcome_to_json(nccl_timeout(1, 120, 100));
  j["attempt"] = "one";
  EXPECT_THROW((void)outcome_from_json(j), std::invalid_argument);
  j = outcome_to_json(nccl_timeout(1, 120, 100));
  j["last_step"] = 1.5;
  EXPECT_THROW((void)outcome_from_json(j), std::invalid_argument);
}

TEST(OutcomeRecordProgress, AnotherNodesAnswerHoldsTheEarlierAttempt) {
  const auto answer = [](const std::string& host, const std::vector<OutcomeRecord>& rs) {
    nlohmann::json records = nlohmann::json::array();
    for (const OutcomeRecord& r : rs)
      records.push_back(outcome_to_json(r));
    return PeerResponse{host, true, 200,
                        nlohmann::json{{"host", host}, {"records", records}}.dump(), ""};
  };
  OutcomeRecord other_job = nccl_timeout(0, 1, std::nullopt);
  other_job.job_id = 77;
  const std::vector<PeerResponse> answers = {
      answer("gpu-a017", {nccl_timeout(0, 120, 100), other_job}),
      answer("gpu-a018", {nccl_timeout(0, 120, 100)}),  // the same attempt again
      PeerResponse{"gpu-a019", false, 0, "", "connection refused"},
      PeerResponse{"gpu-a020", true, 200, "not a history", ""}};
  const std::vector<OutcomeRecord> found = job_records_in_answers(answers, 4242);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].attempt, 0);
  EXPECT_EQ(found[0].last_step, 120);
}

}  // namespace
}  // namespace triage::agent
