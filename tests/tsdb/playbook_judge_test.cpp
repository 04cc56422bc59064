// The playbooks' judgements on plain numbers: each test is a situation on a cluster, written as
// the metrics a gatherer would have read, and the verdict the judge must reach. No Prometheus,
// fake or real: the gatherers and the queries are covered by playbooks_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <string>
#include <vector>

#include "analyzer/tsdb/playbook_gpu_health.h"
#include "analyzer/tsdb/playbook_hang.h"
#include "analyzer/tsdb/playbook_hardware.h"
#include "analyzer/tsdb/playbook_heartbeat.h"
#include "analyzer/tsdb/playbook_network.h"
#include "analyzer/tsdb/playbook_oom.h"
#include "analyzer/tsdb/playbook_table.h"
#include "analyzer/tsdb/playbook_training.h"

namespace triage::tsdb {
namespace {

constexpr double kT0 = 1763700000;  // the job's start
constexpr double kGiB = 1024.0 * 1024 * 1024;

bool mentions(const PlaybookResult& r, const std::string& needle) {
  if (r.summary.find(needle) != std::string::npos) return true;
  return std::any_of(r.findings.begin(), r.findings.end(),
                     [&](const Finding& f) { return f.text.find(needle) != std::string::npos; });
}

// ---- Playbook 1: hang ----

GpuThresholds mi355x() {
  GpuThresholds g;
  g.model = "MI355X";
  g.power_active_w = 900;
  g.power_busy_wait_w = 300;
  g.idle_level_max_w = 420;
  g.active_min_w = 600;
  return g;
}

// Two 4-GPU nodes whose last step completed 40 minutes into a 2-hour job; every GPU reads
// `power` watts at `util` % during the hang and drew 900 W while training.
HangMetrics two_nodes_after_step_316(double power, double util) {
  HangMetrics m;
  m.hang_start = kT0 + 2400;
  m.data_start = kT0;
  m.data_end = kT0 + 7200;
  m.hosts = {"node001", "node002"};
  m.have_power = m.have_util = m.have_probe = true;
  m.probe = "hw_scrape_duration_seconds";
  for (const auto& h : m.hosts) {
    m.reporting[h] = 60;
    for (const char* gpu : {"0", "1", "2", "3"})
      m.gpus[h + ":" + gpu] = {h, gpu, power, util, 900};
  }
  return m;
}

void set_host(HangMetrics& m, const std::string& host, double power, double util) {
  for (auto& [k, g] : m.gpus) {
    if (g.host == host) {
      g.power = power;
      g.util = util;
    }
  }
}

TEST(HangJudge, EveryGpuSpinningAtFullUtilisationOnIdleLevelPowerIsABusyWaitDeadlock) {
  const auto r = judge_hang(two_nodes_after_step_316(300, 100), mi355x());
  EXPECT_EQ(r.verdict, "busy-wait-hang");
  EXPECT_EQ(r.hosts, (std::vector<std::string>{"node001", "node002"}));
  EXPECT_EQ(r.gpus.size(), 8u);
  EXPECT_TRUE(mentions(r, "All 8 GPUs on 2 host(s)")) << r.summary;
  EXPECT_EQ(r.window_start, kT0 + 2400);
  ASSERT_EQ(r.tables.size(), 1u);
  EXPECT_EQ(r.tables[0].rows[0].back(), "4 idle-level");
}

TEST(HangJudge, ARetransmitBurstAMinuteBeforeTheStallIsWhatTriggeredTheHang) {
  auto m = two_nodes_after_step_316(300, 100);
  m.network.push_back(NetEvent{.host = "node002",
                               .device = "mlx5_0/1",
                               .metric = "hw_rdma_retx_total",
                               .what = "RDMA retransmits",
                               .time = kT0 + 2340,
                               .amount = 5000,
                               .baseline = 0.1});
  const auto r = judge_hang(m, mi355x());
  EXPECT_EQ(r.verdict, "network-triggered-hang");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node002"});
  EXPECT_TRUE(mentions(r, "RDMA retransmits on node002 (mlx5_0/1)")) << r.summary;
  ASSERT_FALSE(r.anomalies.empty());
  EXPECT_EQ(r.anomalies.front().kind, "cause");
  EXPECT_EQ(r.anomalies.front().time, kT0 + 2340);
}

TEST(HangJudge, TheTriggeringBurstIsACriticalFindingOfTheHangPlaybookOnItsHostAtItsTime) {
  auto m = two_nodes_after_step_316(300, 100);
  m.network.push_back(NetEvent{.host = "node002",
                               .device = "mlx5_0/1",
                               .metric = "hw_rdma_retx_total",
                               .what = "RDMA retransmits",
                               .time = kT0 + 2340,
                               .amount = 5000,
                               .baseline = 0.1});
  const auto r = judge_hang(m, mi355x());
  const auto burst = std::find_if(r.findings.begin(), r.findings.end(), [](const Finding& f) {
    return f.time_usec == static_cast<int64_t>(kT0 + 2340) * 1000000;
  });
  ASSERT_NE(burst, r.findings.end());
  EXPECT_EQ(burst->source, "metrics:hang");
  EXPECT_EQ(burst->severity, Severity::kCritical);
  EXPECT_EQ(burst->hosts, std::vector<std::string>{"node002"});
  EXPECT_EQ(burst->host, "node002");
  // The judge does not know where the metrics came from: the analysis decides the trust.
  EXPECT_FALSE(burst->trusted);
}

TEST(PlaybookFindings, AFindingOnSeveralHostsNamesThemAllAndNoSingleOne) {
  PlaybookResult r = new_playbook("network-health");
  r.add_finding(Severity::kWarning, "throughput fell", {"node001", "node002"}, std::nullopt);
  ASSERT_EQ(r.findings.size(), 1u);
  const Finding& f = r.findings.front();
  EXPECT_EQ(f.source, "metrics:network-health");
  EXPECT_EQ(f.hosts, (std::vector<std::string>{"node001", "node002"}));
  EXPECT_TRUE(f.host.empty());
  EXPECT_EQ(f.time_usec, 0);
  EXPECT_TRUE(f.cls.empty());
}

TEST(HangJudge, ANodeThatStoppedReportingLeftTheOthersWaitingForIt) {
  auto m = two_nodes_after_step_316(300, 100);
  m.reporting.erase("node002");
  m.last_sample["node002"] = kT0 + 2430;
  m.dead_host_errors.push_back({"hw_gpu_ras_umc_ue_total", "node002:3", "node002", 2});
  const auto r = judge_hang(m, mi355x());
  EXPECT_EQ(r.verdict, "node-death");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node002"});
  EXPECT_TRUE(mentions(r, "last sample")) << r.summary;
  EXPECT_TRUE(mentions(r, "hw_gpu_ras_umc_ue_total rose by 2 on node002:3"));
  EXPECT_EQ(r.anomalies.at(0).time, kT0 + 2430);
  EXPECT_EQ(hang_case(m, mi355x()), HangCase::kNodeDeath);
  EXPECT_EQ(hang_dead_hosts(m, mi355x()), std::vector<std::string>{"node002"});
}

TEST(HangJudge, WhenNoHostReportsAtAllTheMetricsPipelineDiedNotTheJob) {
  auto m = two_nodes_after_step_316(300, 100);
  m.reporting.clear();
  const auto r = judge_hang(m, mi355x());
  EXPECT_EQ(r.verdict, "inconclusive");
  EXPECT_TRUE(mentions(r, "metrics pipeline")) << r.summary;
}

TEST(HangJudge, OneNodeStillAtTrainingPowerWhileTheOtherWaitsIsAStraggler) {
  auto m = two_nodes_after_step_316(300, 100);
  set_host(m, "node001", 880, 100);
  const auto r = judge_hang(m, mi355x());
  EXPECT_EQ(r.verdict, "straggler");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node001"});
}

TEST(HangJudge, GpusStillDrawingTrainingPowerMeanTrainingNeverStopped) {
  const auto r = judge_hang(two_nodes_after_step_316(870, 98), mi355x());
  EXPECT_EQ(r.verdict, "not-a-hang");
  EXPECT_FALSE(r.next_steps.empty());
}

TEST(HangJudge, IdleGpusAtLowUtilisationAreStuckOutsideTheGpu) {
  const auto r = judge_hang(two_nodes_after_step_316(270, 2), mi355x());
  EXPECT_EQ(r.verdict, "idle-hang");
  EXPECT_EQ(hang_case(two_nodes_after_step_316(270, 2), mi355x()), HangCase::kIdle);
}

TEST(HangJudge, AnUnknownGpuModelIsJudgedAgainstItsOwnTrainingPower) {
  // 300 W is a third of the 900 W these GPUs drew while training: idle-level for them.
  const auto r = judge_hang(two_nodes_after_step_316(300, 100), GpuThresholds{});
  EXPECT_EQ(r.verdict, "busy-wait-hang");
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("own training power") != std::string::npos;
  }));
}

