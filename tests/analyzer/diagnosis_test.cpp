// Decisions: status, the primary failure among several, and what node evidence changes.
#include "analyzer/diagnosis.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "test_support.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = 1795255200;  // 2026-11-21 10:00:00 UTC
constexpr int64_t kHour = 3600;

std::string stamped_steps(int first, int last, int64_t start, double step = 10.0) {
  std::string s;
  for (int i = first; i <= last; ++i) {
    const auto t = static_cast<int64_t>(static_cast<double>(start) + step * (i - first));
    const time_t tt = t;
    struct tm tm {};
    gmtime_r(&tt, &tm);
    char buf[64];
    (void)std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    s += "0: [" + std::string(buf) + "] completed step: " + std::to_string(i) +
         ", seconds: 10.000\n";
  }
  return s;
}

struct Diagnosed {
  ScanResult scan;
  Triage t;
};

Diagnosed diagnose_text(const std::string& log, const std::string& slurm_state, int64_t now_s,
                        const Evidence* ev = nullptr) {
  Diagnosed r;
  r.scan = test::scan_text(log);
  DiagnosisInput in;
  in.catalog = &test::shipped_catalog();
  in.scan = &r.scan;
  in.evidence = ev;
  in.slurm_state = slurm_state;
  in.slurm_state_source = "option";
  in.now_usec = now_s * kSec;
  in.log_path = "job.log";
  r.t = diagnose(in);
  return r;
}

TEST(Diagnosis, AnXlaCompileFailureAtTheEndOfATracebackIsTheCauseNotTheTraceback) {
  const Diagnosed r = diagnose_text(
      "0: Traceback (most recent call last):\n"
      "0:   File \"train.py\", line 1, in <module>\n"
      "0: jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to compile: HloModule jit_step\n"
      "Training subprocess exited with code 1\n",
      "FAILED", kT0);
  EXPECT_EQ(r.t.primary_failure, "xla-compile-fail");
  ASSERT_GE(r.t.additional.size(), 2u);
  for (const auto& a : r.t.additional)
    EXPECT_EQ(a.relation, "consequence of xla-compile-fail") << a.cls;
}

TEST(Diagnosis, TheEarliestRealErrorWinsOverItsConsequences) {
  const Diagnosed r =
      diagnose_text(stamped_steps(0, 20, kT0) +
                        "0: gpu-a017:1:1 [0] NCCL WARN Timeout waiting for peer\n"
                        "2: Traceback (most recent call last):\n"
                        "2: RuntimeError: NCCL communicator was aborted on rank 2\n"
                        "0: The following tasks are unhealthy (stopped sending heartbeats):\n",
                    "FAILED", kT0 + 400);
  EXPECT_EQ(r.t.primary_failure, "nccl-timeout");
}

TEST(Diagnosis, ACompletedJobHasNoPrimaryFailureEvenWithErrorsInItsLog) {
  const Diagnosed r =
      diagnose_text(stamped_steps(0, 9, kT0) +
                        "0: Traceback (most recent call last):\n0: KeyError: 'retry'\n"
                        " JOB SUMMARY\n Status: SUCCESS (exit 0)\n",
                    "", kT0 + 1000);
  EXPECT_EQ(r.t.status, kStatusCompleted);
  EXPECT_TRUE(r.t.primary_failure.empty());
  ASSERT_EQ(r.t.additional.size(), 1u);
  EXPECT_EQ(r.t.additional[0].cls, "python-exception");
  EXPECT_EQ(exit_code_for(r.t), 0);
}

TEST(Diagnosis, SlurmRunningWithRecentStepsIsRunningAndWithOldStepsIsHanging) {
  const std::string log = stamped_steps(0, 100, kT0);
  const int64_t last = kT0 + 1000;
  EXPECT_EQ(diagnose_text(log, "RUNNING", last + 60).t.status, kStatusRunning);
  const Diagnosed hung = diagnose_text(log, "RUNNING", last + 4 * kHour);
  EXPECT_EQ(hung.t.status, kStatusHanging);
  EXPECT_EQ(hung.t.primary_failure, "hang");
  EXPECT_EQ(hung.t.progress.expected_step, 100 + 4 * 360);
  EXPECT_EQ(exit_code_for(hung.t), 1);
}

