// One situation per verdict: a job's metrics written as OpenMetrics, turned into TSDB blocks by
// promtool, read back through a private prometheus started by the launcher.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

using Opt = std::optional<double>;

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

bool any_text(const PlaybookResult& p, const std::string& needle) {
  for (const auto& f : p.findings) {
    if (f.text.find(needle) != std::string::npos) return true;
  }
  return p.summary.find(needle) != std::string::npos;
}

class PlaybookTest : public TsdbTest {
 protected:
  // The coordination service declared node002's tasks dead at 50 minutes (timeout 100 s).
  TsdbRequest heartbeat_request(const Scenario& sc) const {
    auto req = request(sc, "heartbeat-timeout");
    req.failure_time = sc.at(3000);
    req.heartbeat_timeout_s = 100;
    req.accused_hosts = {"node002"};
    return req;
  }
};

// ---- Playbook 1: hang ----

TEST_F(PlaybookTest, AllGpusSpinningAtIdlePowerAfterTheLastStepIsABusyWaitHang) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 2400});
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "hang"));
  ASSERT_TRUE(res.available) << dump(res);
  EXPECT_EQ(res.guard.status, "match") << res.guard.reason;
  EXPECT_EQ(res.gpu.model, "MI355X");
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "busy-wait-hang") << dump(res);
  EXPECT_EQ(p.gpus.size(), 4u);
  EXPECT_EQ(res.correlation.stance, "confirms");
  // The 90M since-boot RDMA retransmits are history, not a network trigger.
  EXPECT_EQ(playbook(res, "network-health").verdict, "healthy") << dump(res);
  EXPECT_EQ(res.source.kind, "job-tsdb");
  EXPECT_FALSE(res.timeline.power.empty());
}

TEST_F(PlaybookTest, ARetransmitBurstJustBeforeTheStallMakesItANetworkTriggeredHang) {
  // Training stops after 20 minutes; the job hangs for 40 more until it is cancelled.
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 1200});
  const double burst = sc.at(1200 - 180);
  auto retx = sc.base("hw_rdma_tx_retx_pkts_total");
  sc.set("hw_rdma_tx_retx_pkts_total", [=](const SeriesKey& k, double t) -> Opt {
    const double v = *retx(k, t);
    if (k.host != "node002" || k.device != "mlx5_1" || t < burst) return v;
    return v + (t - burst) * 4000;
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "hang");
  req.failure_time = sc.end();  // the scancel, long after the stall
  const auto res = analyse(req);
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "network-triggered-hang") << dump(res);
  EXPECT_TRUE(contains(p.hosts, "node002"));
  ASSERT_TRUE(res.chain.root.has_value());
  EXPECT_EQ(res.chain.root->domain, "network");
  EXPECT_EQ(res.chain.root->host, "node002");
  EXPECT_LT(res.chain.root->time, sc.at(1200));
}

TEST_F(PlaybookTest, ANodeThatStopsReportingWhileTheOthersWaitIsANodeDeath) {
  Scenario sc({.hosts = {"node001", "node002", "node003"}, .stop_after_s = 2400});
  sc.silence("node003", sc.at(2390));
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "hang"));
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "node-death") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node003"});
  EXPECT_EQ(res.correlation.stance, "refines");
  ASSERT_TRUE(res.chain.root.has_value());
  EXPECT_EQ(res.chain.root->host, "node003");
}

TEST_F(PlaybookTest, GpusStillDrawingTrainingPowerAreNotAHang) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 2400});
  // A very long step (an evaluation pass): no new step, but the GPUs keep computing.
  sc.set("hw_gpu_power_watts",
         [&](const SeriesKey& k, double t) -> Opt { return 885 + 10 * Scenario::jitter(k, t); });
  sc.set("ray_node_gpus_utilization",
         [&](const SeriesKey& k, double t) -> Opt { return 97 + Scenario::jitter(k, t); });
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "hang"));
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "not-a-hang") << dump(res);
  EXPECT_EQ(res.correlation.stance, "refutes");
}

TEST_F(PlaybookTest, OneHostComputingWhileTheRestBusyWaitIsAStraggler) {
  Scenario sc({.hosts = {"node001", "node002", "node003"}, .stop_after_s = 2400});
  auto power = sc.base("hw_gpu_power_watts");
  const double stop = sc.stop();
  sc.set("hw_gpu_power_watts", [=](const SeriesKey& k, double t) -> Opt {
    if (k.host == "node002" && t >= stop) return 870 + 10 * Scenario::jitter(k, t);
    return power(k, t);
  });
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "hang"));
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "straggler") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node002"});
}

