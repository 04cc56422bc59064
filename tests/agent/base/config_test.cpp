#include "agent/base/config.h"

#include <gtest/gtest.h>

#include <set>

#include "common/text.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

TEST(AgentConfig, DefaultsAreTheDocumentedOnes) {
  const ConfigLoad load = load_agent_config_text("", "triage.conf");
  ASSERT_TRUE(load.errors.empty());
  const AgentConfig& c = load.config;
  EXPECT_EQ(c.spool_dir, "/var/spool/slurm-triage");
  EXPECT_EQ(c.inbox_dir, "/var/spool/slurm-triage/inbox");
  EXPECT_EQ(c.socket_path, "/run/slurm-triage/agent.sock");
  EXPECT_EQ(c.http_port, 6829);
  EXPECT_EQ(c.drain_policy, "recommend");
  EXPECT_EQ(c.kernel_source, "journal");
  EXPECT_EQ(c.dstate_interval_ms, 5000);
  EXPECT_EQ(c.health.dstate_gpu_reboot, 3u);
  EXPECT_EQ(c.health.gpu_wchan_markers,
            (std::vector<std::string>{"amdgpu", "cper", "aca_", "kfd"}));
  EXPECT_FALSE(c.node_name.empty());
}

// The live stall rule's keys start from the analyzer's LiveStallPolicy defaults (one constant).
TEST(AgentConfig, HangStallKeysDefaultToTheLiveStallPolicy) {
  const ConfigLoad load = load_agent_config_text("", "triage.conf");
  ASSERT_TRUE(load.errors.empty());
  EXPECT_EQ(load.config.hang_stall_min_sec, 600);
  EXPECT_EQ(load.config.hang_stall_factor, 10);
  const ConfigLoad set = load_agent_config_text("HangStallMin=2m\nHangStallFactor=4\n", "t");
  ASSERT_TRUE(set.errors.empty());
  EXPECT_EQ(set.config.hang_stall_min_sec, 120);
  EXPECT_EQ(set.config.hang_stall_factor, 4);
  EXPECT_FALSE(load_agent_config_text("HangStallFactor=1\n", "t").errors.empty())
      << "a factor of 1 would flag every ordinary step";
}

// Reboot and return and the partition limit (issue 27): off by default, and the two mistakes an
// admin can make are errors naming the key.
TEST(AgentConfig, RemediationIsOffByDefaultAndItsMistakesAreNamed) {
  const ConfigLoad load = load_agent_config_text("", "triage.conf");
  ASSERT_TRUE(load.errors.empty());
  EXPECT_EQ(load.config.remediate, "off");
  EXPECT_FALSE(load.config.remediate_dry_run);
  EXPECT_DOUBLE_EQ(load.config.max_triage_drain_fraction, 0.10);
  EXPECT_EQ(load.config.max_triage_drain_nodes, 0);
  const ConfigLoad set = load_agent_config_text(
      "DrainPolicy=auto\nRemediate=reboot\nRemediateDryRun=yes\nMaxTriageDrainFraction=0.5\n"
      "MaxTriageDrainNodes=8\nBootIdFile=/var/tmp/boot_id\n",
      "t");
  ASSERT_TRUE(set.errors.empty()) << (set.errors.empty() ? "" : set.errors[0].what());
  EXPECT_EQ(set.config.remediate, "reboot");
  EXPECT_TRUE(set.config.remediate_dry_run);
  EXPECT_DOUBLE_EQ(set.config.max_triage_drain_fraction, 0.5);
  EXPECT_EQ(set.config.max_triage_drain_nodes, 8);
  EXPECT_EQ(set.config.boot_id_file, "/var/tmp/boot_id");
  for (const char* bad : {"MaxTriageDrainFraction=0\n", "MaxTriageDrainFraction=1.5\n",
                          "MaxTriageDrainFraction=ten percent\n"}) {
    const ConfigLoad l = load_agent_config_text(bad, "t.conf");
    ASSERT_EQ(l.errors.size(), 1u) << bad;
    EXPECT_NE(std::string(l.errors[0].what()).find("MaxTriageDrainFraction"), std::string::npos);
  }
  const ConfigLoad recommend = load_agent_config_text("Remediate=reboot\n", "t.conf");
  ASSERT_EQ(recommend.errors.size(), 1u);
  EXPECT_NE(std::string(recommend.errors[0].what()).find("needs DrainPolicy=auto"),
            std::string::npos)
      << recommend.errors[0].what();
}