TEST(Diagnosis, ATimeLimitAfterAStallIsAHangAndWithoutOneIsTheTimeLimit) {
  const int64_t last = kT0 + 1000;
  const Diagnosed stalled = diagnose_text(stamped_steps(0, 100, kT0), "TIMEOUT", last + 3 * kHour);
  EXPECT_EQ(stalled.t.status, kStatusCancelled);
  EXPECT_EQ(stalled.t.primary_failure, "time-limit")
      << "no end time known: the reference is unknown";
  Evidence ev;
  ev.job.state = "TIMEOUT";
  ev.job.end_time = last + 3 * kHour;
  const Diagnosed with_end =
      diagnose_text(stamped_steps(0, 100, kT0), "TIMEOUT", last + 5 * kHour, &ev);
  EXPECT_EQ(with_end.t.primary_failure, "hang");
  ev.job.end_time = last + 30;
  const Diagnosed busy =
      diagnose_text(stamped_steps(0, 100, kT0), "TIMEOUT", last + 5 * kHour, &ev);
  EXPECT_EQ(busy.t.primary_failure, "time-limit");
}

TEST(Diagnosis, NoSummaryNoStepsAndAnEndedJobIsAnUnknownDeath) {
  const Diagnosed r = diagnose_text(
      stamped_steps(0, 50, kT0) + "0: [2026-11-21 10:08:31] completed st", "ENDED", kT0 + 86400);
  EXPECT_EQ(r.t.status, kStatusUnknown);
  EXPECT_EQ(r.t.primary_failure, "unknown-death");
  EXPECT_FALSE(r.t.last_lines.empty());
  bool cut_note = false;
  for (const auto& n : r.t.notes)
    cut_note = cut_note || n.find("middle of a line") != std::string::npos;
  EXPECT_TRUE(cut_note);
}

Evidence oom_evidence(bool rank_killed) {
  Evidence ev;
  ev.job.job_id = 77;
  ev.job.state = "FAILED";
  NodeEvidence n;
  n.host = "gpu-a019";
  TaskExit t;
  t.host = n.host;
  t.rank = 2;
  t.pid = 4242;
  t.wait_status = rank_killed ? 9 : 0;
  t.decode();
  n.tasks.push_back(t);
  KernelEvent e;
  e.kind = "oom-kill";
  e.severity = Severity::kCritical;
  e.host = n.host;
  e.pid = rank_killed ? 4242 : 999;
  e.task = rank_killed ? "python3" : "pt_data_worker";
  e.time_usec = (kT0 + 500) * kSec;
  e.lines = {"Memory cgroup out of memory: Killed process 4242 (python3)"};
  n.events.push_back(e);
  ev.nodes.push_back(n);
  NodeEvidence gone;
  gone.host = "gpu-a020";
  gone.reachable = false;
  gone.error = "connection refused";
  ev.nodes.push_back(gone);
  return ev;
}

TEST(Diagnosis, ARankKilledOnANodeWhoseKernelOomKilledItIsOomHostEvenIfTheLogIsSilent) {
  const Evidence ev = oom_evidence(true);
  const Diagnosed r = diagnose_text(
      stamped_steps(0, 40, kT0) + "0: Traceback (most recent call last):\n0: OSError: x\n",
      "FAILED", kT0 + 86400, &ev);
  EXPECT_EQ(r.t.primary_failure, "oom-host");
  ASSERT_FALSE(r.t.evidence.empty());
  EXPECT_TRUE(r.t.evidence.front().trusted);
  EXPECT_EQ(r.t.evidence.front().source, "kernel:gpu-a019");
  EXPECT_EQ(r.t.evidence.front().text,
            "Memory cgroup out of memory: Killed process 4242 (python3)");
  ASSERT_EQ(r.t.nodes.size(), 2u);
  EXPECT_EQ(r.t.nodes[0].exit, "SIGKILL");
  EXPECT_FALSE(r.t.nodes[1].reachable);
  bool named = false;
  for (const auto& rec : r.t.recommendations)
    named = named || rec.find("gpu-a020 did not answer") != std::string::npos;
  EXPECT_TRUE(named);
}