TEST(HangJudge, WithoutALastStepTimeThereIsNoHangWindowToJudge) {
  auto m = two_nodes_after_step_316(300, 100);
  m.hang_start.reset();
  EXPECT_EQ(judge_hang(m, mi355x()).verdict, "inconclusive");
  EXPECT_EQ(hang_case(m, mi355x()), HangCase::kNoStart);
}

TEST(HangJudge, AStallThirtySecondsBeforeTheDataEndsIsTooShortToJudge) {
  auto m = two_nodes_after_step_316(300, 100);
  m.hang_start = m.data_end - 30;
  const auto r = judge_hang(m, mi355x());
  EXPECT_EQ(r.verdict, "inconclusive");
  EXPECT_TRUE(mentions(r, "shorter than three scrapes"));
}

// ---- Playbook 2: heartbeat ----

// The coordinator declared node002's tasks dead at 50 minutes into a two-hour job (timeout
// 100 s): its heartbeats stopped at 48:20. `util` and `power` are node002's readings then.
HeartbeatMetrics node002_accused_at_50_minutes(double util, double power) {
  HeartbeatMetrics m;
  m.start = kT0;
  m.end = kT0 + 7200;
  m.job_hosts = {"node001", "node002"};
  m.failure_time = kT0 + 3000;
  m.timeout_s = 100;
  m.accused_in_log = {"node002"};
  m.coordinator_host = "node001";
  m.util["node002"] = util;
  m.power["node002"] = power;
  return m;
}

