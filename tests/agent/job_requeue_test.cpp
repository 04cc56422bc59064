// The requeue carried out (agent/job_requeue.h) against scripted Slurm commands: the order of the
// steps (summary before the hold, the report pass before the release), what the report pass is
// told, and what is left alone when Slurm refuses.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/accounting_comment.h"
#include "agent/event_loop.h"
#include "agent/job_requeue.h"
#include "agent/worker_pool.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::kNobody;
using testing::kNogroup;
using testing::TempDir;

// slurmctld and slurmdbd as the test scripts them: every command is recorded; requeuehold is
// refused when `refuse_hold` says why.
class ScriptedCommands {
 public:
  std::string refuse_hold;
  std::string show_job =
      "JobId=77 JobName=train JobState=FAILED Requeue=1 Restarts=0 BatchFlag=1 "
      "ExcNodeList=(null) NodeList=gpu-a017\n";

  SlurmCommandRunner runner() {
    return [this](const std::vector<std::string>& argv) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(command_line(argv));
      const std::string& what = argv.at(1);
      if (argv[0] == "scontrol" && what == "-o") return SlurmCommandResult{true, show_job, ""};
      if (argv[0] == "sacct") return SlurmCommandResult{true, "JS1:abc\n", ""};
      if (argv[0] == "scontrol" && what == "requeuehold" && !refuse_hold.empty()) {
        return SlurmCommandResult{false, "", refuse_hold};
      }
      return SlurmCommandResult{true, " Modified jobs...\n", ""};
    };
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> calls_;
};

class JobRequeueTest : public ::testing::Test {
 protected:
  JobRequeueTest() : dir_("job-requeue"), workers_(2) {
    out_ = dir_ / "out";
    testing::make_dirs(out_, 0755);
    EXPECT_EQ(chown(out_.c_str(), kNobody, kNogroup), 0);
    comments_ = std::make_unique<AccountingComments>(
        AccountingComments::Options{CommentField::kAdminComment, dir_.path()}, loop_, workers_,
        slurm_.runner());
    requeue_ = std::make_unique<JobRequeue>(
        loop_, workers_, *comments_, slurm_.runner(), [] { return std::set<std::string>{}; },
        dir_.path());
    requeue_->set_on_result([this](const JobRequeue::Result& r) { result_.set_value(r); });
    runner_ = std::thread([this] { loop_.run(); });
  }
  ~JobRequeueTest() override {
    loop_.stop();
    runner_.join();
    workers_.stop();
  }

  // A job that died of an Xid 79 on gpu-a017 and asked for one requeue; the report pass writes
  // the evidence it was given into out/.
  AnalysedJob xid_job(bool allowed, const std::string& blame = "platform") const {
    AnalysedJob a;
    a.facts.job_id = 77;
    a.facts.nodes = {"gpu-a017"};
    a.record.job_id = 77;
    a.record.status = "failed";
    a.record.cls = "gpu-fell-off-bus";
    a.record.blame = blame;
    a.record.nodelist = "gpu-a017";
    a.record.implicated = {{"gpu-a017", "Xid 79", true}};
    a.report_path = "/home/u/run/triage.md";
    a.requeue_max = 1;
    a.requeue_allowed = allowed;
    a.request.job_id = 77;
    a.request.argv = {"/bin/sh", "-c", "cat > " + out_ + "/evidence.json"};
    a.request.who.uid = kNobody;
    a.request.who.gid = kNogroup;
    a.request.stdin_data = R"({"schema_version":1,"job":{"job_id":77}})";
    a.request.timeout_ms = 10000;
    return a;
  }

  JobRequeue::Result run(AnalysedJob a) {
    loop_.post([this, a = std::move(a)]() mutable { requeue_->on_analysed(std::move(a)); });
    auto f = result_.get_future();
    EXPECT_EQ(f.wait_for(std::chrono::seconds(20)), std::future_status::ready);
    return f.get();
  }

  nlohmann::json report_pass_evidence() const {
    return nlohmann::json::parse(testing::read_file(out_ + "/evidence.json"));
  }

  TempDir dir_;
  std::string out_;
  EventLoop loop_;
  WorkerPool workers_;
  ScriptedCommands slurm_;
  std::unique_ptr<AccountingComments> comments_;
  std::unique_ptr<JobRequeue> requeue_;
  std::promise<JobRequeue::Result> result_;
  std::thread runner_;
};

