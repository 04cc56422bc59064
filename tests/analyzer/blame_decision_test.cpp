// The blame stage alone: whose fault a failure was, from the class's default and trusted node
// evidence.
#include "analyzer/blame_decision.h"

#include <gtest/gtest.h>

#include "common/rules_file.h"
#include "test_support.h"

namespace triage {
namespace {

const SignatureCatalog& cat() {
  return test::shipped_catalog();
}

Triage failed_with(const char* cls, const char* title) {
  Triage t;
  t.status = kStatusFailed;
  t.primary_failure = cls;
  t.primary_title = title;
  return t;
}

Finding log_line(int64_t line, const char* text) {
  Finding f;
  f.line = line;
  f.text = text;
  return f;
}

Finding kernel_oom(const char* host, const char* constraint) {
  Finding f;
  f.cls = "oom-host";
  f.source = std::string("kernel:") + host;
  f.host = host;
  f.text = "Memory cgroup out of memory: Killed process 777 (python3)";
  f.trusted = true;
  f.captures = {{"kind", "oom-kill"}, {"constraint", constraint}};
  return f;
}

NodeRow node(const char* host, const char* verdict, const char* reason, bool from_agent = true) {
  NodeRow n;
  n.host = host;
  n.verdict = verdict;
  n.verdict_reasons = {reason};
  n.from_agent = from_agent;
  return n;
}

TEST(DecideBlame, AJobThatCompletedOrRunsBlamesNobody) {
  Triage t;
  t.status = kStatusCompleted;
  EXPECT_FALSE(decide_blame(t, cat()).blame);
  t.status = kStatusRunning;
  EXPECT_FALSE(decide_blame(t, cat()).blame);
  EXPECT_EQ(blame_summary(t, decide_blame(t, cat())), "");
}

// The exception line that ends a traceback, with the file of its innermost frame.
Finding raised(int64_t line, const char* text, const std::string& file) {
  Finding f = log_line(line, text);
  f.traceback_line = 200;
  f.captures.emplace_back("raised-in", file);
  return f;
}

TEST(DecideBlame, AnExceptionRaisedInTheJobsOwnScriptIsTheUsersCode) {
  Triage t = failed_with("python-exception", "Unhandled Python exception");
  t.evidence = {log_line(200, "Traceback (most recent call last):"),
                raised(212, "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
                       "/home/alice/run/train.py")};
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kUserCode);
  EXPECT_FALSE(v.trusted);
  EXPECT_EQ(v.basis,
            "log line 212, raised in /home/alice/run/train.py (the job's own code): TypeError: "
            "unsupported operand type(s) for +: 'int' and 'str'");
  EXPECT_EQ(blame_summary(t, v),
            "Your code: TypeError: unsupported operand type(s) for +: 'int' and 'str'.");
}

// A package raises the same error for a wrong argument, bad data or its own bug: no party. So does
// a package's own exception type under the job's frame (its compiled code raised it), a traceback
// that shows no frame, a line after the traceback that is a logger's word rather than an
// exception type, and a bare interrupt (it came from outside the frame it was raised in).
TEST(DecideBlame, AnExceptionRaisedInsideAPackageNamesNoParty) {
  const std::vector<Finding> cases = {
      raised(212, "RuntimeError: shape '[4, -1]' is invalid for input of size 6",
             "/opt/venv/lib/python3.11/site-packages/torch/nn/functional.py"),
      raised(212, "KeyError: 'input_ids'", "/usr/lib/python3/dist-packages/datasets/arrow.py"),
      raised(212, "RuntimeError: PytorchStreamReader failed reading zip archive",
             "C:\\Users\\simon\\anaconda3\\envs\\ldm\\lib\\site-packages\\torch\\serialization.py"),
      raised(212, "ValueError: not enough values to unpack", "<frozen runpy>"),
      raised(212, "safetensors_rust.SafetensorError: Error while deserializing header",
             "/home/alice/run/load.py"),
      log_line(212, "TypeError: unsupported operand type(s) for +: 'int' and 'str'"),
      raised(212, "ERROR: training failed, see above", "/home/alice/run/train.py"),
      raised(212, "KeyboardInterrupt", "/home/alice/run/train.py"),
  };
  for (const Finding& f : cases) {
    Triage t = failed_with("python-exception", "Unhandled Python exception");
    t.evidence = {log_line(200, "Traceback (most recent call last):"), f};
    const BlameVerdict v = decide_blame(t, cat());
    ASSERT_TRUE(v.blame);
    EXPECT_EQ(*v.blame, Blame::kUnknown) << f.text;
    EXPECT_EQ(blame_summary(t, v).rfind("Whose fault is not clear: ", 0), 0u) << f.text;
  }
}

// The class's `blame-when`: a missing file is a path the job was given (a data or config path).
// A hub file that is not in the cache while the Hub cannot be reached is not the model name's
// fault, as model-not-found's default says: the token's own vocabulary entry says unknown.
TEST(DecideBlame, TheVocabularyEntryThatNamedTheFailureGivesItsBlame) {
  Triage t = failed_with("model-not-found", "Model config not found");
  ASSERT_EQ(cat().find("model-not-found")->blame, Blame::kUserConfig);
  Finding f = log_line(12,
                       "huggingface_hub.errors.LocalEntryNotFoundError: An error happened while "
                       "trying to locate the file on the Hub");
  f.cls = "model-not-found";
  f.vocabulary = "huggingface.LocalEntryNotFoundError";
  t.evidence.push_back(f);
  EXPECT_EQ(decide_blame(t, cat()).blame, Blame::kUnknown);
  // The same class found by a pattern keeps the class's default.
  t.evidence.front().vocabulary.clear();
  EXPECT_EQ(decide_blame(t, cat()).blame, Blame::kUserConfig);
}

TEST(DecideBlame, AFileNotFoundErrorIsAPathTheJobWasGiven) {
  Triage t = failed_with("python-exception", "Unhandled Python exception");
  t.evidence = {log_line(200, "Traceback (most recent call last):"),
                log_line(212, "FileNotFoundError: [Errno 2] No such file or directory: 'x.bin'")};
  t.evidence.back().traceback_line = 200;
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kUserConfig);
  EXPECT_FALSE(v.trusted);
  EXPECT_EQ(v.basis,
            "log line 212: FileNotFoundError: [Errno 2] No such file or directory: 'x.bin'");
  EXPECT_EQ(blame_summary(t, v),
            "Your job's settings: Unhandled Python exception (FileNotFoundError: [Errno 2] No "
            "such file or directory: 'x.bin').");
}