struct HeartbeatLimits {
  GpuThresholds gpu = mi355x();
  NetworkThresholds net;
  HostThresholds host;
};

PlaybookResult judge(const HeartbeatMetrics& m) {
  const HeartbeatLimits l;
  return judge_heartbeat(m, l.gpu, l.net, l.host);
}

TEST(HeartbeatJudge, AnAccusedHostBusyTrainingWhenItsHeartbeatsStoppedIsAFalsePositive) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.step_at_stop = 300;
  m.step_at_crash = 310;
  const auto r = judge(m);
  EXPECT_EQ(r.verdict, "false-positive");
  EXPECT_EQ(heartbeat_stop(m), kT0 + 2900);
  EXPECT_EQ(r.window_start, kT0 + 2600);
  EXPECT_TRUE(mentions(r, "training advanced from step 300 to 310"));
  EXPECT_FALSE(r.next_steps.empty());
}

TEST(HeartbeatJudge, AnAccusedHostWithIdleGpusWhenItsHeartbeatsStoppedReallyDied) {
  const auto r = judge(node002_accused_at_50_minutes(0, 90));
  EXPECT_EQ(r.verdict, "true-positive");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node002"});
  EXPECT_NE(r.next_steps.at(0).find("--playbook 3,4"), std::string::npos);
}

TEST(HeartbeatJudge, ARetransmitSpikeOnTheAccusedHostKeptItsHeartbeatsFromArriving) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.tcp["node002"] = 400;
  m.tcp_base["node002"] = 2;
  const auto r = judge(m);
  EXPECT_EQ(r.verdict, "false-positive-network");
  EXPECT_TRUE(mentions(r, "TCP retransmits spiked on node002"));
}

TEST(HeartbeatJudge, ACoordinatorDroppingConnectionsIsANetworkFalsePositiveToo) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.listen_drops = 12;
  const auto r = judge(m);
  EXPECT_EQ(r.verdict, "false-positive-network");
  EXPECT_TRUE(mentions(r, "the coordinator dropped 12 incoming connections"));
  EXPECT_EQ(r.anomalies.at(0).host, "node001");
}

TEST(HeartbeatJudge, ACheckpointWritebackBacklogStalledTheHeartbeatThread) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.dirty["node002"] = 12 * kGiB;
  const auto r = judge(m);
  EXPECT_EQ(r.verdict, "false-positive-io");
}

TEST(HeartbeatJudge, AnAccusedHostWithoutMetricsMeansEveryHostIsChecked) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.accused_in_log = {"node009"};
  m.util["node001"] = 95;
  EXPECT_EQ(heartbeat_hosts(m), (std::vector<std::string>{"node001", "node002"}));
  const auto r = judge(m);
  EXPECT_NE(r.notes.at(0).find("none of the accused hosts (node009)"), std::string::npos);
}

