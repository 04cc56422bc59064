// The scanner on the inputs real clusters produce: long lines, partial last lines, logs still being
// written, colour codes, binary junk, floods of one error.
#include "analyzer/log_scanner.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <fstream>
#include <thread>

#include "common/safe_io.h"
#include "test_support.h"

namespace triage {
namespace {

const ClassMatches& matches(const ScanResult& r, const char* cls) {
  const int i = test::shipped_catalog().index_of(cls);
  EXPECT_GE(i, 0) << cls;
  return r.classes.at(static_cast<size_t>(i));
}

std::string noise_lines(int n, int first_rank = 0) {
  std::string s;
  for (int i = 0; i < n; ++i) {
    s += std::to_string((first_rank + i) % 8) +
         ": I1121 10:00:00.000000 2231 gpu_transfer_manager.cc:244] buffer pool ok\n";
  }
  return s;
}

TEST(LogScanner, ReportsLineNumbersTaskLabelsAndTheVerbatimLine) {
  const std::string log =
      noise_lines(10) + "2: srun: error: gpu-a019: task 2: Out Of Memory\n" + noise_lines(3);
  const ScanResult r = test::scan_text(log);
  const auto& m = matches(r, "oom-host");
  ASSERT_EQ(m.count, 1u);
  EXPECT_EQ(m.first[0].line, 11);
  EXPECT_EQ(m.first[0].rank, 2);
  EXPECT_EQ(m.first[0].host, "gpu-a019");
  EXPECT_EQ(m.first[0].text, "2: srun: error: gpu-a019: task 2: Out Of Memory");
  EXPECT_EQ(r.lines, 14);
}

TEST(LogScanner, FindsASignatureInsideAMultiMegabyteLineAndKeepsATruncatedCopy) {
  ScanOptions opt;
  opt.block_bytes = size_t{256} * 1024;
  // The signature sits at several offsets around the piece boundaries of a 3 MB line.
  for (const size_t at : {size_t{10}, size_t{262144 - 20}, size_t{262144 - 16 * 1024 - 5},
                          size_t{1u << 20}, size_t{3u << 20}}) {
    std::string line(3u << 20, 'x');
    const std::string sig = " NCCL WARN Timeout after 600s ";
    line.replace(std::min(at, line.size() - sig.size()), sig.size(), sig);
    const std::string log =
        noise_lines(2) + line + "\n" + noise_lines(2) + "srun: error: n1: task 0: Killed\n";
    const ScanResult r = test::scan_text(log, opt);
    const auto& m = matches(r, "nccl-timeout");
    ASSERT_EQ(m.count, 1u) << "signature at " << at;
    EXPECT_EQ(m.first[0].line, 3);
    EXPECT_TRUE(m.first[0].truncated);
    EXPECT_LE(m.first[0].text.size(), opt.evidence_bytes);
    EXPECT_NE(m.first[0].text.find("NCCL WARN Timeout"), std::string::npos);
    EXPECT_EQ(matches(r, "signal-kill").first.at(0).line, 6) << "line numbers after the long line";
    EXPECT_EQ(r.long_lines, 1u);
  }
}

TEST(LogScanner, ReadsAFinalLineWithoutALineBreak) {
  const ScanResult r = test::scan_text(noise_lines(4) + "Traceback (most recent call last):");
  EXPECT_EQ(matches(r, "python-exception").count, 1u);
  EXPECT_EQ(matches(r, "python-exception").first[0].line, 5);
  EXPECT_TRUE(r.ends_without_newline);
  EXPECT_EQ(r.lines, 5);
  ASSERT_FALSE(r.tail.empty());
  EXPECT_EQ(r.tail.back().number, 5);
  EXPECT_EQ(r.tail.back().text, "Traceback (most recent call last):");
}

TEST(LogScanner, CrlfColourCodesBinaryJunkAndBrokenUtf8HideNothing) {
  std::string log = "0: \x1b[1;31mFatal Python error: \x1b[0mSegmentation fault\r\n";
  log += std::string("1: \xff\xfe\x00\x00 junk then RESOURCE_EXHAUSTED: Out of memory\r\n", 53);
  log += "NODE_EXIT host=gpu-a017 exit=143\r\n";
  log += "NODE_EXIT host=gpu-a018 exit=137\r\n";
  const ScanResult r = test::scan_text(log);
  EXPECT_EQ(matches(r, "signal-kill").count, 1u);
  EXPECT_EQ(matches(r, "oom-gpu").count, 1u);
  // exit=143 before the CR is still a clean cancellation, exit=137 is not.
  EXPECT_EQ(matches(r, "node-fail").count, 1u);
  EXPECT_EQ(matches(r, "node-fail").first[0].host, "gpu-a018");
  EXPECT_EQ(r.facts.node_exits.size(), 2u);
}

TEST(LogScanner, AFloodOfOneErrorKeepsOnlyTheFirstAndLastInMemory) {
  std::string log;
  for (int i = 0; i < 200000; ++i)
    log += "slurmstepd: error: Detected 1 oom_kill event in StepId=1.0\n";
  const ScanResult r = test::scan_text(log);
  const auto& m = matches(r, "oom-host");
  EXPECT_EQ(m.count, 200000u);
  EXPECT_EQ(m.first.size(), ClassMatches::kKeepFirst);
  EXPECT_EQ(m.last.size(), ClassMatches::kKeepLast);
  EXPECT_EQ(m.last.back().line, 200000);
}

// The last few findings are refilled in place as the flood goes on: after the scan they are the
// last five in order, and a refilled one keeps nothing of the line it held before (a host or a
// rank from an earlier line would put the error on the wrong node).
TEST(LogScanner, TheLastFindingsOfAFloodAreInOrderAndCarryNothingOfEarlierLines) {
  std::string log;
  for (int i = 1; i <= 1003; ++i) {
    if (i % 2 == 1)
      log += "NODE_EXIT host=gpu-a0" + std::to_string(i % 100) + " exit=137\n";
    else
      log += "  7: NODE_EXIT host=gpu-b07 exit=137\n";
  }
  const ScanResult r = test::scan_text(log);
  const auto& m = matches(r, "node-fail");
  ASSERT_EQ(m.count, 1003u);
  ASSERT_EQ(m.last.size(), ClassMatches::kKeepLast);
  for (size_t k = 0; k < m.last.size(); ++k) {
    const Finding& f = m.last[k];
    EXPECT_EQ(f.line, static_cast<int64_t>(999 + k));
    if (f.line % 2 == 1) {
      EXPECT_EQ(f.host, "gpu-a0" + std::to_string(f.line % 100));
      EXPECT_EQ(f.rank, -1);
    } else {
      EXPECT_EQ(f.host, "gpu-b07");
      EXPECT_EQ(f.rank, 7);
    }
  }
}

TEST(ClassMatches, AResetFindingIsADefaultOne) {
  Finding f;
  f.cls = "oom-gpu";
  f.source = "rank-3.log";
  f.line = 12;
  f.text = "torch.OutOfMemoryError: CUDA out of memory";
  f.truncated = true;
  f.rank = 3;
  f.host = "gpu-a017";
  f.time_usec = 42;
  f.stage = "train";
  f.trusted = true;
  f.captures = {{"host", "gpu-a017"}};
  f.traceback_line = 9;
  f.cause = true;
  f.vocabulary = "cuda:cudaErrorMemoryAllocation";
  f.severity = Severity::kWarning;
  f.hosts = {"gpu-a017"};
  f.reset();
  const Finding d;
  EXPECT_EQ(f.cls, d.cls);
  EXPECT_EQ(f.source, d.source);
  EXPECT_EQ(f.line, d.line);
  EXPECT_EQ(f.text, d.text);
  EXPECT_EQ(f.truncated, d.truncated);
  EXPECT_EQ(f.rank, d.rank);
  EXPECT_EQ(f.host, d.host);
  EXPECT_EQ(f.time_usec, d.time_usec);
  EXPECT_EQ(f.stage, d.stage);
  EXPECT_EQ(f.trusted, d.trusted);
  EXPECT_EQ(f.captures, d.captures);
  EXPECT_EQ(f.traceback_line, d.traceback_line);
  EXPECT_EQ(f.cause, d.cause);
  EXPECT_EQ(f.vocabulary, d.vocabulary);
  EXPECT_EQ(f.severity, d.severity);
  EXPECT_EQ(f.hosts, d.hosts);
}

TEST(ClassMatches, SettleOrdersTheRingOldestFirstAndKeepsTheFirstFew) {
  ClassMatches m;
  for (int64_t line = 1; line <= 17; ++line)
    m.next().line = line;
  m.settle();
  ASSERT_EQ(m.first.size(), ClassMatches::kKeepFirst);
  EXPECT_EQ(m.first.back().line, 8);
  ASSERT_EQ(m.last.size(), ClassMatches::kKeepLast);
  for (size_t k = 0; k < m.last.size(); ++k)
    EXPECT_EQ(m.last[k].line, static_cast<int64_t>(13 + k));
  EXPECT_EQ(m.latest()->line, 17);
  EXPECT_EQ(m.count, 17u);
}

TEST(LogScanner, KnownHarmlessLinesAreCountedNotReported) {
  const std::string log =
      "0: gpu-a017:2231:2231 [0] NCCL WARN MSCCL++: Feature not enabled\n"
      "srun: error: gpu-a018: tasks 8-15: Exited with exit code 143\n"
      "0: gpu-a017:2231:2231 [0] NCCL WARN NET/IB : Got async event : port error\n";
  const ScanResult r = test::scan_text(log);
  EXPECT_EQ(matches(r, "nccl-timeout").count, 1u);
  EXPECT_EQ(matches(r, "nccl-timeout").first[0].line, 3);
  EXPECT_EQ(matches(r, "subprocess-fail").count, 0u);
  uint64_t harmless = 0;
  for (const auto n : r.harmless_counts)
    harmless += n;
  EXPECT_EQ(harmless, 2u);
}

// [harmless killall-found-nothing] is two lines long: srun's exit code 1 is harmless only right
// after killall said it found nothing to kill.
TEST(LogScanner, AHarmlessShapeTwoLinesLongNeedsItsFirstLine) {
  const std::string killall_then_exit =
      "picongpu: Kein Prozess abgebrochen\n"
      "srun: error: taurusi2031: tasks 10-11: Exited with exit code 1\n";
  EXPECT_EQ(matches(test::scan_text(killall_then_exit), "subprocess-fail").count, 0u);
  const std::string exit_alone = "srun: error: taurusi2031: tasks 10-11: Exited with exit code 1\n";
  EXPECT_EQ(matches(test::scan_text(exit_alone), "subprocess-fail").count, 1u);
  const std::string other_line_before =
      "picongpu: no process found\n"
      "step 100 loss 2.31\n"
      "srun: error: taurusi2031: tasks 10-11: Exited with exit code 1\n";
  EXPECT_EQ(matches(test::scan_text(other_line_before), "subprocess-fail").count, 1u);
  const std::string labelled =
      "10: picongpu: no process found\n"
      "srun: error: taurusi2031: tasks 10-11: Exited with exit code 1\n";
  EXPECT_EQ(matches(test::scan_text(labelled), "subprocess-fail").count, 0u);
}

TEST(LogScanner, KeepsTheHeadAndTheTail) {
  std::string log;
  for (int i = 1; i <= 1000; ++i)
    log += "line " + std::to_string(i) + "\n";
  const ScanResult r = test::scan_text(log);
  ASSERT_EQ(r.head.size(), 80u);
  EXPECT_EQ(r.head.front().text, "line 1");
  EXPECT_EQ(r.head.back().text, "line 80");
  ASSERT_EQ(r.tail.size(), 200u);
  EXPECT_EQ(r.tail.front().number, 801);
  EXPECT_EQ(r.tail.front().text, "line 801");
  EXPECT_EQ(r.tail.back().text, "line 1000");
}

TEST(LogScanner, ATracebackTiesItsExceptionLineToItsStart) {
  const std::string log =
      "3: Traceback (most recent call last):\n"
      "0: unrelated line from another task\n"
      "3:   File \"train.py\", line 10, in <module>\n"
      "3:     step()\n"
      "3: jaxlib.xla_extension.XlaRuntimeError: INTERNAL: Failed to compile: boom\n";
  const ScanResult r = test::scan_text(log);
  const auto& x = matches(r, "xla-compile-fail");
  ASSERT_EQ(x.count, 1u);
  EXPECT_EQ(x.first[0].line, 5);
  EXPECT_EQ(x.first[0].traceback_line, 1);
  ASSERT_EQ(r.facts.tracebacks.size(), 1u);
  EXPECT_EQ(r.facts.tracebacks[0].exception_line, 5);
}

TEST(LogScanner, ReadsStepsSummaryConfigTunnelAndHeartbeatFacts) {
  const std::string log =
      "RAY=1\n"
      "PASSTHROUGH_ARGS=steps=1000 enable_checkpointing=true\n"
      "0: Config param checkpoint_period: 250\n"
      "  ssh -L 8265:localhost:8265 -L 9192:localhost:9192 -J me@login me@gpu-h001\n"
      "0: [2026-11-21 10:00:00] completed step: 0, seconds: 60.0\n"
      "1: [2026-11-21 10:00:00] completed step: 0, seconds: 60.0\n"
      "0: [2026-11-21 10:00:02] completed step: 1, seconds: 2.0\n"
      "0: E1121 10:01:00.0 1 c.cc:1] The following tasks are unhealthy (stopped sending "
      "heartbeats):\n"
      "0: /job:jax_worker/replica:0/task:1\n"
      "1: F1121 10:01:01.0 2 c.cc:2] Terminating process because the JAX distributed service "
      "detected fatal errors.\n"
      "NODE_EXIT host=gpu-h001 exit=1\n"
      " JOB SUMMARY\n"
      " Status:   FAILED (exit 1)\n";
  const ScanResult r = test::scan_text(log);
  const LogFacts& f = r.facts;
  EXPECT_TRUE(f.ray_enabled);
  EXPECT_EQ(f.config.total_steps, 1000);
  EXPECT_EQ(f.config.checkpoint_period, 250);
  EXPECT_EQ(f.config.enable_checkpointing, true);
  EXPECT_EQ(f.tunnel.head_host, "gpu-h001");
  EXPECT_EQ(f.tunnel.prometheus_port, 9192);
  EXPECT_EQ(f.steps.first_step, 0);
  EXPECT_EQ(f.steps.last_step, 1);
  EXPECT_EQ(f.steps.distinct_steps, 2u);
  EXPECT_EQ(f.heartbeat.line, 8);
  EXPECT_EQ(f.heartbeat.accused, std::vector<int64_t>{1});
  EXPECT_EQ(f.self_reported_death.at(1), 10);
  EXPECT_TRUE(f.summary.found);
  EXPECT_EQ(f.summary.status_word, "FAILED");
  EXPECT_EQ(f.summary.exit_code, 1);
}

TEST(LogScanner, ReadsAStepsOwnTimeUnderTwoTaskLabelsAndBehindAPrefix) {
  test::use_source_rules();                  // TZ=UTC
  const int64_t t = 1795255200LL * 1000000;  // 2026-11-21 10:00:00 UTC
  const ScanResult labelled = test::scan_text(
      "0: 0: [2026-11-21 10:00:00] completed step: 0, seconds: 0.100\n"
      "0: 0: [2026-11-21 10:00:09] completed step: 9, seconds: 0.100\n");
  EXPECT_EQ(labelled.facts.steps.first_time_usec, t);
  EXPECT_EQ(labelled.facts.steps.last_time_usec, t + 9000000);
  const ScanResult prefixed = test::scan_text(
      "INFO trainer 2026-11-21 10:00:00 completed step: 0, seconds: 1.0\n"
      "INFO trainer 2026-11-21 10:00:05 completed step: 5, seconds: 1.0\n");
  EXPECT_EQ(prefixed.facts.steps.first_time_usec, t);
  EXPECT_EQ(prefixed.facts.steps.last_time_usec, t + 5000000);
}

TEST(LogScanner, NoticesTrainingStartingOverInTheSameLog) {
  std::string log;
  for (int s = 0; s <= 120; ++s)
    log += "completed step: " + std::to_string(s) + ", seconds: 1.0\n";
  for (int s = 101; s <= 130; ++s)
    log += "completed step: " + std::to_string(s) + ", seconds: 1.0\n";
  const ScanResult r = test::scan_text(log);
  EXPECT_EQ(r.facts.restarts, 1u);
  EXPECT_EQ(r.facts.steps.first_step, 101);
  EXPECT_EQ(r.facts.steps.last_step, 130);
}

TEST(LogScanner, EachStepsTimeCountsOnceWhateverTheOtherRanksPrint) {
  std::string log = "0: completed step: 0, seconds: 60.0\n1: completed step: 0, seconds: 99.0\n";
  for (int s = 1; s <= 8; ++s) {
    const std::string step = std::to_string(s);
    log += "0: completed step: " + step + ", seconds: 2.0\n";
    log += "1: completed step: " + step + ", seconds: 50.0\n";  // a lagging rank's own figure
  }
  const StepSegment& seg = test::scan_text(log).facts.steps;
  EXPECT_EQ(seg.distinct_steps, 9u);
  EXPECT_DOUBLE_EQ(seg.first_seconds, 60.0);
  EXPECT_EQ(seg.warm_count, 4u);  // steps 1-4
  EXPECT_DOUBLE_EQ(seg.warm_seconds_sum, 8.0);
  EXPECT_EQ(seg.steady_count, 4u);  // steps 5-8
  EXPECT_DOUBLE_EQ(seg.steady_seconds_sum, 8.0);
}

TEST(LogScanner, ALogStillBeingWrittenIsReadUpToItsSizeAtOpen) {
  test::ScratchDir d("growing");
  const auto path = d / "job.log";
  test::write_file(
      path, noise_lines(20000) + "slurmstepd: error: Detected 1 oom_kill event in StepId=5.0\n");
  UniqueFd fd = open_regular_file(path.string(), true);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    std::ofstream out(path, std::ios::app | std::ios::binary);
    while (!stop) {
      out << "0: completed step: 1, seconds: 1.0\n0: partial line without an end";
      out.flush();
    }
  });
  const ScanResult r = scan_log(fd.get(), test::shipped_plan(), ScanOptions{});
  stop = true;
  writer.join();
  EXPECT_EQ(r.bytes_scanned, r.size_at_open);
  EXPECT_EQ(matches(r, "oom-host").count, 1u);
}

TEST(LogScanner, AnEmptyLogIsFine) {
  const ScanResult r = test::scan_text("");
  EXPECT_EQ(r.lines, 0);
  EXPECT_TRUE(r.head.empty());
  EXPECT_TRUE(r.tail.empty());
}

}  // namespace
}  // namespace triage