TEST(DecideBlame, BrokenHardwareDoesNotExcuseAPathThatDoesNotExist) {
  Triage t = failed_with("python-exception", "Unhandled Python exception");
  t.evidence = {log_line(212, "FileNotFoundError: [Errno 2] No such file or directory: 'x.bin'")};
  t.nodes = {node("gpu-a017", "drain-recommended", "Xid 79")};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUserConfig);
  t.evidence = {log_line(212, "TypeError: unsupported operand type(s) for +: 'int' and 'str'")};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kPlatform);
}

TEST(DecideBlame, RaysMemoryMonitorKillingATaskNamesNobody) {
  Triage t = failed_with("oom-host", "Host out of memory");
  t.evidence = {log_line(
      3,
      "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.")};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUnknown);
  t.evidence = {log_line(3, "srun: error: nid001277: tasks 1-3: Out Of Memory")};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUserConfig);
}

TEST(DecideBlame, TrustedNodeEvidenceComesBeforeTheLogsWords) {
  Triage t = failed_with("oom-host", "Host out of memory");
  t.evidence = {log_line(3, "Worker exit type: NODE_OUT_OF_MEMORY"),
                kernel_oom("node3", "CONSTRAINT_MEMCG")};
  const BlameVerdict v = decide_blame(t, cat());
  EXPECT_EQ(*v.blame, Blame::kUserConfig);
  EXPECT_TRUE(v.trusted);
}