// The kernel's whole OOM report arrives as one event; the line worth quoting is the one with the
// victim's pid and the job's cgroup, not the header naming whoever happened to ask for memory.
TEST(Diagnosis, AWholeKernelOomReportIsQuotedByTheLineThatNamesTheKilledRank) {
  Evidence ev = oom_evidence(true);
  ev.nodes[0].events[0].lines = {
      "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
      "CPU: 12 PID: 42420 Comm: python3 Not tainted 5.15.0-91-generic #101-Ubuntu",
      "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
      "oom_memcg=/system.slice/slurmstepd.scope/job_77,task_memcg=/system.slice/"
      "slurmstepd.scope/job_77/step_0/user/task_0,task=python3,pid=4242,uid=1000",
      "Memory cgroup out of memory: Killed process 4242 (python3) total-vm:94121212kB"};
  const Diagnosed r = diagnose_text(stamped_steps(0, 40, kT0), "FAILED", kT0 + 86400, &ev);
  EXPECT_EQ(r.t.primary_failure, "oom-host");
  ASSERT_FALSE(r.t.evidence.empty());
  EXPECT_EQ(r.t.evidence.front().text.rfind("oom-kill:constraint=CONSTRAINT_MEMCG", 0), 0u)
      << r.t.evidence.front().text;
}

// Issue 27 through the whole diagnosis: many NCCL lines in the log, and the agent of the second
// node saw its port go down during the job. The port event is shown among the evidence however
// many log lines there are, and makes the failure the platform's.
TEST(Diagnosis, APortDownOnOneNodeDuringAnNcclFailureIsShownAndBlamedOnThePlatform) {
  std::string log = stamped_steps(0, 20, kT0);
  for (int i = 0; i < 12; ++i)
    log +=
        "1: gpu-a018:4242:4300 [0] NCCL WARN Net : Call to recv from 10.0.0.2<4242> failed : "
        "Broken pipe\n";
  Evidence ev;
  ev.job.job_id = 78;
  ev.job.state = "FAILED";
  NodeEvidence n;
  n.host = "gpu-a018";
  KernelEvent e;
  e.kind = "ib-port-down";
  e.severity = Severity::kError;
  e.host = n.host;
  e.device = "mlx5_0/1";
  e.fields["port"] = "mlx5_0/1";
  e.summary = "port mlx5_0/1 was down for 6 s, then came back (state ACTIVE, phys_state LinkUp)";
  e.time_usec = (kT0 + 150) * kSec;
  e.lines = {"/sys/class/infiniband/mlx5_0/ports/1: down 6 s, now state ACTIVE"};
  n.events.push_back(e);
  ev.nodes.push_back(n);
  const Diagnosed r = diagnose_text(log, "FAILED", kT0 + 86400, &ev);
  EXPECT_EQ(r.t.primary_failure, "nccl-timeout");
  ASSERT_TRUE(r.t.blame);
  EXPECT_EQ(*r.t.blame, Blame::kPlatform);
  EXPECT_TRUE(r.t.blame_trusted);
  EXPECT_NE(r.t.blame_basis.find("port mlx5_0/1"), std::string::npos) << r.t.blame_basis;
  EXPECT_NE(r.t.blame_basis.find("gpu-a018"), std::string::npos) << r.t.blame_basis;
  EXPECT_TRUE(std::any_of(r.t.evidence.begin(), r.t.evidence.end(),
                          [](const Finding& f) { return f.source == "kernel:gpu-a018"; }));
}

