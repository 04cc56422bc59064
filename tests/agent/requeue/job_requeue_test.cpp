// The requeue carried out (agent/requeue/job_requeue.h) against scripted Slurm commands: the order
// of the steps (summary before the hold, the report pass before the release), what the report pass
// is told, and what is left alone when Slurm refuses.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/base/event_loop.h"
#include "agent/base/worker_pool.h"
#include "agent/requeue/job_requeue.h"
#include "agent/slurm/accounting_comment.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::kNobody;
using testing::kNogroup;
using testing::TempDir;

// Job 77 as slurmctld shows it after its first attempt (restart 0) failed: a batch job that
// allows requeue, with no exclusions of its own.
JobFacts failed_77() {
  JobFacts f;
  f.job_id = 77;
  f.name = "train";
  f.state = "FAILED";
  f.batch = true;
  f.requeue_allowed = true;
  f.restart_count = 0;
  f.start_time = 1000;
  f.nodes = {"gpu-a017"};
  f.source = "slurmctld";
  return f;
}

// slurmctld and slurmdbd as the test scripts them: every command and record read is recorded;
// requeuehold is refused when `refuse_hold` says why; `jobs` is what slurmctld shows.
class ScriptedCommands {
 public:
  std::string refuse_hold;
  std::map<uint64_t, JobFacts> jobs{{77, failed_77()}};

  SlurmCommandRunner runner() {
    return [this](const std::vector<std::string>& argv) {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back(command_line(argv));
      const std::string& what = argv.at(1);
      if (argv[0] == "sacct") return SlurmCommandResult{true, "JS1:abc\n", ""};
      if (argv[0] == "scontrol" && what == "requeuehold" && !refuse_hold.empty()) {
        return SlurmCommandResult{false, "", refuse_hold};
      }
      return SlurmCommandResult{true, " Modified jobs...\n", ""};
    };
  }
  JobRequeue::LoadJob load_job() {
    return [this](uint64_t job_id, std::string& error) -> std::optional<JobFacts> {
      std::lock_guard<std::mutex> lock(mu_);
      calls_.push_back("load_job " + std::to_string(job_id));
      const auto it = jobs.find(job_id);
      if (it == jobs.end()) {
        error = "Invalid job id specified";
        return std::nullopt;
      }
      return it->second;
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
        loop_, workers_, *comments_, slurm_.runner(), slurm_.load_job(),
        [] { return std::set<std::string>{}; }, dir_.path());
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
    a.facts = failed_77();
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
      "load_job 77",
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
  EXPECT_EQ(slurm_.calls().front(), "load_job 77");
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("requeuehold"), std::string::npos) << call;
}

TEST_F(JobRequeueTest, NoJobIsLeftListedAsHeldOnceItsRequeueEnds) {
  (void)run(xid_job(true));
  EXPECT_EQ(nlohmann::json::parse(testing::read_file(dir_ / "requeue-held.json")),
            nlohmann::json::object());
}