TEST(DecideBlame, TheFirstBlameWhenThatMatchesWins) {
  std::vector<InputError> errors;
  const SignatureCatalog site = SignatureCatalog::from_sections(
      parse_rules_text("[signature import-fail]\n"
                       "pattern = Traceback \\(most recent call last\\)\n"
                       "blame = user-code\n"
                       "blame-when = user-config No module named 'site_\n"
                       "blame-when = platform No module named\n"
                       "explain = x\n",
                       "site.rules")
          .sections,
      errors);
  ASSERT_TRUE(errors.empty()) << (errors.empty() ? "" : errors[0].what());
  Triage t = failed_with("import-fail", "import");
  t.evidence = {log_line(1, "Traceback (most recent call last):"),
                log_line(9, "ModuleNotFoundError: No module named 'site_tools'")};
  EXPECT_EQ(*decide_blame(t, site).blame, Blame::kUserConfig);
  t.evidence.back().text = "ModuleNotFoundError: No module named 'torch'";
  EXPECT_EQ(*decide_blame(t, site).blame, Blame::kPlatform);
  t.evidence.pop_back();
  EXPECT_EQ(*decide_blame(t, site).blame, Blame::kUserCode);
}

TEST(DecideBlame, AnNcclTimeoutWithAGpuOffTheBusOnNode3IsThePlatforms) {
  Triage t = failed_with("nccl-timeout", "NCCL/RCCL collective failure or timeout");
  t.evidence = {log_line(90, "Watchdog caught collective operation timeout")};
  t.nodes = {node("gpu-a016", "healthy", ""),
             node("gpu-a017", "drain-recommended",
                  "Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus")};
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kPlatform);
  EXPECT_TRUE(v.trusted);
  EXPECT_NE(v.basis.find("gpu-a017"), std::string::npos) << v.basis;
  EXPECT_EQ(blame_summary(t, v),
            "Not your code: Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus on gpu-a017 "
            "(its kernel, during the job). Resubmit; gpu-a017 is recommended for drain.");
}

// Issue 27: a port of one of the job's nodes went down during the job (its agent read it in
// sysfs); the NCCL class's `kernel-blame` makes that the platform's, naming node and port.
TEST(DecideBlame, AnNcclFailureWithAPortDownOnOneOfItsNodesIsThePlatformsNamingNodeAndPort) {
  Triage t = failed_with("nccl-timeout", "NCCL/RCCL collective failure or timeout");
  Finding port;
  port.cls = "nccl-timeout";
  port.source = "kernel:gpu-a017";
  port.host = "gpu-a017";
  port.trusted = true;
  port.text = "/sys/class/infiniband/mlx5_0/ports/1: state DOWN, phys_state Disabled";
  port.captures = {{"kind", "ib-port-down"},
                   {"summary", "port mlx5_0/1 is down (state DOWN, phys_state Disabled)"},
                   {"port", "mlx5_0/1"}};
  t.evidence = {
      log_line(90, "NCCL WARN Net : Call to recv from 10.0.0.2<4242> failed : Broken pipe"), port};
  t.nodes = {node("gpu-a016", "healthy", ""),
             node("gpu-a017", "degraded", "port mlx5_0/1 is down")};
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kPlatform);
  EXPECT_TRUE(v.trusted);
  EXPECT_EQ(v.basis,
            "port mlx5_0/1 is down (state DOWN, phys_state Disabled) on gpu-a017 (its agent, "
            "during the job)");
  EXPECT_EQ(blame_summary(t, v),
            "Not your code: NCCL/RCCL collective failure or timeout (port mlx5_0/1 is down "
            "(state DOWN, phys_state Disabled) on gpu-a017 (its agent, during the job)). "
            "Resubmit.");

  t.evidence.pop_back();
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUnknown) << "without the port: the default";
}

TEST(DecideBlame, ADrainHintFromTheLogAloneDoesNotOverride) {
  Triage t = failed_with("nccl-timeout", "NCCL/RCCL collective failure or timeout");
  t.nodes = {node("gpu-a017", "drain-recommended", "the log says so", /*from_agent=*/false)};
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kUnknown);
}

TEST(DecideBlame, BrokenHardwareDoesNotExcuseAMemoryRequestThatWasTooSmall) {
  Triage t = failed_with("oom-gpu", "GPU out of memory");
  t.evidence = {log_line(5, "torch.OutOfMemoryError: CUDA out of memory.")};
  t.nodes = {node("gpu-a017", "drain-recommended", "Xid 79")};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUserConfig);
}

