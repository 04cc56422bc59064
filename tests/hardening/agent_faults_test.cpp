// Faults under the agent: the spool's filesystem fills up and is freed again, and sysfs reads
// hang in the kernel. The agent keeps answering, counts what it could not keep, and recovers.
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "agent/node/spool.h"
#include "tests/hardening/abuse_support.h"

namespace triage::hardening {
namespace {

using agent::testing::AgentHarness;
using agent::testing::eventually;
using agent::testing::lifecycle;
using agent::testing::make_event;
using agent::testing::metric_value;
using agent::testing::socket_json;
using namespace std::chrono_literals;

constexpr auto kPingBudget = 500ms;

double metric(AgentHarness& h, const std::string& series) {
  return metric_value(h.agent().metrics(), series).value_or(-1);
}

// Fills the filesystem holding `dir` with one file until the kernel says ENOSPC.
void fill(const std::string& file) {
  std::ofstream out(file, std::ios::binary);
  const std::string block(size_t{64} * 1024, 'x');
  while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) {
  }
}

TEST(AgentFaults, AFullSpoolFilesystemIsCountedServedThroughAndRecoveredFrom) {
  AgentHarness h("hfull", "node001");
  const std::string spool = h.config.spool_dir;
  agent::testing::make_dirs(spool, 0700);
  if (::mount("tmpfs", spool.c_str(), "tmpfs", 0, "size=32m,mode=0700") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs for the spool (needs root): " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{spool};
  h.start();
  const int64_t t0 = 1'795'262'400'000'000;
  ASSERT_TRUE(h.agent().ingest({make_event("boot-a:1", "oom-kill", t0)}, "kmsg:a:1"));

  const std::string filler = spool + "/filler";
  fill(filler);
  // Events keep coming while the disk is full: none is durable, all are held and counted. (Past
  // 50,000 held events the oldest are given up on and counted in
  // triage_spool_dropped_events_total; a flood that large takes too long for a unit test.)
  std::vector<KernelEvent> flood;
  flood.reserve(2000);
  for (int i = 0; i < 2000; ++i)
    flood.push_back(make_event("boot-a:" + std::to_string(100 + i), "gpu-ring-timeout", t0 + i));
  EXPECT_FALSE(h.agent().ingest(flood, "kmsg:a:2099"));
  EXPECT_FALSE(h.agent().ingest({make_event("boot-a:60000", "oom-kill", t0 + 60000)}, "kmsg:a:2"));
  EXPECT_GE(metric(h, R"(triage_spool_write_failures_total{host="node001"})"), 2);
  EXPECT_EQ(metric(h, R"(triage_spool_pending_events{host="node001"})"), 2001);
  EXPECT_EQ(metric(h, R"(triage_spool_dropped_events_total{host="node001"})"), 0);
  EXPECT_EQ(h.agent().kernel_position(), "kmsg:a:1") << "the position waits for the spool";
  // A lifecycle message cannot be made durable, so it is refused rather than acknowledged...
  const auto refused =
      socket_json(h.socket(), lifecycle("job_start", 77, "f1", {{"uid", 1000}, {"gid", 1000}}));
  EXPECT_EQ(refused.value("ok", true), false) << refused.dump();
  EXPECT_NE(refused.value("error", "").find("not durable"), std::string::npos) << refused.dump();
  // ...and the agent goes on answering promptly.
  EXPECT_LT(ping_time(h.socket()), kPingBudget);
  EXPECT_EQ(agent::testing::http_get(h.port(), "/metrics").status, 200);

  // Space comes back: the next write takes everything held, in order, and the position moves.
  std::filesystem::remove(filler);
  EXPECT_TRUE(h.agent().ingest({}, "kmsg:a:3"));
  EXPECT_EQ(metric(h, R"(triage_spool_pending_events{host="node001"})"), 0);
  EXPECT_EQ(h.agent().kernel_position(), "kmsg:a:3");
  EXPECT_EQ(
      socket_json(h.socket(), lifecycle("job_start", 77, "f1", {{"uid", 1000}, {"gid", 1000}}))
          .value("ok", false),
      true);
  h.stop();

  // What was kept is in the spool exactly once.
  agent::Spool again({spool});
  const agent::SpoolReplay replay = again.open();
  std::set<std::string> ids;
  for (const auto& e : replay.events)
    EXPECT_TRUE(ids.insert(e.id).second) << "duplicate " << e.id;
  EXPECT_EQ(ids.size(), 1u + 2000u + 1u);
  EXPECT_TRUE(ids.count("boot-a:1") == 1 && ids.count("boot-a:100") == 1 &&
              ids.count("boot-a:60000") == 1);
  EXPECT_EQ(replay.kernel_position, "kmsg:a:3");
}

TEST(AgentFaults, EveryGpusSysfsReadHangingLeavesTheAgentServingAndSaysSo) {
  AgentHarness h("hstuck", "node001");
  h.options.collectors = true;
  agent::testing::write_sysfs_tree(h.config.sysfs_root,
                                   {{0, "0000:c1:00.0", {{"umc", {0, 0}}}, {{"fatal", 0}}},
                                    {1, "0000:c2:00.0", {{"umc", {0, 0}}}, {}}});
  // FIFO stand-ins for reads the kernel never completes, on both GPUs.
  for (const char* dev : {"0000:c1:00.0", "0000:c2:00.0"}) {
    const std::string hung =
        h.config.sysfs_root + "/devices/pci0000:00/" + dev + "/ras/umc_err_count";
    std::filesystem::remove(hung);
    ASSERT_EQ(::mkfifo(hung.c_str(), 0644), 0) << hung;
  }
  h.start();
  ASSERT_TRUE(
      eventually([&] { return metric(h, R"(triage_stuck_sysfs_reads{host="node001"})") >= 1.0; }));
  for (int i = 0; i < 10; ++i)
    EXPECT_LT(ping_time(h.socket()), kPingBudget);
  EXPECT_TRUE(eventually([&] {
    return metric(h, R"(triage_events_total{host="node001",kind="stuck-sysfs-read"})") >= 1.0;
  }));
  // Jobs still start and end while the reader is stuck.
  EXPECT_EQ(
      socket_json(h.socket(), lifecycle("job_start", 78, "s1", {{"uid", 1000}, {"gid", 1000}}))
          .value("ok", false),
      true);
  nlohmann::json health;
  EXPECT_TRUE(eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["verdict"].value("verdict", "") == "degraded";
  })) << health.dump();
  EXPECT_GE(health.value("stuck_sysfs_reads", nlohmann::json::array()).size(), 1u) << health.dump();
}

}  // namespace
}  // namespace triage::hardening