// The analyzer's TSDB keys live in the same file; the agent maps the ones its busy-wait probe
// needs.
TEST(AgentConfig, TheClusterPrometheusKeysReachTheAgent) {
  const ConfigLoad load = load_agent_config_text("", "triage.conf");
  ASSERT_TRUE(load.errors.empty());
  EXPECT_EQ(load.config.prometheus_url, "") << "no cluster Prometheus unless the admin names one";
  EXPECT_EQ(load.config.prometheus_host_label, "host");
  EXPECT_EQ(load.config.tsdb_query_timeout_sec, 60);
  const ConfigLoad set = load_agent_config_text(
      "PrometheusURL=http://prom.cluster:9090\nPrometheusHostLabel=instance\n"
      "TsdbQueryTimeout=15s\n",
      "t");
  ASSERT_TRUE(set.errors.empty());
  EXPECT_EQ(set.config.prometheus_url, "http://prom.cluster:9090");
  EXPECT_EQ(set.config.prometheus_host_label, "instance");
  EXPECT_EQ(set.config.tsdb_query_timeout_sec, 15);
}

// `slurm-triage kernel` judges a node with HealthPolicy's built-in thresholds: they must be the
// ones an agent without health settings in triage.conf uses.
TEST(AgentConfig, HealthDefaultsAreTheOfflineVerdictsThresholds) {
  const ConfigLoad load = load_agent_config_text("", "triage.conf");
  ASSERT_TRUE(load.errors.empty());
  const collector::HealthPolicy& c = load.config.health;
  const collector::HealthPolicy d;
  EXPECT_EQ(c.window_usec, d.window_usec);
  EXPECT_EQ(c.gpu_reset_degraded, d.gpu_reset_degraded);
  EXPECT_EQ(c.gpu_reset_drain, d.gpu_reset_drain);
  EXPECT_EQ(c.ring_timeout_degraded, d.ring_timeout_degraded);
  EXPECT_EQ(c.ring_timeout_drain, d.ring_timeout_drain);
  EXPECT_EQ(c.hung_task_degraded, d.hung_task_degraded);
  EXPECT_EQ(c.hung_task_drain, d.hung_task_drain);
  EXPECT_EQ(c.ras_correctable_degraded, d.ras_correctable_degraded);
  EXPECT_EQ(c.pcie_nonfatal_degraded, d.pcie_nonfatal_degraded);
  EXPECT_EQ(c.dstate_gpu_reboot, d.dstate_gpu_reboot);
  EXPECT_EQ(c.dstate_degraded, d.dstate_degraded);
  EXPECT_EQ(c.gpu_wchan_markers, d.gpu_wchan_markers);
}

TEST(AgentConfig, ATypoIsAnErrorWithItsLineNumberAndNothingIsApplied) {
  const ConfigLoad load = load_agent_config_text(
      "# site settings\n"
      "DrainPolicy=auto\n"
      "DrainPolicy=auto\n"
      "DrianPolicy=recommend\n"
      "HttpPort=70000\n"
      "AnalysisTimeout=soon\n"
      "no equals sign here\n",
      "/etc/slurm/triage.conf");
  ASSERT_EQ(load.errors.size(), 5u);
  EXPECT_EQ(std::string(load.errors[0].what()),
            "/etc/slurm/triage.conf:3: DrainPolicy is set twice");
  EXPECT_EQ(load.errors[1].line(), 4);
  EXPECT_NE(std::string(load.errors[1].what()).find("unknown key 'DrianPolicy'"),
            std::string::npos);
  EXPECT_EQ(load.errors[2].line(), 5);
  EXPECT_EQ(load.errors[3].line(), 6);
  EXPECT_EQ(load.errors[4].line(), 7);
}