TEST_F(JobRequeueTest, SummaryThenHoldExcludeReportAndOnlyThenRelease) {
  const JobRequeue::Result r = run(xid_job(true));
  EXPECT_TRUE(r.requeued) << r.reason;
  EXPECT_EQ(r.outcome, RequeueOutcome::kRequeue);
  EXPECT_EQ(r.excluded, std::vector<std::string>{"gpu-a017"});
  const std::string summary =
      "triage=gpu-fell-off-bus;blame=platform;nodes=gpu-a017;report=/home/u/run/"
      "triage.attempt0.md";
  const std::vector<std::string> expected = {
      "scontrol -o show job 77",
      "sacct -n -X -P -j 77 -o AdminComment",
      "sacctmgr -i modify job where jobid=77 set AdminComment=JS1:abc " + summary,
      "scontrol requeuehold 77",
      "scontrol update JobId=77 ExcNodeList=gpu-a017",
      "scontrol release 77"};
  EXPECT_EQ(slurm_.calls(), expected);
  const nlohmann::json note = report_pass_evidence().at("requeue");
  EXPECT_EQ(note.at("outcome"), "requeued");
  EXPECT_EQ(note.at("attempt"), 0);
  EXPECT_EQ(note.at("excluded"), nlohmann::json::array({"gpu-a017"}));
  EXPECT_EQ(note.at("steps").size(), 3u) << "hold, exclusion, and the release to come";
  EXPECT_EQ(requeue_->stats().requeued, 1u);
}

TEST_F(JobRequeueTest, ARefusedHoldLeavesTheJobAsItIsAndTheReportSaysWhy) {
  slurm_.refuse_hold = "scontrol: error: Requested operation is presently disabled for job 77";
  const JobRequeue::Result r = run(xid_job(true));
  EXPECT_FALSE(r.requeued);
  EXPECT_EQ(r.outcome, RequeueOutcome::kRefuse);
  for (const std::string& call : slurm_.calls()) {
    EXPECT_EQ(call.find("ExcNodeList"), std::string::npos) << call;
    EXPECT_EQ(call.find("release"), std::string::npos) << call;
  }
  const nlohmann::json note = report_pass_evidence().at("requeue");
  EXPECT_EQ(note.at("outcome"), "refused");
  EXPECT_NE(note.at("reason").get<std::string>().find("presently disabled"), std::string::npos)
      << note.dump();
  EXPECT_EQ(requeue_->stats().refused, 1u);
}

TEST_F(JobRequeueTest, AUserCodeFailureIsExplainedAndNeverTouchesTheJob) {
  const JobRequeue::Result r = run(xid_job(true, "user-code"));
  EXPECT_EQ(r.outcome, RequeueOutcome::kDecline);
  EXPECT_EQ(report_pass_evidence().at("requeue").at("outcome"), "declined");
  // The summary is written after the report pass; wait for its sacctmgr.
  for (int i = 0; i < 100 && slurm_.calls().size() < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("requeuehold"), std::string::npos) << call;
  EXPECT_EQ(slurm_.calls().back(),
            "sacctmgr -i modify job where jobid=77 set AdminComment=JS1:abc "
            "triage=gpu-fell-off-bus;blame=user-code;nodes=gpu-a017;report=/home/u/run/triage.md");
}

TEST_F(JobRequeueTest, WithoutTheAdminsRequeueAllowItIsRefusedBeforeAnyCommand) {
  const JobRequeue::Result r = run(xid_job(false));
  EXPECT_EQ(r.outcome, RequeueOutcome::kRefuse);
  EXPECT_NE(r.reason.find("requeue=allow"), std::string::npos) << r.reason;
  EXPECT_EQ(report_pass_evidence().at("requeue").at("outcome"), "refused");
  EXPECT_EQ(slurm_.calls().front(), "scontrol -o show job 77");
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("requeuehold"), std::string::npos) << call;
}

TEST_F(JobRequeueTest, NoJobIsLeftListedAsHeldOnceItsRequeueEnds) {
  (void)run(xid_job(true));
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(dir_ / "requeue-held.json")),
            nlohmann::json::object());
}

TEST_F(JobRequeueTest, ARequeueARestartInterruptedIsReleasedOnceTheExclusionIsInPlace) {
  testing::write_file(dir_ / "requeue-held.json", R"({"77": "gpu-a017", "78": "gpu-b001"})");
  slurm_.show_job =
      "JobId=77 JobState=PENDING Reason=JobHeldUser Requeue=1 Restarts=1 BatchFlag=1 "
      "ExcNodeList=gpu-a[016-017]\n";
  loop_.post([this] { requeue_->open(); });
  for (int i = 0; i < 200; ++i) {
    if (testing::read_file(dir_ / "requeue-held.json") == "{}\n") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(testing::read_file(dir_ / "requeue-held.json"), "{}\n");
  const std::vector<std::string> calls = slurm_.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "scontrol release 77"), calls.end());
  EXPECT_EQ(std::find(calls.begin(), calls.end(), "scontrol release 78"), calls.end())
      << "the job the scripted Slurm shows is 77's: 78 has no gpu-b001 excluded and stays held";
}

}  // namespace
}  // namespace triage::agent