TEST(HeartbeatJudge, WithoutACrashTimeThereIsNoHeartbeatStopToLookAt) {
  auto m = node002_accused_at_50_minutes(97, 880);
  m.failure_time.reset();
  EXPECT_EQ(judge(m).verdict, "inconclusive");
  EXPECT_FALSE(heartbeat_judgeable(m));
}

// ---- Playbook 3: oom ----

HostThresholds host_limits() {
  return HostThresholds{};
}

// A 512 GiB host sampled every 15 s for an hour; `gib(t)` is its used memory at t seconds.
template <typename F>
HostMemory host_memory(const std::string& host, F gib) {
  HostMemory h{host, {}};
  for (int i = 0; i <= 240; ++i) {
    const double t = 15.0 * i;
    h.used.push_back({kT0 + t, gib(t) * kGiB});
  }
  return h;
}

OomMetrics one_hour_on(std::vector<HostMemory> hosts) {
  OomMetrics m;
  m.start = kT0;
  m.end = kT0 + 3600;
  m.have_memory = true;
  for (auto& h : hosts) {
    m.totals[h.host] = 512 * kGiB;
    m.memory.push_back(std::move(h));
  }
  return m;
}

TEST(OomJudge, ANodeWhoseRssClimbedSteadilyToTheLimitBeforeTheKillLeaked) {
  auto m = one_hour_on({host_memory("node001", [](double t) { return 100 + 400 * t / 3600; }),
                        host_memory("node002", [](double) { return 120.0; })});
  m.kills["node001"] = 1;
  m.kill_time["node001"] = kT0 + 3590;
  m.failure_time = kT0 + 3600;
  const auto r = judge_oom(m, host_limits());
  EXPECT_EQ(r.verdict, "memory-leak-ramp");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node001"});
  ASSERT_EQ(r.tables.size(), 1u);
  EXPECT_EQ(r.tables[0].rows[0][0], "node001") << "the killed host comes first";
  const bool kill_symptom = std::any_of(r.anomalies.begin(), r.anomalies.end(), [](const auto& a) {
    return a.kind == "symptom" && a.time == kT0 + 3590;
  });
  EXPECT_TRUE(kill_symptom);
}

TEST(OomJudge, MemoryThatJumpedAtTheCheckpointSave40sBeforeTheKillIsACheckpointSpike) {
  // Flat at 200 GiB, then the save at 50 minutes copies the parameters: +250 GiB in a minute.
  auto m =
      one_hour_on({host_memory("node001",
                               [](double t) {
                                 return t < 3000 ? 200.0 : std::min(450.0, 200 + (t - 3000) * 4);
                               }),
                   host_memory("node002", [](double) { return 200.0; })});
  m.checkpoints.push_back({kT0 + 2990, kT0 + 3100});
  m.kills["node001"] = 1;
  m.kill_time["node001"] = kT0 + 3102;
  const auto r = judge_oom(m, host_limits());
  EXPECT_EQ(r.verdict, "checkpoint-spike");
  EXPECT_TRUE(mentions(r, "Only node001 spike at checkpoints")) << r.summary;
}

TEST(OomJudge, TheOomKillerOnEveryHostWithinAMinuteIsAJobWideCause) {
  auto flat = [](double) { return 300.0; };
  auto m = one_hour_on(
      {host_memory("node001", flat), host_memory("node002", flat), host_memory("node003", flat)});
  m.step = 15;
  for (const char* h : {"node001", "node002", "node003"}) {
    m.kills[h] = 1;
    m.kill_time[h] = kT0 + 3000;
  }
  m.kill_time["node003"] = kT0 + 3030;
  const auto r = judge_oom(m, host_limits());
  EXPECT_EQ(r.verdict, "all-hosts");
  EXPECT_EQ(r.hosts.size(), 3u);
}

TEST(OomJudge, ABurstOutsideAnyCheckpointFromAFlatBaselineIsASingleSpike) {
  // 150 GiB all along but for two minutes at half past, long after the only checkpoint save.
  auto m = one_hour_on(
      {host_memory("node001", [](double t) { return t >= 1800 && t < 1920 ? 400.0 : 150.0; })});
  m.checkpoints.push_back({kT0 + 600, kT0 + 700});
  m.kills["node001"] = 1;
  const auto r = judge_oom(m, host_limits());
  EXPECT_EQ(r.verdict, "single-spike");
  EXPECT_TRUE(mentions(r, "outside any checkpoint save")) << r.summary;
}