TEST(DecideBlame, AKernelOomInsideTheJobsOwnCgroupIsItsMemoryRequest) {
  Triage t = failed_with("oom-host", "Host out of memory");
  t.evidence = {kernel_oom("node3", "CONSTRAINT_MEMCG")};
  const BlameVerdict v = decide_blame(t, cat());
  EXPECT_EQ(*v.blame, Blame::kUserConfig);
  EXPECT_TRUE(v.trusted);
  EXPECT_NE(v.basis.find("own memory limit on node3"), std::string::npos) << v.basis;
}

TEST(DecideBlame, AGlobalKernelOomIsTheNodesNotTheJobs) {
  Triage t = failed_with("oom-host", "Host out of memory");
  t.evidence = {kernel_oom("node3", "CONSTRAINT_NONE")};
  const BlameVerdict v = decide_blame(t, cat());
  EXPECT_EQ(*v.blame, Blame::kPlatform);
  EXPECT_TRUE(v.trusted);
}

TEST(DecideBlame, AFailedJobWithoutAPrimaryIsUnknown) {
  Triage t;
  t.status = kStatusFailed;
  const BlameVerdict v = decide_blame(t, cat());
  ASSERT_TRUE(v.blame);
  EXPECT_EQ(*v.blame, Blame::kUnknown);
  EXPECT_EQ(blame_summary(t, v),
            "Whose fault is not clear: nothing names the failure (no failure class was "
            "identified).");
}

// srun's step could not be laid out on the allocated CPUs: the binding asked for and the node's CPU
// set disagree, and the message names neither. An expired credential is still slurmd's.
TEST(DecideBlame, AStepThatCannotBeLaidOutOnTheCpusNamesNobody) {
  Triage t = failed_with("srun-launch-fail", "Slurm could not launch the job step");
  Finding layout = log_line(2,
                            "srun: error: Task launch for StepId=125452.4 failed on node n1: "
                            "Unable to layout tasks on given cpus");
  layout.cls = "srun-launch-fail";
  layout.vocabulary = "slurm.task-launch-failed";
  t.evidence = {layout};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUnknown);
  t.evidence.front().text =
      "srun: error: Task launch for 1443722.0 failed on node compute-0-1: Job credential expired";
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kPlatform);
}

// A job that catches its warning signal and requeues itself (submitit, a self-requeueing script)
// is ended "DUE TO JOB REQUEUE" exactly as a preempted one on a PreemptMode=REQUEUE partition: the
// line names nobody. "DUE TO PREEMPTION" is Slurm's own decision.
TEST(DecideBlame, ARequeueNamesNobodyWhereAPreemptionIsTheSchedulers) {
  Triage t = failed_with("preempted", "Preempted or requeued by Slurm");
  Finding requeue = log_line(3,
                             "slurmstepd: error: *** JOB 608 ON n1 CANCELLED AT "
                             "2022-08-12T02:06:12 DUE TO JOB REQUEUE ***");
  requeue.cls = "preempted";
  requeue.vocabulary = "slurm.job-requeue";
  t.evidence = {requeue};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kUnknown);
  Finding preempt = log_line(3,
                             "slurmstepd: error: *** JOB 608 ON n1 CANCELLED AT "
                             "2022-08-12T02:06:12 DUE TO PREEMPTION ***");
  preempt.cls = "preempted";
  preempt.vocabulary = "slurm.preemption";
  t.evidence = {preempt};
  EXPECT_EQ(*decide_blame(t, cat()).blame, Blame::kScheduler);
}

TEST(DecideBlame, TheDefaultComesFromTheRules) {
  const SignatureClass* c = cat().find("preempted");
  ASSERT_NE(c, nullptr);
  Triage t = failed_with("preempted", "Preempted or requeued by Slurm");
  EXPECT_EQ(*decide_blame(t, cat()).blame, c->blame);
  EXPECT_EQ(c->blame, Blame::kScheduler);
}

}  // namespace
}  // namespace triage
