// Live hang detection on a real Slurm (issue 15, "Done when"): the batch host's agent follows a
// running job's log as its owner and, when the steps stop, flags `hang (live)` while the job is
// still RUNNING, with the interim report in its directory and its AdminComment set; a job that
// asked for --triage-on-hang=cancel on a cluster whose plugstack allows it is then cancelled, and
// its final report says it was cancelled as hung, at which step, and what the cancel saved. A job
// that slows down but keeps stepping gets a running report with its pace warning, nothing more.
// HangStallMin is set low (20 s) so that the cluster's threshold is minutes shorter than a real
// one; everything else is the shipped path.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using std::chrono::seconds;

ClusterEnvironment* g_env = nullptr;

constexpr int kStallMinSeconds = 20;

// The cancel case's job, submitted once. The first test submits it too, so that both jobs go
// silent at the same time and the suite waits for one threshold instead of two.
const LayoutJob& asked_for_cancel(const SlurmCluster& c) {
  static const LayoutJob j = submit_layout_job(c, "live-cancel", "cancel-me", kStepsThenSleep,
                                               {"-t", "30", "--triage-on-hang=cancel"});
  return j;
}

TEST(Live, AJobWhoseStepsStopIsFlaggedHangLiveWhileRunning) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  (void)asked_for_cancel(c);
  const LayoutJob j =
      submit_layout_job(c, "live-hang", "stops-stepping", kStepsThenSleep, {"-t", "30"});
  c.wait_running(j.id);
  const auto running = std::chrono::steady_clock::now();
  // 30 s of steps, then the threshold, then at most 60 s to say it.
  const bool commented = within(seconds(30 + kStallMinSeconds + 60), [&] {
    return job_field(c.job(j.id), "AdminComment").find("triage=hang") != std::string::npos;
  });
  const auto job = c.job(j.id);
  ASSERT_TRUE(commented) << "AdminComment: " << job_field(job, "AdminComment") << "\n" << c.logs();
  EXPECT_EQ(job_field(job, "JobState"), "RUNNING");
  EXPECT_NE(job_field(job, "AdminComment").find(";step=30"), std::string::npos)
      << job_field(job, "AdminComment");
  const double after_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - running).count();
  EXPECT_LT(after_s, 30 + kStallMinSeconds + 60);

  // The interim report, written as the owner into the job's directory.
  ASSERT_TRUE(within(seconds(30), [&] { return fs::exists(j.job_dir() / "triage.json"); }))
      << c.logs();
  expect_users_regular_file(c, j.job_dir() / "triage.md");
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r["status"], "hanging");
  EXPECT_EQ(r["live"], true);
  EXPECT_TRUE(r["flagged_at"].is_string()) << r.dump();
  EXPECT_EQ(r["live_record"]["step"], 30);
  EXPECT_NE(slurp(j.job_dir() / "triage.md").find("**Status:** hang (live)"), std::string::npos);
  EXPECT_EQ(job_field(c.job(j.id), "JobState"), "RUNNING") << "notify leaves the job running";
  (void)c.as_root({"scancel", std::to_string(j.id)});
  c.wait_job(j.id);
}

TEST(Live, AJobThatAskedForCancelIsCancelledAndItsReportSaysSo) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob& j = asked_for_cancel(c);
  c.wait_running(j.id);
  // No node fact corroborates a sleeping job: the cancel waits for twice the threshold.
  const std::string state = c.wait_job(j.id, seconds(30 + 2 * kStallMinSeconds + 90));
  EXPECT_EQ(state, "CANCELLED") << c.logs();
  wait_for_analysis(c, j.id);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r["status"], "cancelled");
  EXPECT_EQ(r["live"], false);
  EXPECT_NE(
      r["status_reason"].get<std::string>().find("cancelled as hung by slurm-triage at step 30"),
      std::string::npos)
      << r["status_reason"];
  const json& live = r["live_record"];
  EXPECT_EQ(live["action"], "cancel");
  EXPECT_EQ(live["step"], 30);
  ASSERT_TRUE(live["hours_saved"].is_number()) << live.dump();
  EXPECT_GT(live["hours_saved"].get<double>(), 0.3);  // of a 30-minute limit, cancelled in ~2
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("cancelled as hung by slurm-triage"), std::string::npos) << md;
  EXPECT_NE(md.find("of its time limit unused"), std::string::npos) << md;
}

// Issue 28 part 4 on a real Slurm: a job that keeps stepping but 30% slower from step 220 on is
// warned about in a report written into its directory while it runs (status running, the warning
// among the first lines), and is neither flagged nor cancelled, although it asked for cancel.
TEST(Live, AJobThatSlowsDownIsWarnedInARunningReportAndLeftAlone) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string body =
      "for i in $(seq 1 400); do s=1.000; if [ $i -gt 220 ]; then s=1.300; fi; "
      "echo \"0: completed step: $i, seconds: $s, loss: 9.1\"; sleep 0.02; done\n"
      "for i in $(seq 401 1000); do echo \"0: completed step: $i, seconds: 1.300, loss: 9.1\"; "
      "sleep 1; done\n";
  const LayoutJob j = submit_layout_job(c, "live-pace", "slows-down", body,
                                        {"-t", "30", "--triage-on-hang=cancel"});
  c.wait_running(j.id);
  json r;
  const bool warned = within(seconds(90), [&] {
    if (!fs::exists(j.job_dir() / "triage.json")) return false;
    try {
      r = json::parse(slurp(j.job_dir() / "triage.json"));
    } catch (const json::exception&) {
      return false;  // never half-written (temp + rename), but a parse error must not end the wait
    }
    return !r["live_record"].value("pace_warning", std::string()).empty();
  });
  ASSERT_TRUE(warned) << r.dump(1) << "\n" << c.logs();
  EXPECT_EQ(r["status"], "running");
  EXPECT_EQ(r["live"], false);
  EXPECT_TRUE(r["flagged_at"].is_null()) << r.dump();
  const std::string warning = r["live_record"]["pace_warning"].get<std::string>();
  const std::string slowdown = "slowdown: step time 1 s -> 1.3 s since step ";
  const size_t since = warning.find(slowdown);
  ASSERT_NE(since, std::string::npos) << warning;
  const int step = std::stoi(warning.substr(since + slowdown.size()));
  EXPECT_GE(step, 215) << warning;  // the slow steps begin at 221; a window may round it
  EXPECT_LE(step, 230) << warning;
  expect_users_regular_file(c, j.job_dir() / "triage.md");
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("**Warning:** Pace (live): slowdown"), std::string::npos) << md;
  EXPECT_NE(md.find("**Status:** running"), std::string::npos) << md;
  const auto job = c.job(j.id);
  EXPECT_EQ(job_field(job, "JobState"), "RUNNING") << "a slowdown is never cancelled";
  EXPECT_EQ(job_field(job, "AdminComment").find("triage=hang"), std::string::npos)
      << job_field(job, "AdminComment");
  (void)c.as_root({"scancel", std::to_string(j.id)});
  c.wait_job(j.id);
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.plugin_args =
      "socket=@TRIAGE@/run/agent.sock inbox=@TRIAGE@/spool/inbox hang_action=allow";
  options.agent_settings = {
      "HangStallMin=" + std::to_string(triage::testing::kStallMinSeconds) + "s",
      "EvidenceSettleDelay=1s"};
  return triage::testing::run_with_cluster(argc, argv, "live_e2e_tests", options,
                                           &triage::testing::g_env);
}