TEST(OomJudge, HostMemoryFarFromFullAndNoKillPointAtACgroupLimit) {
  const auto r =
      judge_oom(one_hour_on({host_memory("node001", [](double) { return 100.0; })}), host_limits());
  EXPECT_EQ(r.verdict, "no-host-memory-pressure");
  EXPECT_FALSE(r.next_steps.empty());
}

TEST(OomJudge, SpikesThatRecurEveryTenMinutesAndRecoverAreInferredCheckpointSaves) {
  // +200 GiB for two minutes every ten minutes, back to 150 GiB after each; no checkpoint period.
  auto m = one_hour_on({host_memory("node001", [](double t) {
    const double in_period = t - 600 * static_cast<int>(t / 600);
    return in_period >= 300 && in_period < 420 ? 350.0 : 150.0;
  })});
  const auto r = judge_oom(m, host_limits());
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("checkpoint saves, inferred") != std::string::npos;
  }));
  EXPECT_EQ(r.verdict, "checkpoint-spike");
  EXPECT_TRUE(mentions(r, "earlier checkpoint saves spiked too and recovered")) << r.summary;
}

TEST(OomJudge, DirtyPagesPiledUpNearTheKillAreAWritebackBacklog) {
  auto m = one_hour_on({host_memory("node001", [](double t) { return 100 + 400 * t / 3600; })});
  m.kills["node001"] = 1;
  m.around["node001"]["hw_mem_dirty_bytes"] = 20 * kGiB;
  m.around["node001"]["hw_io_pressure_full_pct"] = 70;
  const auto r = judge_oom(m, host_limits());
  EXPECT_TRUE(mentions(r, "writeback backlog"));
  EXPECT_TRUE(mentions(r, "I/O pressure on node001"));
  EXPECT_EQ(r.tables[0].rows[0].back(), "20.0 GiB / 70%");
}

TEST(OomJudge, WithoutHostMemoryMetricsOnlyTheKilledHostsCanBeNamed) {
  OomMetrics m;
  m.kills["node004"] = 2;
  const auto r = judge_oom(m, host_limits());
  EXPECT_EQ(r.verdict, "inconclusive");
  EXPECT_EQ(r.hosts, std::vector<std::string>{"node004"});
}

// ---- Playbook 4: hardware ----

// A four-node job of two hours, read from the job's own (untrusted) TSDB.
HardwareMetrics four_nodes_for_two_hours() {
  HardwareMetrics m;
  m.start = kT0;
  m.end = kT0 + 7200;
  m.hosts = {"node001", "node002", "node003", "node004"};
  return m;
}

const HardwareVerdict* verdict_for(const HardwareJudgement& j, const std::string& host) {
  for (const auto& v : j.verdicts) {
    if (v.host == host) return &v;
  }
  return nullptr;
}

TEST(HardwareJudge, TwoUncorrectableHbmErrorsOnOneGpuDrainItsNode) {
  auto m = four_nodes_for_two_hours();
  m.counters.push_back({"hw_gpu_ras_umc_ue_total", "node003", "5", 2, kT0 + 4000});
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(j.result.verdict, "hardware-fault");
  EXPECT_EQ(j.result.hosts, std::vector<std::string>{"node003"});
  EXPECT_EQ(j.result.gpus, std::vector<std::string>{"node003:5"});
  EXPECT_TRUE(mentions(j.result, "The other 3 host(s) are clean")) << j.result.summary;
  const auto* v = verdict_for(j, "node003");
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->action, "drain");
  EXPECT_EQ(v->reason, "2 uncorrectable HBM ECC errors on node003 GPU 5");
  EXPECT_FALSE(v->source_trusted) << "a job's own TSDB is evidence, not an order";
  EXPECT_EQ(j.result.anomalies.at(0).time, kT0 + 4000);
}

