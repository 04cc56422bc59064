// Issue 30, "Time as the job lived it" and "Attempts are separate", on a real Slurm: the batch
// host's agent follows jobs that print naive timestamps in a zone 8 h west or east of the node
// and never takes them for silent while they step; a job that always hangs and asked for
// --triage-on-hang=requeue --triage-requeue=1 is requeued once, its second attempt is followed
// afresh, flagged at its own step, not requeued again (Slurm's Restarts reached N: cancelled
// instead), and its final report is about that attempt. HangStallMin is 10 s so that a zone
// mistake would be flagged within seconds and the hung job's thresholds are short.
#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <iomanip>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

constexpr int kStallMinSeconds = 10;

// Whether the agent's log says `text` (the cluster's log directory, every daemon's file).
bool agent_log_says(const SlurmCluster& c, const std::string& text) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(c.state_dir() + "/log", ec)) {
    if (slurp(e.path()).find(text) != std::string::npos) return true;
  }
  return false;
}

// The agent's spool file of the job: its lifecycle messages, live records and analyses.
std::string spool_of(const SlurmCluster& c, uint32_t id) {
  return slurp(fs::path(c.inbox_dir()).parent_path() / "jobs" / (std::to_string(id) + ".jsonl"));
}

// The analysis summaries the agent wrote for the job, oldest first.
std::vector<json> analyses(const SlurmCluster& c, uint32_t id) {
  std::vector<json> out;
  std::istringstream lines(spool_of(c, id));
  for (std::string line; std::getline(lines, line);) {
    json j = json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("r", "") == "analysis") out.push_back(std::move(j));
  }
  return out;
}

// A step a second, stamped by `date` in the job's own zone (no zone in the stamp, as Python's
// logging prints it), for 10 minutes.
std::string steps_in_zone(const std::string& tz) {
  return "export TZ=" + tz +
         "\nfor i in $(seq 1 600); do echo \"0: [$(now)] completed step: $i, seconds: 1.000, "
         "loss: 9.1\"; sleep 1; done";
}

TEST(LiveTime, JobsStampingStepsEightHoursWestAndEastOfTheNodeAreNeverFlaggedWhileTheyStep) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob west =
      submit_layout_job(c, "tz-west", "west", steps_in_zone("America/Los_Angeles"), {"-t", "30"});
  const LayoutJob east =
      submit_layout_job(c, "tz-east", "east", steps_in_zone("Asia/Shanghai"), {"-t", "30"});
  // Cancelled whatever happens, so that the next test finds the node free.
  struct CancelAtEnd {
    const SlurmCluster& c;
    std::vector<uint32_t> ids;
    ~CancelAtEnd() {
      for (const uint32_t id : ids)
        (void)c.as_root({"scancel", std::to_string(id)});
    }
  } cancel_at_end{c, {west.id, east.id}};
  c.wait_running(west.id);
  c.wait_running(east.id);
  // Followed by the agent (else the rest proves nothing).
  ASSERT_TRUE(within(seconds(20), [&] {
    return agent_log_says(c, "job " + std::to_string(west.id) + ": following") &&
           agent_log_says(c, "job " + std::to_string(east.id) + ": following");
  })) << c.logs();
  // 30 s of steps: past the warm-up, several polls, three times the threshold.
  for (int s = 0; s < 30; ++s) {
    for (const LayoutJob* j : {&west, &east}) {
      const auto shown = c.job(j->id);
      ASSERT_EQ(job_field(shown, "AdminComment").find("triage=hang"), std::string::npos)
          << j->name << " flagged after " << s << " s: " << job_field(shown, "AdminComment") << "\n"
          << c.logs();
      ASSERT_EQ(job_field(shown, "JobState"), "RUNNING") << j->name << "\n" << c.logs();
    }
    std::this_thread::sleep_for(seconds(1));
  }
  for (const LayoutJob* j : {&west, &east}) {
    EXPECT_FALSE(fs::exists(j->job_dir() / "triage.json")) << j->name << ": an interim report";
    const std::string log = slurp(j->log());
    EXPECT_NE(log.find("completed step: 25,"), std::string::npos) << log;
  }
  // The stamps really are 8 h off the node's clock (UTC here): the west job's first step.
  const std::string log = slurp(west.log());
  const size_t at = log.find("0: [");
  ASSERT_NE(at, std::string::npos) << log;
  // "YYYY-MM-DD HH:MM:SS", read field by field (std::get_time reports a malformed stamp).
  std::tm printed{};
  std::istringstream stamp(log.substr(at + 4, 19));
  stamp >> std::get_time(&printed, "%Y-%m-%d %H:%M:%S");
  ASSERT_FALSE(stamp.fail()) << log.substr(at, 40);
  const std::time_t as_utc = timegm(&printed);
  EXPECT_GT(std::time(nullptr) - as_utc, 7 * 3600) << log.substr(at, 40);
  for (const LayoutJob* j : {&west, &east}) {
    (void)c.as_root({"scancel", std::to_string(j->id)});
    c.wait_job(j->id);
  }
}

