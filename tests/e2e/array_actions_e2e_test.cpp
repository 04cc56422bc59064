// Issue 30, cases 1, 5 and 6 on a real two-node Slurm with accounting: the agent's actions hit
// exactly the job attempt they mean. Slurm reads a bare id that equals an ArrayJobId as the whole
// array, so the task whose JobId is its ArrayJobId is the one every case below makes misbehave:
//   - an array whose one task stops stepping under --triage-on-hang=cancel: only that task is
//     cancelled and commented, the others complete;
//   - a --triage-requeue array task that fails on a node with an Xid 79 is requeued alone;
//   - a job named like `scontrol -o show job` fields is requeued at most once under
//     --triage-requeue=1, however its name reads.
// All jobs are submitted at once (4 cores in all: the scheduler starts what fits) so that their
// waits overlap; HangStallMin is 20 s, as in live_e2e.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <thread>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

using std::chrono::seconds;
using Fields = std::map<std::string, std::string>;

ClusterEnvironment* g_env = nullptr;

constexpr int kStallMinSeconds = 20;

constexpr const char* kXid79 =
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.";

// Case 1: the task whose JobId is the array's id prints 10 steps and goes silent; the others step
// for 100 s (past the cancel, at most 2 thresholds after the silence) and complete.
const std::string kOneTaskHangs = "if [ \"$SLURM_JOB_ID\" = \"$SLURM_ARRAY_JOB_ID\" ]; then\n" +
                                  steps_then(10, "sleep 600") + "\nfi\n" +
                                  steps_then(100, "echo 'training done'");

// Case 5: the task whose JobId is the array's id dies of a CUDA error on its first attempt, once
// the test has put an Xid 79 on its node and touched go-<task>; the other task steps until its
// own go-<task> and completes. Every later attempt completes.
constexpr const char* kOneTaskFailsOnce =
    "step() { echo \"0: [$(now)] completed step: $1, seconds: 0.100, loss: 9.1\"; }\n"
    "for i in 1 2 3 4; do step $i; sleep 0.1; done\n"
    "if [ \"${SLURM_RESTART_COUNT:-0}\" = 0 ]; then\n"
    "  while [ ! -e go-$SLURM_ARRAY_TASK_ID ]; do sleep 0.2; done\n"
    "  if [ \"$SLURM_JOB_ID\" = \"$SLURM_ARRAY_JOB_ID\" ]; then\n"
    "    echo 'RuntimeError: CUDA error: unspecified launch failure'; exit 1\n"
    "  fi\n"
    "fi\n"
    "echo 'training done'\n";

// Case 6: each attempt waits for go-<restart count>, then dies of a CUDA error (the test puts an
// Xid 79 on its node first): a platform failure every time.
constexpr const char* kFailsEveryAttempt =
    "#!/bin/bash\n"
    "now() { date '+%Y-%m-%d %H:%M:%S'; }\n"
    "for i in 1 2 3 4; do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done\n"
    "while [ ! -e go-${SLURM_RESTART_COUNT:-0} ]; do sleep 0.2; done\n"
    "echo 'RuntimeError: CUDA error: unspecified launch failure'\n"
    "exit 1\n";

// What `scontrol -o show job` once let a job name claim (the parser took the first " Key=").
constexpr const char* kSpoofName = "spoof Restarts=0 JobState=PENDING ExcNodeList=(null)";

std::string task_spec(uint32_t array_id, int task) {
  return std::to_string(array_id) + "_" + std::to_string(task);
}

bool running(const Fields& j) {
  return job_field(j, "JobState") == "RUNNING";
}

bool ended(const Fields& j) {
  const std::string st = job_field(j, "JobState");
  return !st.empty() && st != "PENDING" && st != "RUNNING" && st != "COMPLETING" &&
         st != "REQUEUED" && st != "SUSPENDED";
}