TEST(HardwareJudge, CorrectableErrorsAtAThousandAnHourAreAPartDegradingNotAFault) {
  auto m = four_nodes_for_two_hours();
  m.source_trusted = true;
  m.counters.push_back({"hw_gpu_ras_umc_ce_total", "node002", "1", 2000, std::nullopt});
  m.counters.push_back({"hw_gpu_ras_umc_ce_total", "node004", "0", 3, std::nullopt});
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(j.result.verdict, "no-hardware-fault");
  ASSERT_EQ(j.verdicts.size(), 1u) << "three correctable errors are only accumulating";
  EXPECT_EQ(j.verdicts[0].verdict, "degrading");
  EXPECT_EQ(j.verdicts[0].action, "watch");
  EXPECT_TRUE(j.verdicts[0].source_trusted);
  ASSERT_EQ(j.result.tables.size(), 1u);
  EXPECT_EQ(j.result.tables[0].rows[1].back(), "accumulating");
}

TEST(HardwareJudge, DriverErrorsWithAPluginTimingOutAtTwelveSecondsAreTheCperDriverFault) {
  auto m = four_nodes_for_two_hours();
  m.dmesg_errors["node001"] = 14;
  m.slow_fraction["node001"] = 0.3;
  m.fast_fraction["node001"] = 0.7;
  m.scrape_p90["node001"] = 12.1;
  m.power_gaps["node001"] = 0.25;
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(j.result.verdict, "driver-fault");
  EXPECT_TRUE(mentions(j.result, "the GPU plugin timed out on 30% of scrapes (~12 s"))
      << j.result.findings.at(0).text;
  EXPECT_TRUE(mentions(j.result, "25% of GPU power samples missing"));
  ASSERT_NE(verdict_for(j, "node001"), nullptr);
  EXPECT_EQ(verdict_for(j, "node001")->action, "reboot-at-job-boundary");
}

TEST(HardwareJudge, ARdmaPortThatWentDownIsALinkFaultFromTheMomentItDropped) {
  auto m = four_nodes_for_two_hours();
  m.ports_down.push_back({"node002", "mlx5_1/1", kT0 + 1800});
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(j.result.verdict, "hardware-fault");
  EXPECT_EQ(verdict_for(j, "node002")->verdict, "link-fault");
  EXPECT_EQ(j.result.anomalies.at(0).time, kT0 + 1800);
  EXPECT_EQ(j.result.anomalies.at(0).domain, "network");
}

TEST(HardwareJudge, AGpuAt105DegreesTenMinutesBeforeTheCrashIsTheFault) {
  auto m = four_nodes_for_two_hours();
  m.failure_time = kT0 + 6600;
  m.hot_gpus.push_back({"node004", "2", 105, kT0 + 6000});
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(j.result.verdict, "hardware-fault");
  EXPECT_EQ(verdict_for(j, "node004")->verdict, "hardware-fault");
  EXPECT_NE(verdict_for(j, "node004")->reason.find("within 15 minutes before the failure"),
            std::string::npos);
  // The same excursion an hour before the failure only asks for a watch.
  m.hot_gpus[0].first_hot = kT0 + 2000;
  const auto earlier = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_EQ(earlier.result.verdict, "no-hardware-fault");
  EXPECT_EQ(verdict_for(earlier, "node004")->verdict, "degrading");
}

TEST(HardwareJudge, AStuckExporterAtTheFailureTimeMakesThatHostsReadingsGhostData) {
  auto m = four_nodes_for_two_hours();
  m.failure_time = kT0 + 5000;
  m.ghosts.push_back({"node003", {{kT0 + 4000, kT0 + 6000}}, true});
  const auto j = judge_hardware(m, GpuThresholds{}, MonitoringThresholds{});
  EXPECT_TRUE(mentions(j.result, "GPU power held the exact same value too"));
  ASSERT_EQ(j.result.notes.size(), 1u);
  EXPECT_NE(j.result.notes[0].find("ghost data"), std::string::npos);
}

// ---- Playbook 5: GPU health ----

// Eight GPUs on two nodes that trained at 850 W, 75 °C, 2100 MHz and 95 % utilisation.
GpuHealthMetrics eight_even_gpus() {
  GpuHealthMetrics m;
  m.start = kT0;
  m.end = kT0 + 7200;
  m.nodes = 2;
  for (const char* host : {"node001", "node002"}) {
    for (const char* gpu : {"0", "1", "2", "3"}) {
      const std::string k = std::string(host) + ":" + gpu;
      m.temp[k] = {60, 78, 75};
      m.power[k] = {300, 900, 850};
      m.sclk[k] = {1800, 2100, 2100};
      m.util[k] = {0, 100, 95};
    }
  }
  return m;
}