// The first attempt prints 8 steps, the second 12; each then hangs.
constexpr const char* kAlwaysHangs =
    "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then n=8; else n=12; fi\n"
    "for i in $(seq 1 $n); do echo \"0: [$(now)] completed step: $i, seconds: 1.000, loss: "
    "9.1\"; sleep 1; done\n"
    "sleep 600\n";

TEST(LiveAttempts, ARequeuedAttemptIsFollowedFlaggedAndReportedAsItselfAndNotRequeuedAgain) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(
      c, "always-hangs", "hangs", kAlwaysHangs,
      {"-t", "30", "--requeue", "--triage-on-hang=requeue", "--triage-requeue=1"});
  c.wait_running(j.id);
  // Attempt 1: 8 steps, then no node fact, so the requeue waits for twice the threshold.
  ASSERT_TRUE(within(seconds(8 + 2 * kStallMinSeconds + 45), [&] {
    return job_field(c.job(j.id), "Restarts") == "1";
  })) << c.logs();
  // Its final report is written before the next attempt starts (which truncates the log).
  ASSERT_TRUE(within(seconds(60), [&] { return !analyses(c, j.id).empty(); })) << c.logs();
  const json first = json::parse(slurp(j.job_dir() / "triage.json"), nullptr, false);
  const json first_live = first.is_object() ? first.value("live_record", json()) : json();
  ASSERT_TRUE(first_live.is_object()) << first.dump(1) << "\n" << spool_of(c, j.id) << c.logs();
  EXPECT_EQ(first_live.value("action", ""), "requeue") << first.dump(1);
  EXPECT_EQ(first_live.value("step", -1), 8);
  EXPECT_EQ(analyses(c, j.id).front().value("restart_count", -1), 0);

  // Slurm holds a requeued job back for its credential window; start it now, as an admin could.
  ASSERT_TRUE(within(seconds(30), [&] {
    return job_field(c.job(j.id), "JobState") == "PENDING" &&
           c.as_root({"scontrol", "update", "JobId=" + std::to_string(j.id), "StartTime=now"}).ok();
  })) << c.logs();
  c.wait_running(j.id, seconds(60));
  // Attempt 2: 12 steps, then silent; flagged as itself (not the first attempt's record, which
  // would never flag it again), and with the one requeue used up, cancelled instead.
  ASSERT_TRUE(within(seconds(12 + 2 * kStallMinSeconds + 60),
                     [&] { return job_field(c.job(j.id), "JobState") == "CANCELLED"; }))
      << job_field(c.job(j.id), "JobState") << "\n"
      << spool_of(c, j.id) << c.logs();
  EXPECT_EQ(job_field(c.job(j.id), "Restarts"), "1") << "not requeued a second time";
  ASSERT_TRUE(within(seconds(60), [&] { return analyses(c, j.id).size() >= 2; })) << c.logs();
  EXPECT_EQ(analyses(c, j.id).back().value("restart_count", -1), 1);
  const json second = json::parse(slurp(j.job_dir() / "triage.json"), nullptr, false);
  const json live = second.is_object() ? second.value("live_record", json()) : json();
  ASSERT_TRUE(live.is_object()) << second.dump(1) << "\n" << spool_of(c, j.id) << c.logs();
  EXPECT_EQ(live.value("step", -1), 12) << second.dump(1);
  EXPECT_TRUE(second.value("flagged_at", json()).is_string());
  EXPECT_EQ(live.value("action", ""), "cancel");
  EXPECT_NE(live.value("action_reason", "")
                .find("requeue refused: Slurm shows the job requeued 1 time(s)"),
            std::string::npos)
      << live.value("action_reason", "");
  EXPECT_EQ(second.value("status", ""), "cancelled") << second.dump(1);
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.plugin_more = "hang_action=allow requeue=allow";
  options.agent_settings = {
      "HangStallMin=" + std::to_string(triage::testing::kStallMinSeconds) + "s",
      "EvidenceSettleDelay=1s"};
  return triage::testing::run_with_cluster(argc, argv, "live_attempts_e2e_tests", options,
                                           &triage::testing::g_env);
}
