// The agent with its collectors running on fixture trees: a sysfs read that hangs in the kernel,
// and tasks piling up in D state in the amdgpu CPER path.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>

#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::eventually;
using testing::metric_value;
using testing::socket_json;

bool has_event(Agent& agent, const std::string& socket, const std::string& kind) {
  (void)agent;
  const nlohmann::json h = socket_json(socket, {{"op", "health"}});
  for (const auto& r : h["verdict"]["reasons"]) {
    for (const auto& id : r["event_ids"]) {
      if (id.get<std::string>().find(kind) != std::string::npos) return true;
    }
  }
  return false;
}

TEST(AgentCollectors, AStuckSysfsReadIsRecordedWhileTheAgentKeepsAnswering) {
  AgentHarness h("stuck", "node001");
  h.options.collectors = true;
  testing::write_sysfs_tree(h.config.sysfs_root, {{0, "0000:c1:00.0", {{"umc", {0, 0}}}, {}}});
  // The amdgpu RAS read that never returns: a FIFO nobody writes.
  const std::string hung =
      h.config.sysfs_root + "/devices/pci0000:00/0000:c1:00.0/ras/gfx_err_count";
  ASSERT_EQ(::mkfifo(hung.c_str(), 0644), 0);
  h.start();

  ASSERT_TRUE(eventually([&] {
    return metric_value(h.agent().metrics(), R"(triage_stuck_sysfs_reads{host="node001"})") == 1.0;
  }));
  // The agent answers promptly while its reader is blocked.
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(250));
  }
  nlohmann::json health;
  ASSERT_TRUE(eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["verdict"]["verdict"] == "degraded";
  })) << health.dump();
  ASSERT_EQ(health["stuck_sysfs_reads"].size(), 1u);
  const std::string path = health["stuck_sysfs_reads"][0]["path"];
  EXPECT_EQ(path, h.config.sysfs_root + "/class/drm/card0/device/ras/gfx_err_count");
  EXPECT_TRUE(eventually([&] { return has_event(h.agent(), h.socket(), "stuck-sysfs:"); }));
  const std::string metrics = h.agent().metrics();
  EXPECT_GE(metric_value(metrics, R"(triage_events_total{host="node001",kind="stuck-sysfs-read"})")
                .value_or(0),
            1);

  // The kernel finally returns: the reader comes back and nothing is left stuck.
  const int fd = ::open(hung.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
  ::unlink(hung.c_str());
  EXPECT_TRUE(eventually([&] {
    return metric_value(h.agent().metrics(), R"(triage_stuck_sysfs_reads{host="node001"})") == 0.0;
  }));
}

TEST(AgentCollectors, TasksPilingUpInTheCperPathMeanRebootAtTheNextJobBoundary) {
  AgentHarness h("pileup", "node001");
  h.options.collectors = true;
  testing::write_proc_tree(h.config.proc_root,
                           {{100, "gpu_metrics_pl", 'D', "amdgpu_cper_ring_write"},
                            {101, "cat", 'D', "amdgpu_cper_ring_write"},
                            {102, "cat", 'D', "amdgpu_cper_ring_write",
                             "0::/system.slice/slurmstepd.scope/job_31/step_0\n"},
                            {103, "sshd", 'S', "do_select"}});
  h.start();
  nlohmann::json health;
  ASSERT_TRUE(eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["verdict"]["verdict"] == "drain-recommended";
  }));
  const auto& reason = health["verdict"]["reasons"][0];
  EXPECT_EQ(reason["action"], "reboot-at-job-boundary");
  EXPECT_NE(reason["reason"].get<std::string>().find("amdgpu_cper_ring_write"), std::string::npos);
  EXPECT_EQ(health["dstate"]["count"], 3);
  EXPECT_EQ(health["dstate"]["by_wchan"]["amdgpu_cper_ring_write"], 3);
  // The pile-up is also an event in the spool, so a restart and the job's evidence keep it.
  ASSERT_TRUE(
      eventually([&] { return has_event(h.agent(), h.socket(), "dstate:boot-a:gpu:100."); }));
  const std::string events = testing::read_file(h.dir() + "/spool/events/00000001.jsonl");
  EXPECT_NE(events.find("\"kind\":\"dstate-pileup\""), std::string::npos);
  EXPECT_NE(events.find("job=31"), std::string::npos);
}

}  // namespace
}  // namespace triage::agent
