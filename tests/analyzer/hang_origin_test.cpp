// Where a hang began: the watchdog's numbers read from each wording PyTorch 2.x prints, and the
// decision on jobs whose ranks stopped in and out of a collective, from made-up layouts and from
// real published logs (tests/corpus/log/nccl/, each with its source URL).
#include "analyzer/hang_origin.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "analyzer/collective_progress.h"
#include "analyzer/diagnosis.h"
#include "analyzer/job_analysis.h"
#include "analyzer/job_locator.h"
#include "analyzer/report_render.h"
#include "common/text.h"
#include "test_support.h"

namespace triage {
namespace {

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = 1795255200;  // 2026-11-21 10:00:00 UTC

CollectiveProgress parsed(const std::string& line) {
  const auto p = parse_collective_line(split_line(line));
  EXPECT_TRUE(p.has_value()) << line;
  return p.value_or(CollectiveProgress{});
}

// --- Reading the numbers ------------------------------------------------------------------------

TEST(CollectiveLine, The24To25WordingGivesTheTimedOutEnqueuedAndCompletedWorkOfTheLabelledRank) {
  // hiyouga/LlamaFactory#6269 (tests/corpus/log/nccl/watchdog-reduce-scatter-llamafactory-6269.log)
  const auto p = parsed(
      "[rank4]:[E1206 18:44:12.755468433 ProcessGroupNCCL.cpp:1664] [PG 1 Rank 4] Exception "
      "(either an error or timeout) detected by watchdog at work: 7753, last enqueued NCCL work: "
      "7755, last completed NCCL work: 7752.");
  EXPECT_EQ(p.rank, 4);
  EXPECT_EQ(p.pg, "1");
  EXPECT_EQ(p.timed_out, 7753);
  EXPECT_EQ(p.last_enqueued, 7755);
  EXPECT_EQ(p.last_completed, 7752);
}

TEST(CollectiveLine, The26WordingNamesTheGroupByIdAndGuid) {
  // XPixelGroup/BasicSR#737 (tests/corpus/log/nccl/watchdog-allreduce-basicsr-737.log)
  const auto p = parsed(
      "[rank0]:[E626 06:24:44.160366013 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
      "0(default_pg) Rank 0] Exception (either an error or timeout) detected by watchdog at work: "
      "808, last enqueued NCCL work: 811, last completed NCCL work: 807.");
  EXPECT_EQ(p.rank, 0);
  EXPECT_EQ(p.pg, "0");
  EXPECT_EQ(p.timed_out, 808);
  EXPECT_EQ(p.last_enqueued, 811);
  EXPECT_EQ(p.last_completed, 807);
}

TEST(CollectiveLine, The27WordingSaysSequenceIdAndPgStatus) {
  // NVIDIA/nccl#1730
  const auto p = parsed(
      "[rank118]:[E603 17:48:01.005538748 ProcessGroupNCCL.cpp:2268] [PG ID 0 PG GUID "
      "0(default_pg) Rank 118]  failure detected by watchdog at work sequence id: 2398459 PG "
      "status: last enqueued work: 2398578, last completed work: 2398458");
  EXPECT_EQ(p.rank, 118);
  EXPECT_EQ(p.pg, "0");
  EXPECT_EQ(p.timed_out, 2398459);
  EXPECT_EQ(p.last_enqueued, 2398578);
  EXPECT_EQ(p.last_completed, 2398458);
}

TEST(CollectiveLine, TheTimeoutLineAloneGivesTheSequenceNumberWithoutAGroup) {
  // OFA-Sys/OFA#271: no [rankN]: prefix, the rank is the one printed.
  const auto p = parsed(
      "[E ProcessGroupNCCL.cpp:737] [Rank 3] Watchdog caught collective operation timeout: "
      "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802211 "
      "milliseconds before timing out.");
  EXPECT_EQ(p.rank, 3);
  EXPECT_EQ(p.pg, "");
  EXPECT_EQ(p.timed_out, 469508);
  EXPECT_EQ(p.last_enqueued, kSeqUnknown);
  EXPECT_EQ(p.reached(), 469508);
}

TEST(CollectiveLine, TheDumpSignalNamesTheRankWhoseWatchdogFiredAndTheMinusOneOfNoWork) {
  // The wording of PyTorch's getNCCLWatchdogTimeoutErrorMsg (two spaces before "rank").
  const auto other = parsed(
      "[rank4]:[E703 15:37:17.178360488 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID "
      "0(default_pg) Rank 4] Received a dump signal due to a collective timeout from  rank 7 and "
      "we "
      "will try our best to dump the debug info. Last enqueued NCCL work: -1, last completed NCCL "
      "work: -1.This is most likely caused by incorrect usages of collectives");
  EXPECT_EQ(other.dump_from_rank, 7);
  EXPECT_EQ(other.last_enqueued, -1);
  EXPECT_EQ(other.last_completed, -1);
  const auto self = parsed(
      "2: [PG ID 0 PG GUID 0(default_pg) Rank 2] Received a dump signal due to a collective "
      "timeout from this local rank and we will try our best to dump the debug info. Last "
      "enqueued NCCL work: 12, last completed NCCL work: 11.");
  EXPECT_EQ(self.rank, 2) << "the srun task label";
  EXPECT_EQ(self.dump_from_rank, 2);
}

TEST(CollectiveLine, ALineWithoutSequenceNumbersIsNoFact) {
  EXPECT_FALSE(parse_collective_line(split_line(
      "[rank0]:[E1206 18:44:16.994964417 ProcessGroupNCCL.cpp:627] [Rank 0] To avoid data "
      "inconsistency, we are taking the entire process down.")));
  EXPECT_FALSE(
      parse_collective_line(split_line("Watchdog caught collective operation timeout: WorkNCCL(")));
}

// --- The decision on laid-out jobs --------------------------------------------------------------

// Eight ranks, two per node on gpu-n1..gpu-n4: rank 3 sits on gpu-n2, the second node of four.
Evidence four_node_job() {
  Evidence ev;
  ev.job.job_id = 4242;
  ev.job.state = "FAILED";
  ev.job.start_time = kT0;
  for (int n = 1; n <= 4; ++n) {
    NodeEvidence node;
    node.host = "gpu-n" + std::to_string(n);
    for (int local = 0; local < 2; ++local) {
      TaskExit t;
      t.host = node.host;
      t.job_id = 4242;
      t.step = "0";
      t.task = local;
      t.rank = (n - 1) * 2 + local;
      node.tasks.push_back(t);
    }
    ev.job.nodes.push_back(node.host);
    ev.nodes.push_back(node);
  }
  return ev;
}

// Each rank's 2.6 watchdog lines: the ranks that reached `seq` time out in it; a rank at `seq - 1`
// never enqueued it, has nothing to time out, and only prints the dump signal rank 0 sent.
// Appends the parts as one line of a log.
void add_line(std::string& log, std::initializer_list<std::string_view> parts) {
  for (const auto p : parts)
    log.append(p);
  log += '\n';
}

constexpr std::string_view kDumpSignal =
    "Received a dump signal due to a collective timeout from  rank 0 and we will try our best to "
    "dump the debug info. Last enqueued NCCL work: ";
constexpr std::string_view kTimeoutTail =
    ", OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600021 milliseconds "
    "before timing out.";
constexpr std::string_view kAllgatherTail =
    ", OpType=ALLGATHER, NumelIn=8, NumelOut=16, Timeout(ms)=600000) ran for 600100 milliseconds "
    "before timing out.";

std::string watchdog_lines(int64_t seq, const std::vector<int64_t>& behind) {
  std::string log;
  for (int64_t r = 0; r < 8; ++r) {
    const bool lag = std::find(behind.begin(), behind.end(), r) != behind.end();
    const std::string n = std::to_string(r);
    const std::string who = "[PG ID 0 PG GUID 0(default_pg) Rank " + n + "] ";
    std::string label = n;
    label += ": [rank";
    label += n;
    label += "]:";
    if (lag) {
      add_line(log, {label, "[E1121 10:40:02.1 ProcessGroupNCCL.cpp:1987] ", who, kDumpSignal,
                     std::to_string(seq - 1),
                     ", last completed NCCL work: ", std::to_string(seq - 1), "."});
    } else {
      add_line(log, {label, "[E1121 10:40:01.9 ProcessGroupNCCL.cpp:616] [Rank ", n,
                     "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
                     std::to_string(seq), kTimeoutTail});
      add_line(log, {label, "[E1121 10:40:01.9 ProcessGroupNCCL.cpp:1785] ", who,
                     "Exception (either an error or timeout) detected by watchdog at work: ",
                     std::to_string(seq), ", last enqueued NCCL work: ", std::to_string(seq),
                     ", last completed NCCL work: ", std::to_string(seq - 1), "."});
    }
  }
  return log;
}

Triage diagnose_log(const std::string& log, const Evidence* ev, int64_t now_s = kT0 + 3600) {
  const ScanResult scan = test::scan_text(log);
  DiagnosisInput in;
  in.catalog = &test::shipped_catalog();
  in.scan = &scan;
  in.evidence = ev;
  in.slurm_state = ev != nullptr ? ev->job.state : "FAILED";
  in.slurm_state_source = "option";
  in.now_usec = now_s * kSec;
  in.log_path = "job.log";
  return diagnose(in);
}

TEST(HangOrigin, RankThreeOneCollectiveBehindOnTheSecondOfFourNodesIsWhereTheHangBegan) {
  const Evidence ev = four_node_job();
  const Triage t = diagnose_log(watchdog_lines(1042, {3}), &ev);
  ASSERT_TRUE(t.hang_origin_judged);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_EQ(t.hang_origin.rank, 3);
  EXPECT_EQ(t.hang_origin.node, "gpu-n2");
  EXPECT_EQ(t.hang_origin.signal, kSignalBehind);
  EXPECT_NE(t.hang_origin.basis.find("1041"), std::string::npos) << t.hang_origin.basis;
  EXPECT_NE(t.hang_origin.basis.find("1042"), std::string::npos) << t.hang_origin.basis;

  const auto j = nlohmann::json::parse(render_json(t));
  EXPECT_EQ(j.at("hang_origin").at("rank"), 3);
  EXPECT_EQ(j.at("hang_origin").at("node"), "gpu-n2");
  EXPECT_TRUE(j.at("hang_origin_reason").is_null());
  // Eight ranks in process group 0, and the seven timeout lines that name no group.
  EXPECT_EQ(j.at("collective_progress").size(), 15u);
  const std::string md = render_markdown(t);
  const size_t origin_at = md.find("**Hang origin:** rank 3 on node " + md_code_span("gpu-n2"));
  ASSERT_NE(origin_at, std::string::npos) << md;
  EXPECT_LT(origin_at, md.find("### What happened")) << "among the report's first lines";
}

TEST(HangOrigin, EveryRankAtMinusOneMeansTheProcessesFrozeOutsideCommunication) {
  // A stalled filesystem: no rank had a collective in flight when the heartbeat monitor fired.
  std::string log;
  for (int r = 0; r < 4; ++r) {
    log += std::to_string(r) + ": [rank" + std::to_string(r) +
           "]:[E1121 10:48:00.5 ProcessGroupNCCL.cpp:1987] [PG ID 0 PG GUID 0(default_pg) Rank " +
           std::to_string(r) +
           "] Received a dump signal due to a collective timeout from this local rank and we will "
           "try our best to dump the debug info. Last enqueued NCCL work: -1, last completed NCCL "
           "work: -1.\n";
  }
  const Triage t = diagnose_log(log, nullptr);
  ASSERT_TRUE(t.hang_origin_judged);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_TRUE(t.hang_origin.outside_communication);
  EXPECT_NE(t.hang_origin.reason.find("no collective was in flight"), std::string::npos);
  EXPECT_NE(t.hang_origin.reason.find("froze outside communication"), std::string::npos);
  const auto j = nlohmann::json::parse(render_json(t));
  EXPECT_TRUE(j.at("hang_origin").is_null());
  EXPECT_TRUE(j.at("hang_outside_communication").get<bool>());
  EXPECT_NE(render_markdown(t).find("**Hang origin:** none: no collective was in flight"),
            std::string::npos);
}

TEST(HangOrigin, RanksThatAllStoppedInTheSameCollectiveGiveNoOriginAndSaySo) {
  const Evidence ev = four_node_job();
  const Triage t = diagnose_log(watchdog_lines(1042, {}), &ev);
  ASSERT_TRUE(t.hang_origin_judged);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_EQ(t.hang_origin.reason.rfind("all ranks stopped together", 0), 0u)
      << t.hang_origin.reason;
  const auto j = nlohmann::json::parse(render_json(t));
  EXPECT_TRUE(j.at("hang_origin").is_null());
  EXPECT_NE(j.at("hang_origin_reason").get<std::string>().find("all ranks stopped together"),
            std::string::npos);
}

TEST(HangOrigin, WhenAllStoppedTogetherARankThatEndedMinutesBeforeTheOthersDecides) {
  Evidence ev = four_node_job();
  for (auto& node : ev.nodes) {
    for (auto& task : node.tasks) {
      task.wait_status = task.rank == 5 ? 1 << 8 : 6;  // rank 5: exit 1; the others: SIGABRT
      task.end_usec = (task.rank == 5 ? kT0 + 1200 : kT0 + 1805) * kSec;
      task.decode();
    }
  }
  const Triage t = diagnose_log(watchdog_lines(1042, {}), &ev);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_EQ(t.hang_origin.rank, 5);
  EXPECT_EQ(t.hang_origin.node, "gpu-n3");
  EXPECT_EQ(t.hang_origin.signal, kSignalFirstExit);
  EXPECT_NE(t.hang_origin.basis.find("605 s before any other task"), std::string::npos)
      << t.hang_origin.basis;
}

TEST(HangOrigin, TasksEndingSecondsApartAsTheWatchdogTearsThemDownSingleNothingOut) {
  Evidence ev = four_node_job();
  for (auto& node : ev.nodes) {
    for (auto& task : node.tasks) {
      task.wait_status = 6;
      task.end_usec = (kT0 + 1805 + task.rank % 3) * kSec;
      task.decode();
    }
  }
  const Triage t = diagnose_log(watchdog_lines(1042, {}), &ev);
  EXPECT_FALSE(t.hang_origin.found) << t.hang_origin.basis;
}

TEST(HangOrigin, TheOnlyNodeWithTheJobsTasksInDStateIsTheOriginWhenTheNumbersAgree) {
  Evidence ev = four_node_job();
  ev.nodes[3].job_dstate = 2;
  ev.nodes[3].dstate = DStateSummary{kT0 + 600, 2, 2, {{"nfs_wait_on_request", 2}}};
  const Triage t = diagnose_log(watchdog_lines(1042, {}), &ev);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_FALSE(t.hang_origin.rank.has_value()) << "two ranks run on that node";
  EXPECT_EQ(t.hang_origin.node, "gpu-n4");
  EXPECT_EQ(t.hang_origin.signal, kSignalDState);
}

TEST(HangOrigin, TwoRanksBehindOnOneNodeNameTheNodeButNoRank) {
  const Evidence ev = four_node_job();
  const Triage t = diagnose_log(watchdog_lines(1042, {6, 7}), &ev);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_FALSE(t.hang_origin.rank.has_value());
  EXPECT_EQ(t.hang_origin.node, "gpu-n4");
  EXPECT_NE(t.hang_origin.basis.find("ranks 6 and 7 are behind"), std::string::npos)
      << t.hang_origin.basis;
}

TEST(HangOrigin, TwoRanksBehindOnDifferentNodesWithNothingElseGiveNoOrigin) {
  const Evidence ev = four_node_job();
  const Triage t = diagnose_log(watchdog_lines(1042, {1, 6}), &ev);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_NE(t.hang_origin.reason.find("not on one node"), std::string::npos)
      << t.hang_origin.reason;
}

TEST(HangOrigin, OneRankThatEnqueuedACollectiveNoOtherCalledPlacesNoSingleRank) {
  // Seven ranks at 1041, rank 0 alone at 1042: it called a collective the others never do.
  const Evidence ev = four_node_job();
  const Triage t = diagnose_log(watchdog_lines(1042, {1, 2, 3, 4, 5, 6, 7}), &ev);
  EXPECT_FALSE(t.hang_origin.found) << t.hang_origin.basis;
  EXPECT_NE(t.hang_origin.reason.find("rank 0 enqueued collectives up to 1042"), std::string::npos)
      << t.hang_origin.reason;
}

TEST(HangOrigin, OnOldPyTorchTheOneRankWithoutATimeoutLineNeverReachedTheCollective) {
  // PyTorch 2.0-2.2 print only the timeout line, and only on ranks with work in flight.
  const Evidence ev = four_node_job();
  std::string log;
  for (int r = 0; r < 8; ++r) {
    if (r == 3) continue;
    log += "[E ProcessGroupNCCL.cpp:475] [Rank " + std::to_string(r) +
           "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=880, "
           "OpType=BROADCAST, NumelIn=131137536, NumelOut=131137536, Timeout(ms)=1800000) ran "
           "for 1800648 milliseconds before timing out.\n";
  }
  const Triage t = diagnose_log(log, &ev);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_EQ(t.hang_origin.rank, 3);
  EXPECT_EQ(t.hang_origin.node, "gpu-n2");
  EXPECT_EQ(t.hang_origin.signal, kSignalSilent);
}

TEST(HangOrigin, TimeoutsInDifferentSubgroupsAreNotComparedWithEachOther) {
  // Two tensor-parallel pairs, each timing out in its own group at its own (unrelated) number.
  std::string log;
  for (int r = 0; r < 4; ++r) {
    const int seq = r < 2 ? 500 : 900;
    const std::string pg = r < 2 ? "2" : "3";
    const std::string label = std::to_string(r) + ": ";
    add_line(log, {label, "[Rank ", std::to_string(r % 2),
                   "] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=",
                   std::to_string(seq), kAllgatherTail});
    add_line(log, {label, "[PG ", pg, " Rank ", std::to_string(r % 2), "] Timeout at NCCL work: ",
                   std::to_string(seq), ", last enqueued NCCL work: ", std::to_string(seq),
                   ", last completed NCCL work: ", std::to_string(seq - 1), "."});
  }
  const Triage t = diagnose_log(log, nullptr);
  EXPECT_FALSE(t.hang_origin.found) << t.hang_origin.basis;
  EXPECT_NE(t.hang_origin.reason.find("process group 2"), std::string::npos)
      << t.hang_origin.reason;
}

TEST(HangOrigin, FullModeReadsEachRanksOwnLogUnderTheRankItsFileNames) {
  // A job directory with per-rank logs; the lines print the rank in a two-rank subgroup (0 or 1),
  // the file names give the job's rank. rank-2.log never enqueued collective 41.
  test::ScratchDir dir("hang-origin-rank-logs");
  test::write_file(dir / "log", "0: [2026-11-21 10:00:00] completed step: 1, seconds: 1.0\n");
  for (int r = 0; r < 4; ++r) {
    const int seq = r == 2 ? 40 : 41;
    std::string line;
    add_line(line, {"[PG 2 Rank ", std::to_string(r % 2),
                    "] Exception (either an error or timeout) detected by watchdog at work: ",
                    std::to_string(seq), ", last enqueued NCCL work: ", std::to_string(seq),
                    ", last completed NCCL work: ", std::to_string(seq - 1), "."});
    test::write_file(dir / ("rank-" + std::to_string(r) + ".log"), line);
  }
  AnalysisOptions opt;
  opt.mode = "full";
  opt.slurm_state_option = "FAILED";
  opt.now_usec = (kT0 + 3600) * kSec;
  const JobReport rep =
      analyze_job(resolve_job_path(dir.str()), test::shipped_plan(), nullptr, opt);
  ASSERT_TRUE(rep.triage.hang_origin.found) << rep.triage.hang_origin.reason;
  EXPECT_EQ(rep.triage.hang_origin.rank, 2);
  EXPECT_EQ(rep.triage.hang_origin.signal, kSignalBehind);
}

TEST(HangOrigin, AJobThatNeitherHungNorTimedOutIsNotAskedWhereAHangBegan) {
  const Triage t =
      diagnose_log("0: Traceback (most recent call last):\n0: KeyError: 'x'\n", nullptr);
  EXPECT_FALSE(t.hang_origin_judged);
  const auto j = nlohmann::json::parse(render_json(t));
  EXPECT_TRUE(j.at("hang_origin").is_null());
  EXPECT_TRUE(j.at("hang_origin_reason").is_null());
  EXPECT_EQ(render_markdown(t).find("Hang origin"), std::string::npos);
}

TEST(HangOrigin, TheOrderOfTheOtherSignalsIsData) {
  HangOriginInput in;
  in.rank_node = {{0, "a"}, {1, "b"}};
  in.task_ends = {{0, "a", 100 * kSec, "exit 1"}, {1, "b", 1000 * kSec, "SIGABRT"}};
  in.nodes = {{"b", 3, {}}};
  EXPECT_EQ(decide_hang_origin(in).signal, kSignalFirstExit);
  HangOriginPolicy dstate_first;
  dstate_first.order = {kSignalDState, kSignalFirstExit};
  const HangOrigin o = decide_hang_origin(in, dstate_first);
  EXPECT_EQ(o.signal, kSignalDState);
  EXPECT_EQ(o.node, "b");
  EXPECT_EQ(o.rank, 1);
}

// --- Real published logs ------------------------------------------------------------------------

// A corpus excerpt's lines (after its header).
std::string corpus_excerpt(const std::string& rel) {
  const std::string text =
      test::read_file(std::filesystem::path(TRIAGE_SOURCE_DIR) / "tests/corpus/log/nccl" / rel);
  const std::string sep = "--- excerpt ---\n";
  return text.substr(text.find(sep) + sep.size());
}

TEST(HangOriginRealLogs, LlamaFactory2902RankZeroNeverEnqueuedTheAllreduceRankOneTimedOutIn) {
  // https://github.com/hiyouga/LlamaFactory/issues/2902: rank 0 is still in collective 1516
  // (its last enqueued) while rank 1 timed out waiting in 1517.
  const Triage t =
      diagnose_log(corpus_excerpt("watchdog-rank-behind-llamafactory-2902.log"), nullptr);
  ASSERT_TRUE(t.hang_origin.found) << t.hang_origin.reason;
  EXPECT_EQ(t.hang_origin.rank, 0);
  EXPECT_EQ(t.hang_origin.node, "") << "no task layout: the node is unknown";
  EXPECT_EQ(t.hang_origin.signal, kSignalBehind);
  const auto j = nlohmann::json::parse(render_json(t));
  EXPECT_TRUE(j.at("hang_origin").at("node").is_null());
}

TEST(HangOriginRealLogs, LlamaFactory6269RanksZeroAndFourStoppedTogether) {
  // https://github.com/hiyouga/LlamaFactory/issues/6269
  const Triage t =
      diagnose_log(corpus_excerpt("watchdog-reduce-scatter-llamafactory-6269.log"), nullptr);
  ASSERT_TRUE(t.hang_origin_judged);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_NE(t.hang_origin.reason.find("all ranks stopped together"), std::string::npos)
      << t.hang_origin.reason;
  EXPECT_NE(t.hang_origin.reason.find("7755"), std::string::npos) << t.hang_origin.reason;
}

TEST(HangOriginRealLogs, BasicSR737RanksAllAtTheSameCollective) {
  // https://github.com/XPixelGroup/BasicSR/issues/737
  const Triage t = diagnose_log(corpus_excerpt("watchdog-allreduce-basicsr-737.log"), nullptr);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_NE(t.hang_origin.reason.find("all ranks stopped together"), std::string::npos)
      << t.hang_origin.reason;
}

TEST(HangOriginRealLogs, LlamaFactory7396LinesBehindALineNumberPrefixStillCount) {
  // https://github.com/hiyouga/LlamaFactory/issues/7396: "[80748] [rank0]:..." hides the rank
  // label; the rank printed in "[PG 1 Rank 0]" is read instead.
  const Triage t =
      diagnose_log(corpus_excerpt("watchdog-allreduce-llamafactory-7396.log"), nullptr);
  ASSERT_GE(t.collectives.size(), 2u);
  EXPECT_FALSE(t.hang_origin.found);
  EXPECT_NE(t.hang_origin.reason.find("all ranks stopped together"), std::string::npos)
      << t.hang_origin.reason;
}

}  // namespace
}  // namespace triage
