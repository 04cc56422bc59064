// Where the metrics come from, and what happens when a piece is missing: a live job (its lock, its
// own server), the write-ahead log of a crashed job, a cluster Prometheus, the wrong database, and
// the days when there is nothing to read.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>

#include "analyzer/tsdb/local_prometheus.h"
#include "analyzer/tsdb/prom_client.h"
#include "analyzer/tsdb/server_guardian.h"
#include "analyzer/tsdb/tsdb_dir.h"
#include "common/time_util.h"
#include "tests/tsdb/fake_http.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

namespace fs = std::filesystem;

bool has_note(const TsdbResult& r, const std::string& needle) {
  for (const auto& n : r.notes) {
    if (n.find(needle) != std::string::npos) return true;
  }
  return false;
}

// A Prometheus running on a directory the way a live job's does (its own lock included).
class LiveServer {
 public:
  LiveServer(const std::string& data_dir, const std::string& scratch, const std::string& config,
             bool lock) {
    fs::create_directories(scratch);
    std::ofstream(scratch + "/prometheus.yml") << config;
    ServerGuardian::Spec spec;
    spec.scratch_dir = scratch;  // config and log only: the guardian never removes the data
    spec.binary = find_executable("prometheus");
    spec.log_path = scratch + "/prometheus.log";
    spec.args = {"--config.file=" + scratch + "/prometheus.yml", "--storage.tsdb.path=" + data_dir,
                 "--storage.tsdb.retention.time=100y", "--web.listen-address=127.0.0.1:{port}"};
    if (lock) spec.args.emplace_back("--storage.tsdb.use-lockfile");
    guardian_ = std::make_unique<ServerGuardian>(spec);
    port_ = pick_free_loopback_port(std::nullopt);
    pid_ = guardian_->start_server(port_);
    PromClient c(url());
    const int64_t deadline = monotonic_usec() + 30'000'000;
    while (!c.ready(std::chrono::milliseconds(500)) && monotonic_usec() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }
  void stop() { guardian_->stop(); }

 private:
  std::unique_ptr<ServerGuardian> guardian_;
  uint16_t port_ = 0;
  pid_t pid_ = -1;
};

class SourcesTest : public TsdbTest {};

// ---- missing pieces ----

TEST_F(SourcesTest, AJobWithoutAPrometheusDirectoryRanWithRay0) {
  fs::create_directories(job_dir());
  Scenario sc;
  const auto res = analyse(request(sc, "hang"));
  EXPECT_FALSE(res.available);
  EXPECT_TRUE(has_note(res, "RAY=0")) << dump(res);
  EXPECT_NE(res.render_markdown({"", 2}).find("No metrics could be read"), std::string::npos);
}

TEST_F(SourcesTest, AnEmptyPrometheusDirectoryMeansItNeverScraped) {
  fs::create_directories(job_dir() + "/prometheus/wal");
  std::ofstream(job_dir() + "/prometheus/lock") << "";
  Scenario sc;
  const auto res = analyse(request(sc, "hang"));
  EXPECT_FALSE(res.available);
  EXPECT_TRUE(has_note(res, "holds no data")) << dump(res);
}

TEST_F(SourcesTest, ACorruptTsdbIsANoteAndTheRestOfTheReportStands) {
  Scenario sc({.duration_s = 900});
  sc.build_tsdb(job_dir());
  const auto scan = scan_tsdb_dir(job_dir());
  ASSERT_FALSE(scan.blocks.empty());
  std::ofstream(job_dir() + "/prometheus/" + scan.blocks.front().ulid + "/index", std::ios::trunc)
      << "garbage";
  const auto res = analyse(request(sc, "hang"));
  EXPECT_FALSE(res.available);
  EXPECT_TRUE(has_note(res, "could not start a private prometheus")) << dump(res);
}

TEST_F(SourcesTest, NoPrometheusBinaryIsANote) {
  Scenario sc({.duration_s = 900});
  sc.build_tsdb(job_dir());
  auto req = request(sc, "hang");
  req.prometheus_binary = dir_ + "/bin/prometheus";
  const auto res = analyse(req);
  EXPECT_FALSE(res.available);
  EXPECT_TRUE(has_note(res, "no prometheus binary")) << dump(res);
}

TEST_F(SourcesTest, AnUnreachableClusterPrometheusFallsBackToTheJobsOwnTsdb) {
  Scenario sc({.duration_s = 1800, .stop_after_s = 1200});
  sc.build_tsdb(job_dir());
  uint16_t closed = 0;
  {
    FakeHttp gone([](const std::string&) { return std::string(); });
    closed = gone.port();
  }
  auto req = request(sc, "hang");
  req.cluster_url = "http://127.0.0.1:" + std::to_string(closed);
  const auto res = analyse(req);
  EXPECT_TRUE(has_note(res, "cluster Prometheus")) << dump(res);
  EXPECT_EQ(res.source.kind, "job-tsdb");
  EXPECT_TRUE(res.available);
  EXPECT_EQ(playbook(res, "hang").verdict, "busy-wait-hang");
}

// ---- the wrong-database guard ----

TEST_F(SourcesTest, ADatabaseThatTrainedFurtherThanTheLogIsRefused) {
  Scenario sc({.duration_s = 1800});
  sc.build_tsdb(job_dir());
  auto req = request(sc, "hang");
  req.last_step = 7;
  req.last_loss.reset();
  const auto res = analyse(req);
  EXPECT_TRUE(res.refused);
  EXPECT_EQ(res.guard.status, "mismatch");
  EXPECT_TRUE(res.playbooks.empty());
  EXPECT_NE(res.guard.reason.find("not the job's database"), std::string::npos) << res.guard.reason;
  EXPECT_NE(res.render_markdown({"", 2}).find("refused"), std::string::npos);
}

TEST_F(SourcesTest, ADifferentLossAtTheSameStepIsRefused) {
  Scenario sc({.duration_s = 1800});
  sc.build_tsdb(job_dir());
  auto req = request(sc, "hang");
  req.last_loss = *req.last_loss + 0.75;
  const auto res = analyse(req);
  EXPECT_TRUE(res.refused);
  EXPECT_NE(res.guard.reason.find("loss"), std::string::npos) << res.guard.reason;
}

TEST_F(SourcesTest, ADatabaseWithNoneOfTheJobsNodesIsRefused) {
  Scenario sc({.duration_s = 1800});
  sc.build_tsdb(job_dir());
  auto req = request(sc, "hang");
  req.hosts = {"gpu-a17", "gpu-a18"};
  const auto res = analyse(req);
  EXPECT_TRUE(res.refused);
  EXPECT_NE(res.guard.reason.find("gpu-a17"), std::string::npos) << res.guard.reason;
}

// ---- live jobs ----

TEST_F(SourcesTest, ALiveJobsLockedTsdbIsNeverOpenedTwiceOnlyItsBlocksAreCopied) {
  Scenario sc({.hosts = {"node001", "node002"}, .duration_s = 1800, .stop_after_s = 1200});
  sc.build_tsdb(job_dir());
  LiveServer live(job_dir() + "/prometheus", dir_ + "/live", "global:\n  scrape_interval: 1m\n",
                  true);
  const auto scan = scan_tsdb_dir(job_dir());
  ASSERT_TRUE(scan.lock_holder.has_value()) << "the live server holds no visible lock";
  EXPECT_EQ(*scan.lock_holder, live.pid());

  auto req = request(sc, "hang");
  req.liveness = JobLiveness::kUnknown;  // the caller does not know; the lock tells
  const auto res = analyse(req);
  EXPECT_EQ(res.source.kind, "job-tsdb-blocks") << dump(res);
  EXPECT_FALSE(res.source.wal_included);
  ASSERT_TRUE(res.source.missing_from.has_value());
  EXPECT_TRUE(has_note(res, "write-ahead log"));
  EXPECT_EQ(playbook(res, "hang").verdict, "busy-wait-hang") << dump(res);
  // The live server is untouched: still answering, still holding its lock.
  EXPECT_TRUE(PromClient(live.url()).ready(std::chrono::milliseconds(1000)));
  const auto after = scan_tsdb_dir(job_dir());
  EXPECT_TRUE(after.has_lock);
  ASSERT_TRUE(after.lock_holder.has_value());
  EXPECT_EQ(*after.lock_holder, live.pid());

  // Told where the live job's own Prometheus is, that one is asked directly.
  req.liveness = JobLiveness::kLive;
  req.head_host = "127.0.0.1";
  req.head_port = live.port();
  const auto direct = analyse(req);
  EXPECT_EQ(direct.source.kind, "live-head") << dump(direct);
  EXPECT_EQ(direct.source.url, live.url());
  EXPECT_EQ(playbook(direct, "hang").verdict, "busy-wait-hang") << dump(direct);
  live.stop();
}

// ---- the write-ahead log of a crashed job ----

TEST_F(SourcesTest, TheLastMinutesBeforeACrashAreReadFromTheWriteAheadLog) {
  // An exporter the job's Prometheus scrapes every second, as on a real node.
  FakeHttp exporter([](const std::string&) {
    std::string body;
    for (const char* h : {"node001", "node002"}) {
      for (int g = 0; g < 2; ++g) {
        body += "hw_gpu_power_watts{host=\"" + std::string(h) + "\",gpu=\"" + std::to_string(g) +
                "\"} " + std::to_string(301 + g) + "\n";
        body += "ray_node_gpus_utilization{host=\"" + std::string(h) + "\",GpuIndex=\"" +
                std::to_string(g) + "\"} 100\n";
      }
      body += "hw_scrape_duration_seconds{host=\"" + std::string(h) + "\"} 0.1\n";
    }
    body +=
        "tb_step{host=\"node001\"} 42\ntb_learning_loss{host=\"node001\"} 3.25\n"
        "tb_metrics_plugin_staleness_fill{host=\"node001\"} 0\n";
    return FakeHttp::response(200, body, "text/plain; version=0.0.4");
  });
  const double t0 = static_cast<double>(now_usec()) / 1e6;
  fs::create_directories(job_dir() + "/prometheus");
  {
    LiveServer job_prom(
        job_dir() + "/prometheus", dir_ + "/jobprom",
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: "
        "exporter\n"
        "    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:" +
            std::to_string(exporter.port()) + "']\n",
        false);
    PromClient c(job_prom.url());
    const int64_t deadline = monotonic_usec() + 20'000'000;
    while (monotonic_usec() < deadline) {
      const auto r = c.query("count_over_time(tb_step[1m])", static_cast<double>(now_usec()) / 1e6);
      if (!r.samples.empty() && r.samples[0].point.v >= 4) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    job_prom.stop();  // the job ended: only the WAL holds these samples (no block yet)
  }
  ASSERT_TRUE(fs::exists(job_dir() + "/prometheus/wal"));
  const auto scan = scan_tsdb_dir(job_dir());
  EXPECT_TRUE(scan.blocks.empty());

  TsdbRequest req;
  req.job_dir = job_dir();
  req.job_start = t0 - 5;
  req.job_end = static_cast<double>(now_usec()) / 1e6 + 5;
  req.hosts = {"node001", "node002"};
  req.last_step = 42;
  req.last_loss = 3.25;
  req.liveness = JobLiveness::kFinished;
  req.scratch_dir = dir_ + "/scratch";
  req.rule_layers = {TSDB_RULES_DIR};
  const auto res = analyse(req);
  ASSERT_TRUE(res.available) << dump(res);
  EXPECT_TRUE(res.source.wal_included);
  EXPECT_EQ(res.hosts, (std::vector<std::string>{"node001", "node002"}));
  EXPECT_EQ(res.guard.status, "match") << res.guard.reason;
  ASSERT_TRUE(res.data_max.has_value());
  EXPECT_GT(*res.data_max, t0);
  const auto& gpu = playbook(res, "gpu-health");
  EXPECT_NE(gpu.tables.front().rows[1][1].find("max 302 W"), std::string::npos) << dump(res);

  // The same directory while its job is still live: the WAL is off limits and no block exists yet.
  req.liveness = JobLiveness::kLive;
  const auto live = analyse(req);
  EXPECT_FALSE(live.available);
  EXPECT_TRUE(has_note(live, "no persisted block yet")) << dump(live);
}

// ---- a cluster Prometheus ----

// Four nodes in a cluster database, labelled instance="nodeNNN:9100"; the job ran on two.
ScenarioSpec cluster_of_four() {
  return {.hosts = {"node001", "node002", "node003", "node004"},
          .duration_s = 1800,
          .host_label = "instance",
          .host_suffix = ":9100"};
}

class ClusterTest : public SourcesTest {
 protected:
  // Serves the scenario as the cluster's Prometheus and analyses a node-fail of the job on
  // node001 and node002 against it.
  TsdbResult analyse_in_cluster(const Scenario& sc) {
    sc.build_tsdb(dir_ + "/cluster");
    LaunchOptions lo;
    lo.binary = find_executable("prometheus");
    lo.scratch_parent = dir_;
    LocalPrometheus cluster(lo);
    copy_tsdb(scan_tsdb_dir(dir_ + "/cluster"), cluster.data_dir(), {});
    cluster.start();

    TsdbRequest req;
    req.job_start = sc.start();
    req.job_end = sc.end();
    req.hosts = {"node001", "node002"};
    req.triage_class = "node-fail";
    req.cluster_url = cluster.url();
    req.host_label = "instance";
    req.scratch_dir = dir_ + "/scratch";
    req.rule_layers = {TSDB_RULES_DIR};
    return analyse(req);
  }
};

TEST_F(ClusterTest, AClusterPrometheusIsScopedToTheJobsNodesAndItsCountersAreTrusted) {
  Scenario sc(cluster_of_four());
  const double when = sc.at(900);
  auto ue = sc.base("hw_gpu_ras_umc_ue_total");
  sc.set("hw_gpu_ras_umc_ue_total", [=](const SeriesKey& k, double t) -> std::optional<double> {
    // A fault on node002 (in the job) and one on node004 (another job's node).
    return (k.host == "node002" || k.host == "node004") && k.gpu == 0 && t >= when ? 1 : *ue(k, t);
  });
  const auto res = analyse_in_cluster(sc);
  EXPECT_EQ(res.source.kind, "cluster") << dump(res);
  EXPECT_TRUE(res.source.trusted);
  EXPECT_EQ(res.hosts, (std::vector<std::string>{"node001", "node002"}));
  const auto& hw = playbook(res, "hardware");
  EXPECT_EQ(hw.verdict, "hardware-fault") << dump(res);
  EXPECT_EQ(hw.gpus, std::vector<std::string>{"node002:0"});
  ASSERT_EQ(res.hardware.size(), 1u);
  EXPECT_TRUE(res.hardware.front().source_trusted);
}

TEST_F(ClusterTest, WhatTheClustersMetricsShowIsATrustedFinding) {
  Scenario sc(cluster_of_four());
  const double from = sc.at(600);
  sc.set("hw_dmesg_gpu_errors_total", [=](const SeriesKey& k, double t) -> std::optional<double> {
    return k.host == "node002" && t >= from ? std::floor((t - from) / 60) + 1 : 0;
  });
  const auto res = analyse_in_cluster(sc);
  const auto& hw = playbook(res, "hardware");
  ASSERT_FALSE(hw.findings.empty()) << dump(res);
  for (const auto& f : hw.findings) {
    EXPECT_TRUE(f.trusted) << f.text;
    EXPECT_EQ(f.source, "metrics:hardware");
  }
}

}  // namespace
}  // namespace triage::tsdb::testing