// A requeued job may start only after Slurm's credential window (120 s by default); its start is
// moved to now once it is pending again and released, as an admin could (requeue_e2e does too).
void nudge_when_released(const SlurmCluster& c, const std::string& spec) {
  const Fields j = c.job(spec);
  if (job_field(j, "JobState") == "PENDING" && job_field(j, "Reason") != "JobHeldUser" &&
      job_field(j, "Reason") != "JobHeldAdmin") {
    (void)c.as_root({"scontrol", "update", "JobId=" + spec, "StartTime=now"});
  }
}

struct Jobs {
  LayoutJob hang;     // case 1: --array=0-2 --triage-on-hang=cancel
  LayoutJob requeue;  // case 5: --array=0-1 --triage-requeue=1
  std::string spoof_dir;
  uint32_t spoof = 0;  // case 6
};

// Submitted once, by whichever test runs first.
const Jobs& jobs(const SlurmCluster& c) {
  static const Jobs j = [&c] {
    Jobs out;
    out.hang = submit_layout_job(c, "array-hang", "hang", kOneTaskHangs,
                                 {"--array=0-2", "-t", "30", "--triage-on-hang=cancel"});
    out.spoof_dir = c.make_job_dir("spoof");
    std::ofstream(out.spoof_dir + "/job.sh") << kFailsEveryAttempt;
    out.spoof = c.sbatch(out.spoof_dir, {"-J", kSpoofName, "-o", "out-%j.log", "-N", "1",
                                         "--triage-requeue=1", "job.sh"});
    out.requeue = submit_layout_job(c, "array-requeue", "requeue", kOneTaskFailsOnce,
                                    {"--array=0-1", "-N", "1", "--triage-requeue=1"});
    return out;
  }();
  return j;
}

// The index of the array's task whose JobId is the ArrayJobId (the one a bare id widens from),
// once every task of it runs.
int task_with_the_arrays_id(const SlurmCluster& c, uint32_t array_id, int tasks) {
  int found = -1;
  const bool all_running = within(seconds(120), [&] {
    found = -1;
    for (int t = 0; t < tasks; ++t) {
      const Fields f = c.job(task_spec(array_id, t));
      if (!running(f)) return false;
      if (job_field(f, "JobId") == std::to_string(array_id)) found = t;
    }
    return found >= 0;
  });
  if (!all_running) throw std::runtime_error("array " + std::to_string(array_id) + " not running");
  return found;
}

TEST(ArrayActions, AHungArrayTaskIsCancelledAloneAndOnlyItIsCommented) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const uint32_t a = jobs(c).hang.id;
  const int hung = task_with_the_arrays_id(c, a, 3);
  // 10 s of steps, then at most two thresholds (no node fact backs a sleeping job) and the polls.
  const bool cancelled = within(seconds(10 + 2 * kStallMinSeconds + 60), [&] {
    return job_field(c.job(task_spec(a, hung)), "JobState") == "CANCELLED";
  });
  ASSERT_TRUE(cancelled) << job_field(c.job(task_spec(a, hung)), "JobState") << "\n" << c.logs();
  EXPECT_NE(job_field(c.job(task_spec(a, hung)), "AdminComment").find("triage=hang"),
            std::string::npos);
  for (int t = 0; t < 3; ++t) {
    if (t == hung) continue;
    const std::string spec = task_spec(a, t);
    EXPECT_TRUE(within(seconds(120), [&] { return ended(c.job(spec)); })) << spec;
    const Fields f = c.job(spec);
    EXPECT_EQ(job_field(f, "JobState"), "COMPLETED") << spec << " was still stepping\n" << c.logs();
    EXPECT_EQ(job_field(f, "AdminComment").find("triage=hang"), std::string::npos)
        << spec << ": " << job_field(f, "AdminComment");
  }
}

