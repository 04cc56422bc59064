// DrainPolicy: recommend reports, auto drains through Slurm but never overrides or undoes a drain
// someone else made, and lifts its own once the node has rebooted and is healthy.
#include <gtest/gtest.h>

#include <thread>

#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::eventually;
using testing::make_event;
using testing::metric_value;
using testing::socket_json;

KernelEvent uncorrectable() {
  KernelEvent e = make_event("boot-a:812", "gpu-ras-uncorrectable", now_usec());
  e.summary = "uncorrectable umc error on GPU 0000:c1:00.0";
  e.action = "drain";
  return e;
}

SlurmNodeState idle(const std::string& name) {
  SlurmNodeState n;
  n.name = name;
  n.state = "IDLE";
  return n;
}

TEST(Drain, RecommendOnlyReportsTheRecommendation) {
  AgentHarness h("drain", "node001");
  h.start();
  h.slurm().set_node(idle("node001"));
  ASSERT_TRUE(h.agent().ingest({uncorrectable()}, "c1"));
  ASSERT_TRUE(eventually([&] {
    return metric_value(h.agent().metrics(), R"(triage_drain_recommended{host="node001"})") == 1.0;
  }));
  const nlohmann::json health = socket_json(h.socket(), {{"op", "health"}});
  EXPECT_EQ(health["drain"]["recommended"], true);
  EXPECT_EQ(health["drain"]["state"], "none");
  EXPECT_EQ(health["verdict"]["reasons"][0]["event_ids"][0], "boot-a:812");
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(h.slurm().drains().empty());
}

TEST(Drain, AutoDrainsOnceWithATriageReason) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.start();
  h.slurm().set_node(idle("node001"));
  ASSERT_TRUE(h.agent().ingest({uncorrectable()}, "c1"));
  ASSERT_TRUE(eventually([&] { return !h.slurm().drains().empty(); }));
  const auto drains = h.slurm().drains();
  ASSERT_EQ(drains.size(), 1u);
  EXPECT_EQ(drains[0].first, "node001");
  EXPECT_EQ(drains[0].second, "uncorrectable umc error on GPU 0000:c1:00.0 [boot boot-a]")
      << "the boot it was drained on, so that a reboot can lift it";
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["drain"]["state"] == "drained by triage";
  }));
  EXPECT_EQ(socket_json(h.socket(), {{"op", "health"}})["drain"]["reason"],
            "triage: uncorrectable umc error on GPU 0000:c1:00.0 [boot boot-a]");
  // More evidence of the same problem does not drain again.
  KernelEvent again = uncorrectable();
  again.id = "boot-a:813";
  ASSERT_TRUE(h.agent().ingest({again}, "c2"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(h.slurm().drains().size(), 1u);
}

TEST(Drain, ADrainSomeoneElseMadeIsLeftAlone) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.start();
  SlurmNodeState n = idle("node001");
  n.state = "DRAINED";
  n.drain = true;
  n.reason = "maint: replace fan 3";
  n.reason_uid = 1000;
  h.slurm().set_node(n);
  ASSERT_TRUE(h.agent().ingest({uncorrectable()}, "c1"));
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["drain"]["state"].get<std::string>().rfind(
               "left alone", 0) == 0;
  }));
  EXPECT_TRUE(h.slurm().drains().empty());
  EXPECT_NE(socket_json(h.socket(), {{"op", "health"}})["drain"]["state"].get<std::string>().find(
                "maint: replace fan 3"),
            std::string::npos);
}

TEST(Drain, AnAdminsDrainMadeWhileWeDrainIsLeftAloneAndNeverLifted) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.slurm().set_node(idle("node001"));
  // The admin's drain lands after the controller saw an idle node, before its drain: the client
  // refuses to replace the admin's reason (agent/slurm/drain_steps.h).
  h.slurm().set_before_drain([](SlurmNodeState& n) {
    n.state = "DRAINED";
    n.drain = true;
    n.reason = "maint: replace fan 3";
  });
  h.start();
  ASSERT_TRUE(h.agent().ingest({uncorrectable()}, "c1"));
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["drain"]["state"].get<std::string>().rfind(
               "left alone: drained by someone else meanwhile", 0) == 0;
  })) << socket_json(h.socket(), {{"op", "health"}}).dump();
  EXPECT_TRUE(h.slurm().drains().empty());
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["drain"]["owner"] == "admin";
  }));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(h.slurm().undrains().empty()) << "not ours: never lifted";
}