TEST_F(PlaybookTest, IdleGpusThatAreNotSpinningAreAHostSideStall) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 2400});
  const double stop = sc.stop();
  auto power = sc.base("hw_gpu_power_watts");
  sc.set("hw_gpu_power_watts", [=](const SeriesKey& k, double t) -> Opt {
    return t >= stop ? Opt(262 + 3 * Scenario::jitter(k, t)) : power(k, t);
  });
  auto util = sc.base("ray_node_gpus_utilization");
  sc.set("ray_node_gpus_utilization",
         [=](const SeriesKey& k, double t) -> Opt { return t >= stop ? Opt(0) : util(k, t); });
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "hang"));
  const auto& p = playbook(res, "hang");
  EXPECT_EQ(p.verdict, "idle-hang") << dump(res);
}

// ---- Playbook 2: heartbeat ----

TEST_F(PlaybookTest, AccusedTasksBusyTrainingAtTheHeartbeatStopAreAFalsePositive) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 3000});
  sc.build_tsdb(job_dir());
  const auto res = analyse(heartbeat_request(sc));
  const auto& p = playbook(res, "heartbeat");
  EXPECT_EQ(p.verdict, "false-positive") << dump(res);
  EXPECT_EQ(res.correlation.stance, "confirms");
  EXPECT_TRUE(any_text(p, "training advanced")) << dump(res);
}

TEST_F(PlaybookTest, ATcpRetransmitSpikeOnTheAccusedHostMakesItANetworkFalsePositive) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 3000});
  const double hb_stop = sc.at(3000 - 100);
  auto tcp = sc.base("hw_tcp_retransmits_total");
  sc.set("hw_tcp_retransmits_total", [=](const SeriesKey& k, double t) -> Opt {
    const double v = *tcp(k, t);
    if (k.host != "node002" || t < hb_stop - 150) return v;
    return v + (std::min(t, hb_stop + 30) - (hb_stop - 150)) * 2500;
  });
  sc.build_tsdb(job_dir());
  const auto res = analyse(heartbeat_request(sc));
  const auto& p = playbook(res, "heartbeat");
  EXPECT_EQ(p.verdict, "false-positive-network") << dump(res);
}

TEST_F(PlaybookTest, AnAccusedHostThatWentSilentBeforeTheTimeoutIsATruePositive) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 3000});
  sc.silence("node002", sc.at(3000 - 400));
  sc.build_tsdb(job_dir());
  const auto res = analyse(heartbeat_request(sc));
  const auto& p = playbook(res, "heartbeat");
  EXPECT_EQ(p.verdict, "true-positive") << dump(res);
  EXPECT_EQ(res.correlation.stance, "refutes");
}

// ---- Playbook 3: host OOM ----

TEST_F(PlaybookTest, MemorySpikesAtCheckpointSavesOnReplicaZeroEndInACheckpointOom) {
  // A checkpoint every 20 steps (~10 min); the save doubles the model in host RAM on node001.
  Scenario sc(
      {.hosts = {"node001", "node002", "node003"}, .checkpoint_period = 20, .stop_after_s = 3300});
  const double crash = sc.stop();
  const double gib = 1024.0 * 1024 * 1024;
  auto mem = sc.base("ray_node_mem_used");
  int64_t last_ckpt = 0;
  for (const auto& [s, t] : sc.steps()) {
    if (s > 0 && s % 20 == 0) last_ckpt = s;
  }
  ASSERT_GE(last_ckpt, 60);
  sc.set("ray_node_mem_used", [=, &sc](const SeriesKey& k, double t) -> Opt {
    const double v = *mem(k, t);
    if (k.host != "node001" || !sc.in_checkpoint(t)) return v;
    const bool final_save = sc.step_at(t) == last_ckpt;
    return v + (final_save ? 1060 : 560) * gib;  // 30% + 69% = 99% of 1.5 TiB on the last save
  });
  sc.set("hw_oom_kills_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node001" && t >= crash ? 3 : 2;
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "oom-host");
  req.failure_time = crash;
  const auto res = analyse(req);
  const auto& p = playbook(res, "oom");
  EXPECT_EQ(p.verdict, "checkpoint-spike") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node001"});
  EXPECT_NE(p.summary.find("DP replica 0"), std::string::npos) << p.summary;
  EXPECT_EQ(res.correlation.stance, "confirms");
}