// Waits until open()'s interrupted requeues are all settled (requeue-held.json empty again).
void wait_for_no_held(const std::string& file) {
  for (int i = 0; i < 200; ++i) {
    if (testing::read_file(file) == "{}\n") return;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

TEST_F(JobRequeueTest, ARequeueARestartInterruptedIsReleasedOnceTheExclusionIsInPlace) {
  testing::write_file(dir_ / "requeue-held.json",
                      R"({"77": {"exclusions": "gpu-a017", "restarts": 0}, "78": "gpu-b001"})");
  JobFacts held = failed_77();
  held.state = "PENDING";
  held.restart_count = 1;  // our requeuehold's
  held.excluded_nodes = "gpu-a[016-017]";
  slurm_.jobs = {{77, held}};
  loop_.post([this] { requeue_->open(); });
  wait_for_no_held(dir_ / "requeue-held.json");
  EXPECT_EQ(testing::read_file(dir_ / "requeue-held.json"), "{}\n");
  const std::vector<std::string> calls = slurm_.calls();
  EXPECT_NE(std::find(calls.begin(), calls.end(), "scontrol release 77"), calls.end());
  EXPECT_EQ(std::find(calls.begin(), calls.end(), "scontrol release 78"), calls.end())
      << "slurmctld does not know 78: it stays held";
}

TEST_F(JobRequeueTest, AnInterruptedRequeueOfAnArrayTaskReleasesThatTaskOnly) {
  testing::write_file(dir_ / "requeue-held.json",
                      R"({"77": {"exclusions": "gpu-a017", "restarts": 0}})");
  JobFacts held = failed_77();
  held.array_job_id = 70;
  held.array_task_id = 7;
  held.state = "PENDING";
  held.restart_count = 1;
  held.excluded_nodes = "gpu-a017";
  slurm_.jobs = {{77, held}};
  loop_.post([this] { requeue_->open(); });
  wait_for_no_held(dir_ / "requeue-held.json");
  EXPECT_EQ(slurm_.calls(), (std::vector<std::string>{"load_job 77", "scontrol release 70_7"}));
}

TEST_F(JobRequeueTest, AnInterruptedRequeueIsNotReleasedWhenSlurmShowsAnythingElse) {
  testing::write_file(dir_ / "requeue-held.json",
                      R"({"77": {"exclusions": "gpu-a017", "restarts": 0}})");
  // What a job name once faked in `scontrol -o show job` text: read as structures, it is a name.
  JobFacts named = failed_77();
  named.name = "x JobState=PENDING ExcNodeList=(null) Restarts=1";
  named.restart_count = 1;
  slurm_.jobs = {{77, named}};
  loop_.post([this] { requeue_->open(); });
  wait_for_no_held(dir_ / "requeue-held.json");
  EXPECT_EQ(slurm_.calls(), std::vector<std::string>{"load_job 77"}) << "FAILED, not pending";

  testing::write_file(dir_ / "requeue-held.json",
                      R"({"77": {"exclusions": "gpu-a017", "restarts": 0}})");
  JobFacts again = failed_77();
  again.state = "PENDING";
  again.restart_count = 2;  // requeued once more by someone else since our hold
  again.excluded_nodes = "gpu-a017";
  slurm_.jobs = {{77, again}};
  loop_.post([this] { requeue_->open(); });
  wait_for_no_held(dir_ / "requeue-held.json");
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("release"), std::string::npos) << call;
}

TEST_F(JobRequeueTest, AnArrayTaskIsRequeuedAloneUnderItsOwnName) {
  JobFacts task = failed_77();
  task.array_job_id = 70;
  task.array_task_id = 7;
  slurm_.jobs = {{77, task}};
  AnalysedJob a = xid_job(true);
  a.facts = task;
  const JobRequeue::Result r = run(std::move(a));
  EXPECT_TRUE(r.requeued) << r.reason;
  const std::vector<std::string> calls = slurm_.calls();
  ASSERT_EQ(calls.size(), 6u);
  EXPECT_EQ(calls[1], "sacct -n -X -P -j 70_7 -o AdminComment");
  EXPECT_EQ(calls[2].rfind("sacctmgr -i modify job where jobid=70_7 set AdminComment=", 0), 0u)
      << calls[2];
  EXPECT_EQ(calls[3], "scontrol requeuehold 70_7");
  EXPECT_EQ(calls[4], "scontrol update JobId=70_7 ExcNodeList=gpu-a017");
  EXPECT_EQ(calls[5], "scontrol release 70_7");
}

// Issue 30, case 5: the hang path (or Slurm, or the user) requeued the job after the analysed
// attempt ended and it runs again; a requeuehold now would kill the healthy new attempt.
TEST_F(JobRequeueTest, AJobRequeuedSinceTheAnalysisIsLeftAloneAndTheReportSaysWhy) {
  JobFacts running = failed_77();
  running.state = "RUNNING";
  running.restart_count = 1;
  running.start_time = 1600;
  slurm_.jobs = {{77, running}};
  const JobRequeue::Result r = run(xid_job(true));
  EXPECT_FALSE(r.requeued);
  EXPECT_EQ(r.outcome, RequeueOutcome::kRefuse);
  EXPECT_EQ(r.code, "attempt-changed");
  const nlohmann::json note = report_pass_evidence().at("requeue");
  EXPECT_EQ(note.at("outcome"), "refused");
  EXPECT_NE(note.at("reason").get<std::string>().find("requeued since"), std::string::npos)
      << note.dump();
  EXPECT_EQ(slurm_.calls(), std::vector<std::string>{"load_job 77"})
      << "no hold, and no summary on the new attempt's accounting record";
}

TEST_F(JobRequeueTest, AnotherStartTimeWithTheSameRestartCountIsRefusedToo) {
  JobFacts other = failed_77();
  other.start_time = 1300;
  slurm_.jobs = {{77, other}};
  const JobRequeue::Result r = run(xid_job(true));
  EXPECT_EQ(r.code, "attempt-changed") << r.reason;
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("requeuehold"), std::string::npos) << call;
}

TEST_F(JobRequeueTest, AnArrayRecordWithoutATaskIdIsNeverActedOn) {
  JobFacts meta = failed_77();
  meta.array_job_id = 77;  // the task id is missing: its bare id is the whole array
  slurm_.jobs = {{77, meta}};
  AnalysedJob a = xid_job(true);
  a.facts.array_job_id = 77;
  const JobRequeue::Result r = run(std::move(a));
  EXPECT_EQ(r.code, "job-unnamed") << r.reason;
  EXPECT_NE(r.reason.find("whole array"), std::string::npos) << r.reason;
  for (int i = 0; i < 50 && slurm_.calls().size() < 2; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(slurm_.calls(), std::vector<std::string>{"load_job 77"})
      << "neither a hold nor a summary for a job that cannot be named";
}

// Issue 30, case 6: `scontrol -o show job` text put the job name first, and a name holding
// " Restarts=0" reset the count. The record is read as structures now; the name is only a name.
TEST_F(JobRequeueTest, AJobNameFullOfKeyValueTextChangesNothing) {
  JobFacts spoof = failed_77();
  spoof.name = "spoof Restarts=0 JobState=PENDING ExcNodeList=(null) BatchFlag=1";
  spoof.restart_count = 1;  // already requeued once, of the one --triage-requeue=1 allows
  spoof.excluded_nodes = "gpu-b001";
  slurm_.jobs = {{77, spoof}};
  AnalysedJob a = xid_job(true);
  a.facts = spoof;
  const JobRequeue::Result r = run(std::move(a));
  EXPECT_EQ(r.outcome, RequeueOutcome::kDecline) << r.reason;
  EXPECT_NE(r.reason.find("already requeued 1 time(s)"), std::string::npos) << r.reason;
  for (const std::string& call : slurm_.calls())
    EXPECT_EQ(call.find("requeuehold"), std::string::npos) << call;
}

}  // namespace
}  // namespace triage::agent