TEST(Drain, AControllerThatCannotBeReachedIsReportedAndRetriedLater) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.start();  // FakeSlurm knows no node: every call fails
  ASSERT_TRUE(h.agent().ingest({uncorrectable()}, "c1"));
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["drain"]["state"].get<std::string>().rfind(
               "failed", 0) == 0;
  }));
  EXPECT_TRUE(h.slurm().drains().empty());
  EXPECT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true);
}

SlurmNodeState drained(const std::string& reason) {
  SlurmNodeState n = idle("node001");
  n.state = "DRAINED";
  n.drain = true;
  n.reason = reason;
  return n;
}

nlohmann::json drain_report(AgentHarness& h) {
  return socket_json(h.socket(), {{"op", "health"}})["drain"];
}

TEST(Drain, OurDrainFromAnEarlierBootIsLiftedOnceTheRebootedNodeIsHealthy) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.options.boot_id = "boot-b";
  h.slurm().set_node(drained("triage: uncorrectable umc error on GPU 0000:c1:00.0 [boot boot-a]"));
  h.start();
  ASSERT_TRUE(eventually([&] { return h.slurm().undrains().size() == 1; })) << drain_report(h);
  ASSERT_TRUE(eventually([&] { return drain_report(h)["owner"] == "none"; })) << drain_report(h);
  const nlohmann::json d = drain_report(h);
  EXPECT_EQ(d["state"].get<std::string>().rfind("lifted by triage", 0), 0u) << d;
  EXPECT_EQ(metric_value(
                h.agent().metrics(),
                R"(triage_auto_drain_actions_total{action="lift",host="node001",result="done"})"),
            1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(h.slurm().undrains().size(), 1u) << "lifted once";
}

TEST(Drain, OurDrainOnThisBootStaysUntilTheNodeReboots) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.slurm().set_node(drained("triage: uncorrectable umc error on GPU 0000:c1:00.0 [boot boot-a]"));
  h.start();
  ASSERT_TRUE(eventually([&] { return drain_report(h)["owner"] == "ours"; })) << drain_report(h);
  ASSERT_TRUE(eventually([&] {
    return drain_report(h).value("lift", "").find("not rebooted") != std::string::npos;
  })) << drain_report(h);
  EXPECT_TRUE(h.slurm().undrains().empty());
}

TEST(Drain, AnAdminsDrainIsNeverLiftedAndTheMetricsSayWhose) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.options.boot_id = "boot-b";
  h.slurm().set_node(drained("replace fan 3 [boot boot-a]"));
  h.start();
  ASSERT_TRUE(eventually([&] { return drain_report(h)["owner"] == "admin"; })) << drain_report(h);
  EXPECT_EQ(drain_report(h)["slurm_reason"], "replace fan 3 [boot boot-a]");
  EXPECT_EQ(
      metric_value(h.agent().metrics(), R"(triage_drain_owner{host="node001",owner="admin"})"),
      1.0);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(h.slurm().undrains().empty());
}

TEST(Drain, ANodeDrainRecommendedAgainAfterTheRebootKeepsOurDrain) {
  AgentHarness h("drain", "node001", "DrainPolicy=auto\n");
  h.options.boot_id = "boot-b";
  h.start();  // slurmctld does not answer yet: nothing can be lifted before the fault is seen
  KernelEvent again = uncorrectable();
  again.id = "boot-b:90";
  again.boot_id = "boot-b";
  ASSERT_TRUE(h.agent().ingest({again}, "c1"));
  ASSERT_TRUE(eventually([&] {
    return drain_report(h)["state"].get<std::string>().rfind("failed", 0) == 0;
  })) << drain_report(h);
  h.slurm().set_node(drained("triage: uncorrectable umc error on GPU 0000:c1:00.0 [boot boot-a]"));
  ASSERT_TRUE(eventually([&] { return drain_report(h)["owner"] == "ours"; })) << drain_report(h);
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_TRUE(h.slurm().undrains().empty()) << drain_report(h);
}

}  // namespace
}  // namespace triage::agent