TEST_F(PlaybookTest, MemoryThatOnlyGrowsIsALeak) {
  Scenario sc({.hosts = {"node001", "node002"}, .stop_after_s = 3500});
  const double gib = 1024.0 * 1024 * 1024;
  const double t0 = sc.start();
  sc.set("ray_node_mem_used", [=](const SeriesKey& k, double t) -> Opt {
    const double frac = k.host == "node002" ? 0.3 + 0.68 * (t - t0) / 3500 : 0.3;
    return std::round((frac + 0.002 * Scenario::jitter(k, t)) * 1536 * gib);
  });
  sc.set("hw_oom_kills_total", [=, &sc](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && t >= sc.stop() ? 3 : 2;
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "oom-host");
  req.failure_time = sc.stop();
  const auto res = analyse(req);
  const auto& p = playbook(res, "oom");
  EXPECT_EQ(p.verdict, "memory-leak-ramp") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node002"});
}

// ---- Playbook 4: node / hardware ----

TEST_F(PlaybookTest, AnUncorrectableEccErrorOnOneGpuIsAHardwareFaultOfThatGpu) {
  Scenario sc({.hosts = {"node001", "node002", "node003"}, .stop_after_s = 2000});
  const double when = sc.at(1800);
  auto ue = sc.base("hw_gpu_ras_umc_ue_total");
  sc.set("hw_gpu_ras_umc_ue_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && k.gpu == 1 && t >= when ? 3 : *ue(k, t);
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "node-fail");
  req.failure_time = sc.stop();
  const auto res = analyse(req);
  const auto& p = playbook(res, "hardware");
  EXPECT_EQ(p.verdict, "hardware-fault") << dump(res);
  EXPECT_EQ(p.gpus, std::vector<std::string>{"node002:1"});
  ASSERT_FALSE(res.hardware.empty());
  EXPECT_EQ(res.hardware.front().host, "node002");
  EXPECT_EQ(res.hardware.front().action, "drain");
  EXPECT_FALSE(res.hardware.front().source_trusted);  // a job's own TSDB is user-writable
  ASSERT_TRUE(res.hardware.front().first_seen.has_value());
  EXPECT_NEAR(*res.hardware.front().first_seen, when, 120);
  const auto nv = res.node_verdicts();
  ASSERT_EQ(nv.size(), 1u);
  EXPECT_EQ(nv.front().verdict, "drain-recommended");
  // The since-boot correctable counts (37 per GPU) did not move: no CE finding anywhere.
  for (const auto& v : res.hardware)
    EXPECT_EQ(v.metric.find("_ce_"), std::string::npos) << v.reason;
}

TEST_F(PlaybookTest, AFlatScrapeDurationMarksTheHostsHardwareDataAsGhostData) {
  Scenario sc({.hosts = {"node001", "node002"}});
  const double from = sc.at(1200);
  auto scrape = sc.base("hw_scrape_duration_seconds");
  sc.set("hw_scrape_duration_seconds", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && t >= from ? 0.137 : *scrape(k, t);
  });
  auto power = sc.base("hw_gpu_power_watts");
  sc.set("hw_gpu_power_watts", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && t >= from ? 612.0 : *power(k, t);
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "signal-kill");
  const auto res = analyse(req);
  const auto& p = playbook(res, "hardware");
  EXPECT_EQ(p.verdict, "no-hardware-fault") << dump(res);
  EXPECT_TRUE(any_text(p, "ghost data")) << dump(res);
  EXPECT_TRUE(any_text(p, "exact same value")) << dump(res);
  bool named = false;
  for (const auto& f : p.findings)
    named = named || (f.text.find("ghost") != std::string::npos &&
                      f.hosts == std::vector<std::string>{"node002"});
  EXPECT_TRUE(named);
}

TEST_F(PlaybookTest, DmesgErrorsWithIntermittentTwelveSecondScrapesAreAnAmdgpuDriverFault) {
  Scenario sc({.hosts = {"node001", "node002"}});
  const double from = sc.at(600);
  auto scrape = sc.base("hw_scrape_duration_seconds");
  auto slow = [=](double t) { return t >= from && static_cast<int64_t>((t - from) / 15) % 3 == 0; };
  sc.set("hw_scrape_duration_seconds", [=](const SeriesKey& k, double t) -> Opt {
    if (k.host != "node002") return scrape(k, t);
    return slow(t) ? 12.05 + 0.02 * Scenario::jitter(k, t) : 0.4 + 0.1 * Scenario::jitter(k, t);
  });
  auto power = sc.base("hw_gpu_power_watts");
  sc.set("hw_gpu_power_watts", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && slow(t) ? std::nullopt : power(k, t);
  });
  sc.set("hw_dmesg_gpu_errors_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && t >= from ? std::floor((t - from) / 60) + 1 : 0;
  });
  sc.build_tsdb(job_dir());
  const auto res = analyse(request(sc, "signal-kill"));
  const auto& p = playbook(res, "hardware");
  EXPECT_EQ(p.verdict, "driver-fault") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node002"});
  ASSERT_EQ(res.hardware.size(), 1u) << dump(res);
  EXPECT_EQ(res.hardware.front().action, "reboot-at-job-boundary");
  EXPECT_NE(res.hardware.front().reason.find("timed out"), std::string::npos)
      << res.hardware.front().reason;
}