TEST(ArrayActions, AJobNamedLikeShowJobFieldsIsRequeuedAtMostOnce) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const Jobs& j = jobs(c);
  const std::string id = std::to_string(j.spoof);
  for (int attempt = 0; attempt < 2; ++attempt) {
    ASSERT_TRUE(within(seconds(150),
                       [&] {
                         nudge_when_released(c, id);
                         const Fields f = c.job(id);
                         return running(f) && job_field(f, "Restarts") == std::to_string(attempt);
                       }))
        << "attempt " << attempt << ": " << job_field(c.job(id), "JobState") << "\n"
        << c.logs();
    c.kernel_line(job_field(c.job(id), "BatchHost"), kXid79);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the agent's file poll
    std::ofstream(j.spoof_dir + "/go-" + std::to_string(attempt)) << "go\n";
  }
  // The second failure is declined (1 of --triage-requeue=1 used): the summary goes into the
  // latest accounting record after that decision, and nothing follows it.
  const bool summarised = within(seconds(120), [&] {
    return c.as_root({"sacct", "-X", "-n", "-P", "-j", id, "-o", "AdminComment"})
               .output.find("triage=") != std::string::npos;
  });
  EXPECT_TRUE(summarised) << c.logs();
  std::this_thread::sleep_for(seconds(5));
  const Fields f = c.job(id);
  // The harness reads `scontrol -o` text too; Slurm's own fields come after JobName and win.
  EXPECT_EQ(job_field(f, "Restarts"), "1") << c.logs();
  EXPECT_EQ(job_field(f, "JobState"), "FAILED");
}

TEST(ArrayActions, ARequeueEnabledArrayTaskIsRequeuedAlone) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob& job = jobs(c).requeue;
  const uint32_t a = job.id;
  const int failing = task_with_the_arrays_id(c, a, 2);
  const int healthy = 1 - failing;
  const std::string failing_spec = task_spec(a, failing);
  const std::string healthy_spec = task_spec(a, healthy);
  const std::string first = job_field(c.job(failing_spec), "BatchHost");
  c.kernel_line(first, kXid79);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // the agent's file poll
  std::ofstream(job.dir + "/go-" + std::to_string(failing)) << "go\n";

  // Requeued (restart 1), excluded from the Xid's node, while the healthy task still runs.
  ASSERT_TRUE(within(seconds(90), [&] {
    return job_field(c.job(failing_spec), "Restarts") == "1" &&
           job_field(c.job(failing_spec), "ExcNodeList").find(first) != std::string::npos;
  })) << c.logs();
  const Fields other = c.job(healthy_spec);
  EXPECT_EQ(job_field(other, "JobState"), "RUNNING") << "the other task is left alone";
  EXPECT_EQ(job_field(other, "Restarts"), "0");
  std::ofstream(job.dir + "/go-" + std::to_string(healthy)) << "go\n";

  EXPECT_TRUE(within(seconds(150), [&] {
    nudge_when_released(c, failing_spec);
    return ended(c.job(failing_spec)) && ended(c.job(healthy_spec));
  })) << c.logs();
  EXPECT_EQ(job_field(c.job(failing_spec), "JobState"), "COMPLETED");
  EXPECT_EQ(job_field(c.job(healthy_spec), "JobState"), "COMPLETED");
  EXPECT_EQ(job_field(c.job(healthy_spec), "Restarts"), "0");
  EXPECT_EQ(job_field(c.job(healthy_spec), "ExcNodeList"), "(null)");
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  if (!triage::testing::accounting_available()) {
    (void)std::fprintf(stderr,
                       "array_actions_e2e_tests: needs mariadb-server and slurmdbd "
                       "(scripts/install-deps installs them); skipped\n");
    return 77;
  }
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.plugin_more = "hang_action=allow requeue=allow";
  options.nodes = 2;
  options.accounting = true;
  options.agent_settings = {
      "HangStallMin=" + std::to_string(triage::testing::kStallMinSeconds) + "s",
      "EvidenceSettleDelay=1s", "PeerFetchTimeout=3s", "KernelSource=file",
      "KernelPath=@STATE@/kernel-@NODE@.log"};
  return triage::testing::run_with_cluster(argc, argv, "array_actions_e2e_tests", options,
                                           &triage::testing::g_env);
}