TEST(GpuHealthJudge, EightGpusThatTrainedAlikeAreHealthy) {
  const auto r = judge_gpu_health(eight_even_gpus(), mi355x());
  EXPECT_EQ(r.verdict, "healthy");
  EXPECT_EQ(r.summary, "All 8 GPUs stayed within their limits and close to each other.");
  EXPECT_EQ(r.tables.at(0).title, "GPU health summary (2 nodes, 8 GPUs)");
}

TEST(GpuHealthJudge, OneGpuClockedDownAndHotterThanTheRestStandsOut) {
  auto m = eight_even_gpus();
  m.sclk["node002:3"].avg = 1500;
  m.temp["node002:3"].max = 103;
  m.errors.push_back({"node002:3", "umc ce", GpuErrorRise::kRasCorrectable, 40});
  const auto r = judge_gpu_health(m, mi355x());
  EXPECT_EQ(r.verdict, "anomalies");
  EXPECT_EQ(r.gpus, std::vector<std::string>{"node002:3"});
  ASSERT_EQ(r.tables.size(), 2u);
  EXPECT_EQ(r.tables[1].rows.at(0).back(),
            "temperature 103C (throttling); core clock 1500MHz vs. median 2100MHz; errors: umc "
            "ce +40");
  EXPECT_EQ(r.tables[0].rows.at(5).at(1), "40 correctable, 0 uncorrectable");
}

TEST(GpuHealthJudge, NoGpuMetricsAtAllIsInconclusive) {
  EXPECT_EQ(judge_gpu_health(GpuHealthMetrics{}, mi355x()).verdict, "inconclusive");
}

// ---- Playbook 6: network health ----

NetworkMetrics network_of_four_nodes() {
  NetworkMetrics m;
  m.start = kT0;
  m.end = kT0 + 7200;
  m.job_hosts = 4;
  return m;
}

TEST(NetworkJudge, RetryExhaustionOnOneNodeAndSustainedRetransmitsOnAnotherAreExcludedInThatOrder) {
  auto m = network_of_four_nodes();
  NetHost& lossy = m.hosts["node003"];
  lossy.retry_excd = 7;
  lossy.devices = {"mlx5_2/1"};
  lossy.first = kT0 + 3000;
  NetHost& slow = m.hosts["node001"];
  slow.retx_max = 40;
  slow.retx_sustained_s = 900;
  m.hosts["node002"].tcp_max = 50;
  m.hosts["node002"].tcp_sustained_s = 1200;
  const auto j = judge_network(m, NetworkThresholds{}, {});
  EXPECT_EQ(j.result.verdict, "rdma-link-failure");
  EXPECT_EQ(j.result.hosts, std::vector<std::string>{"node003"});
  ASSERT_EQ(j.result.tables.size(), 1u);
  const auto& rows = j.result.tables[0].rows;
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0][1], "node003");
  EXPECT_EQ(rows[1][1], "node001");
  EXPECT_EQ(rows[2].back(), "no") << "a TCP-only node is never excluded";
  EXPECT_EQ(j.result.next_steps.at(0).rfind("Resubmit with --exclude=node003,node001", 0), 0u);
  ASSERT_EQ(j.verdicts.size(), 2u);
  EXPECT_EQ(j.verdicts[0].action, "drain");
  EXPECT_EQ(j.verdicts[1].action, "exclude-from-jobs");
  EXPECT_EQ(j.result.anomalies.at(0).time, kT0 + 3000);
}

TEST(NetworkJudge, APortTheHardwarePlaybookAlreadyReportedDownGetsNoSecondVerdict) {
  auto m = network_of_four_nodes();
  m.hosts["node004"].port_down = true;
  HardwareVerdict earlier;
  earlier.host = "node004";
  earlier.metric = "hw_rdma_port_state";
  const auto j = judge_network(m, NetworkThresholds{}, {earlier});
  EXPECT_EQ(j.result.verdict, "rdma-link-failure");
  EXPECT_TRUE(j.verdicts.empty());
}

TEST(NetworkJudge, ThroughputLowerWhileADegradedLinkRetransmittedIsNamed) {
  auto m = network_of_four_nodes();
  NetHost& slow = m.hosts["node001"];
  slow.retx_max = 40;
  slow.retx_sustained_s = 900;
  for (int i = 0; i < 20; ++i) {
    const double t = kT0 + 60.0 * i;
    if (i < 10) slow.retx_times.push_back(t);
    m.tokens_per_s.push_back({t, i < 10 ? 4000.0 : 5000.0});
  }
  const auto j = judge_network(m, NetworkThresholds{}, {});
  EXPECT_EQ(j.result.verdict, "rdma-degraded");
  EXPECT_TRUE(mentions(j.result, "throughput was 20% lower while node001 retransmitted"));
}