TEST(Diagnosis, AnNcclFailureOfTwoNodesUnderOneLeafSwitchSaysSoAndAMovedJobSaysWhereFrom) {
  std::string log = stamped_steps(0, 20, kT0);
  log += "1: gpu-a018:4242:4300 [0] NCCL WARN Net : Call to recv from 10.0.0.2<4242> failed\n";
  Evidence ev;
  ev.job.job_id = 79;
  ev.job.state = "FAILED";
  for (const char* host : {"gpu-a017", "gpu-a018"}) {
    NodeEvidence n;
    n.host = host;
    n.leaf_switch = "leaf2";
    ev.nodes.push_back(n);
  }
  ev.moved.push_back({"gpu-a016", "triage preflight: port down: mlx5_0/1"});
  const Diagnosed r = diagnose_text(log, "FAILED", kT0 + 86400, &ev);
  EXPECT_EQ(r.t.primary_failure, "nccl-timeout");
  ASSERT_TRUE(r.t.shared_switch);
  EXPECT_EQ(r.t.shared_switch->leaf_switch, "leaf2");
  ASSERT_EQ(r.t.moved.size(), 1u);
  EXPECT_EQ(r.t.moved[0].node, "gpu-a016");
  // The same nodes under two switches: nothing to say.
  ev.nodes[1].leaf_switch = "leaf1";
  EXPECT_FALSE(diagnose_text(log, "FAILED", kT0 + 86400, &ev).t.shared_switch);
}

TEST(Diagnosis, AnOomKillThatSparedTheRanksIsEvidenceButDoesNotOverrideTheLog) {
  const std::string log =
      stamped_steps(0, 40, kT0) + "2: torch.OutOfMemoryError: HIP out of memory.\n";
  const Evidence helper = oom_evidence(false);
  EXPECT_EQ(diagnose_text(log, "FAILED", kT0 + 86400, &helper).t.primary_failure, "oom-gpu");
  const Evidence rank = oom_evidence(true);
  EXPECT_EQ(diagnose_text(log, "FAILED", kT0 + 86400, &rank).t.primary_failure, "oom-host");
}

TEST(Diagnosis, LogLinesNeverProveAHardwareFault) {
  // A user can print anything: a hardware-looking line in the log is the log's word (the
  // gpu-hardware-error class), never the trusted hardware-fault class.
  const Diagnosed r = diagnose_text(
      "0: uncorrectable ECC error encountered\nNODE_EXIT host=gpu-a019 exit=1\n", "FAILED", kT0);
  EXPECT_EQ(r.t.primary_failure, "gpu-hardware-error");
  for (const auto& a : r.t.additional)
    EXPECT_NE(a.cls, "hardware-fault");
  ASSERT_EQ(r.t.nodes.size(), 1u);
  EXPECT_TRUE(r.t.nodes[0].from_log);
  EXPECT_FALSE(r.t.nodes[0].from_agent);
  EXPECT_TRUE(r.t.nodes[0].verdict.empty());
}

TEST(Diagnosis, EveryNodeExitingWithSigtermIsACleanCancellation) {
  const Diagnosed r =
      diagnose_text(stamped_steps(0, 10, kT0) +
                        "slurmstepd: error: *** JOB 5 ON n1 CANCELLED AT 2026-11-21T10:01:50 ***\n"
                        "NODE_EXIT host=n1 exit=143\nNODE_EXIT host=n2 exit=143\n",
                    "", kT0 + 86400);
  EXPECT_EQ(r.t.status, kStatusCancelled);
  EXPECT_EQ(r.t.primary_failure, "cancelled");
  ASSERT_EQ(r.t.nodes.size(), 2u);
  EXPECT_NE(r.t.nodes[0].meaning.find("clean cancellation"), std::string::npos);
  for (const auto& a : r.t.additional)
    EXPECT_NE(a.cls, "node-fail");
}

TEST(Diagnosis, CancelledTasksEndedBySigkillAreNotSignalKills) {
  Evidence ev;
  ev.job.state = "CANCELLED";
  NodeEvidence n;
  n.host = "n1";
  TaskExit t;
  t.rank = 0;
  t.wait_status = 9;
  t.decode();
  n.tasks.push_back(t);
  ev.nodes.push_back(n);
  const Diagnosed r = diagnose_text(stamped_steps(0, 10, kT0), "CANCELLED", kT0 + 200, &ev);
  EXPECT_EQ(r.t.primary_failure, "cancelled");
}

TEST(Diagnosis, PlaceholdersInNextStepsAreFilled) {
  Triage t;
  t.job_id = 4242;
  t.job_dir = "/o/4242-x";
  EXPECT_EQ(fill_placeholders("scancel {job_id}; ls {job_dir}; less {log}", t),
            "scancel 4242; ls /o/4242-x; less <log>");
}

}  // namespace
}  // namespace triage