// ---- Playbook 6: network ----

TEST_F(PlaybookTest, RdmaRetryExhaustionRanksFirstAndTcpOnlyNodesAreNeverExcluded) {
  Scenario sc({.hosts = {"node001", "node002", "node003", "node004"}});
  const double t0 = sc.at(900);
  auto excd = sc.base("hw_rdma_req_tx_retry_excd_err_total");
  sc.set("hw_rdma_req_tx_retry_excd_err_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node003" && k.device == "mlx5_0" && t >= t0 ? *excd(k, t) + 5 : *excd(k, t);
  });
  auto retx = sc.base("hw_rdma_tx_retx_pkts_total");
  sc.set("hw_rdma_tx_retx_pkts_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && k.device == "mlx5_1" && t >= t0 ? *retx(k, t) + (t - t0) * 200
                                                                  : *retx(k, t);
  });
  auto ack = sc.base("hw_rdma_tx_ack_timeout_total");
  sc.set("hw_rdma_tx_ack_timeout_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node002" && k.device == "mlx5_1" && t >= t0
               ? *ack(k, t) + std::floor((t - t0) / 300)
               : *ack(k, t);
  });
  auto tcp = sc.base("hw_tcp_retransmits_total");
  sc.set("hw_tcp_retransmits_total", [=](const SeriesKey& k, double t) -> Opt {
    return k.host == "node004" && t >= t0 ? *tcp(k, t) + (t - t0) * 50 : *tcp(k, t);
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "nccl-timeout");
  const auto res = analyse(req);
  const auto& p = playbook(res, "network-health");
  EXPECT_EQ(p.verdict, "rdma-link-failure") << dump(res);
  EXPECT_EQ(p.hosts, std::vector<std::string>{"node003"});
  ASSERT_FALSE(p.tables.empty());
  const auto& rows = p.tables.front().rows;
  ASSERT_EQ(rows.size(), 3u) << dump(res);
  EXPECT_EQ(rows[0][1], "node003");
  EXPECT_EQ(rows[1][1], "node002");
  EXPECT_EQ(rows[2][1], "node004");
  EXPECT_EQ(rows[0].back(), "yes");
  EXPECT_EQ(rows[1].back(), "yes");
  EXPECT_EQ(rows[2].back(), "no");
  EXPECT_EQ(res.correlation.stance, "confirms");
}

// ---- Playbook 7: training ----

TEST_F(PlaybookTest, ANanLossIsTheRootCauseAndCheckpointStepsAreNotAnomalies) {
  Scenario sc({.hosts = {"node001", "node002"}, .checkpoint_period = 20});
  int64_t bad = -1;
  for (const auto& [s, t] : sc.steps()) {
    if (t > sc.at(2500) && bad < 0) bad = s;
  }
  ASSERT_GT(bad, 0);
  auto loss = sc.base("tb_learning_loss");
  sc.set("tb_learning_loss", [=, &sc](const SeriesKey& k, double t) -> Opt {
    const auto s = sc.step_at(t);
    if (s && *s >= bad) return std::numeric_limits<double>::quiet_NaN();
    return loss(k, t);
  });
  sc.build_tsdb(job_dir());
  auto req = request(sc, "");
  req.last_loss.reset();
  const auto res = analyse(req);
  const auto& p = playbook(res, "training-stability");
  EXPECT_EQ(p.verdict, "loss-divergence") << dump(res);
  ASSERT_TRUE(res.chain.root.has_value());
  EXPECT_EQ(res.chain.root->domain, "training");
  EXPECT_NE(res.chain.root->text.find("step " + std::to_string(bad)), std::string::npos)
      << res.chain.root->text;
  EXPECT_TRUE(any_text(p, "checkpoint saves: expected")) << dump(res);
  for (const auto& a : p.anomalies)
    EXPECT_NE(a.metric, "tb_perf_step_time_seconds") << a.text;
}

}  // namespace
}  // namespace triage::tsdb::testing