TEST(NetworkJudge, ACleanFabricIsHealthy) {
  const auto j = judge_network(network_of_four_nodes(), NetworkThresholds{}, {});
  EXPECT_EQ(j.result.verdict, "healthy");
  EXPECT_NE(j.result.summary.find("any of the 4 hosts"), std::string::npos);
  EXPECT_EQ(exclusion_priority(NetHost{}, 300), 0);
}

// ---- Playbook 7: training stability ----

// 200 steps, one every 10 s from the job's start, all real samples (the staleness fill is 0);
// `loss(step)` and `step_time(step)` give each step's values, tokens/s stays at 5000.
template <typename Loss, typename StepTime>
TrainingMetrics two_hundred_steps(Loss loss, StepTime step_time) {
  TrainingMetrics m;
  m.start = kT0;
  m.end = kT0 + 2000;
  m.tb_host = "node001";
  m.first_step = 1;
  m.last_step = 200;
  m.have_fill = true;
  for (int s = 1; s <= 200; ++s) {
    const double t = kT0 + 10.0 * s;
    m.step[t] = s;
    m.fill[t] = 0;
    m.loss[t] = loss(s);
    m.step_time[t] = step_time(s);
    m.tokens_per_s[t] = 5000;
  }
  return m;
}

double smooth_loss(int step) {
  return 3.0 - 0.002 * step + 0.001 * (step % 3);
}
double steady_one_second(int) {
  return 1.0;
}

TEST(TrainingJudge, ALossThatTurnsNanAtStep150IsTheRootCause) {
  auto m = two_hundred_steps(smooth_loss, steady_one_second);
  m.loss[kT0 + 1500] = std::numeric_limits<double>::quiet_NaN();
  const auto r = judge_training(m, TrainingThresholds{});
  EXPECT_EQ(r.verdict, "loss-divergence");
  ASSERT_FALSE(r.anomalies.empty());
  EXPECT_EQ(r.anomalies[0].text, "loss became NaN at step 150");
  EXPECT_EQ(r.anomalies[0].kind, "cause");
}

TEST(TrainingJudge, SlowStepsEveryFiftyStepsAreCheckpointSavesNotIncidents) {
  const auto r =
      judge_training(two_hundred_steps(smooth_loss, [](int s) { return s % 50 == 0 ? 30.0 : 1.0; }),
                     TrainingThresholds{});
  EXPECT_EQ(r.verdict, "stable");
  EXPECT_TRUE(std::any_of(r.notes.begin(), r.notes.end(), [](const std::string& n) {
    return n.find("every 50 steps") != std::string::npos;
  }));
  EXPECT_TRUE(mentions(r, "4 slow step(s) at checkpoint saves"));
}

TEST(TrainingJudge, ThroughputThatFellByAThirdAndStayedDownIsARegression) {
  auto m = two_hundred_steps(smooth_loss, steady_one_second);
  for (auto& [t, v] : m.tokens_per_s) {
    if (t >= kT0 + 1200) v = 3300;
  }
  const auto r = judge_training(m, TrainingThresholds{});
  EXPECT_EQ(r.verdict, "throughput-regression");
  EXPECT_NE(r.anomalies.at(0).text.find("from step 120"), std::string::npos)
      << r.anomalies.at(0).text;
}

TEST(TrainingJudge, StaleFillSamplesAreLeftOutBeforeAnythingIsJudged) {
  // The bridge repeated a stale huge loss while the trainer was away: fill = 1, not real.
  auto m = two_hundred_steps(smooth_loss, steady_one_second);
  m.loss[kT0 + 1000] = 50;
  m.fill[kT0 + 1000] = 1;
  const auto r = judge_training(m, TrainingThresholds{});
  EXPECT_EQ(r.verdict, "stable");
  // The fill marks the whole scrape: its loss, step time and throughput samples all go.
  EXPECT_EQ(r.tables.at(0).rows.at(1).back(), "3");
}

TEST(TrainingJudge, WithoutATbStepSeriesThereIsNothingToJudge) {
  EXPECT_EQ(judge_training(TrainingMetrics{}, TrainingThresholds{}).verdict, "no-training-metrics");
}

}  // namespace
}  // namespace triage::tsdb