TEST(AgentConfig, KeysAreCaseInsensitiveAndMapOntoThresholds) {
  const ConfigLoad load = load_agent_config_text(
      "drainpolicy=AUTO\nGpuResetDrainCount=5\nDStateGpuWchan=amdgpu_cper, my_driver\n"
      "DStateSampleInterval=10s\nSpoolMaxSize=1G\nHealthWindow=2h\n",
      "t.conf");
  // cppcheck-suppress containerOutOfBounds ; gtest streams the message only when errors exist
  ASSERT_TRUE(load.errors.empty()) << load.errors.front().what();
  EXPECT_EQ(load.config.drain_policy, "auto");
  EXPECT_EQ(load.config.health.gpu_reset_drain, 5u);
  EXPECT_EQ(load.config.health.gpu_wchan_markers,
            (std::vector<std::string>{"amdgpu_cper", "my_driver"}));
  EXPECT_EQ(load.config.dstate_interval_ms, 10000);
  EXPECT_EQ(load.config.spool_max_bytes, 1LL << 30);
  EXPECT_EQ(load.config.health.window_usec, 7200LL * 1000000);
}

TEST(AgentConfig, CommandLineOverridesAreCheckedToo) {
  const ConfigLoad ok = load_agent_config("", {"HttpPort=7000"});
  ASSERT_TRUE(ok.errors.empty());
  EXPECT_EQ(ok.config.http_port, 7000);
  const ConfigLoad bad = load_agent_config("", {"KernelSource=dmesg"});
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_NE(std::string(bad.errors[0].what()).find("KernelSource must be one of"),
            std::string::npos);
}

TEST(AgentConfig, AMissingFileIsAnError) {
  const ConfigLoad load = load_agent_config("/nonexistent/triage.conf");
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(std::string(load.errors[0].what()).find("/nonexistent/triage.conf"), std::string::npos);
}

// The shipped example must list every key with its default, so admins can rely on it.
TEST(AgentConfig, TheShippedExampleCoversEveryKeyWithItsDefault) {
  const std::string example =
      testing::read_file(std::string(SOURCE_DIR) + "/slurm.conf.d/triage.conf.example");
  ASSERT_FALSE(example.empty());
  for (const ConfigKeySpec& s : agent_config_specs()) {
    if (s.name == "AnalyzerPath") {
      EXPECT_NE(example.find("#AnalyzerPath="), std::string::npos);
      continue;
    }
    EXPECT_NE(example.find("#" + s.name + "=" + s.default_value + "\n"), std::string::npos)
        << s.name;
  }
  // And parsing it uncommented yields no error.
  std::string uncommented;
  for (std::string_view line : split(example, '\n')) {
    if (line.size() > 1 && line[0] == '#' && line[1] != ' ') {
      uncommented += std::string(line.substr(1)) + "\n";
    }
  }
  const ConfigLoad load = load_agent_config_text(uncommented, "example");
  EXPECT_TRUE(load.errors.empty()) << (load.errors.empty() ? "" : load.errors.front().what());
}

}  // namespace
}  // namespace triage::agent

namespace triage::agent {
namespace {

TEST(AgentConfig, TheAdminGuideDocumentsEveryKey) {
  const std::string guide = testing::read_file(std::string(SOURCE_DIR) + "/docs/agent.md");
  ASSERT_FALSE(guide.empty());
  for (const ConfigKeySpec& s : agent_config_specs()) {
    EXPECT_NE(guide.find("`" + s.name + "`"), std::string::npos)
        << s.name << " is missing from docs/agent.md";
  }
}

}  // namespace
}  // namespace triage::agent
