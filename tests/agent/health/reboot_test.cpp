// Remediate=reboot in the agent, against a fake slurmctld: an Xid 79 gets `scontrol reboot ASAP
// nextstate=DOWN`, the first clean health pass on the new boot resumes the node, the fault back
// after the reboot leaves it DOWN with "needs hands", the partition limit holds a reboot back, and
// a dry run only says what it would do.
#include <gtest/gtest.h>

#include <algorithm>
#include <thread>

#include "agent/health/remediation.h"
#include "collector/sysfs/ib_port_watch.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::eventually;
using testing::metric_value;
using testing::socket_json;
using testing::write_file;

constexpr const char* kRemediate = "DrainPolicy=auto\nRemediate=reboot\n";
constexpr const char* kSummary = "Xid 79 on GPU 0000:3b:00: GPU has fallen off the bus";

KernelEvent xid79(const std::string& id, const std::string& boot) {
  KernelEvent e = testing::make_event(id, "nvidia-xid", now_usec(), boot);
  e.severity = Severity::kCritical;
  e.action = "drain";
  e.code = 79;
  e.device = "0000:3b:00";
  e.summary = kSummary;
  e.fields["remedy"] = "reboot";
  return e;
}

SlurmNodeState node(const std::string& name, const std::string& state,
                    const std::string& reason = "") {
  SlurmNodeState n;
  n.name = name;
  n.state = state;
  n.reason = reason;
  n.drain = state.find("DRAIN") != std::string::npos;
  n.down = state == "DOWN";
  return n;
}

bool ran(AgentHarness& h, const std::string& prefix) {
  const auto c = h.slurm().commands();
  return std::any_of(c.begin(), c.end(),
                     [&](const std::string& l) { return l.rfind(prefix, 0) == 0; });
}

double action_count(AgentHarness& h, const std::string& action, const std::string& result) {
  return metric_value(h.agent().metrics(), "triage_auto_drain_actions_total{action=\"" + action +
                                               "\",host=\"node001\",result=\"" + result + "\"}")
      .value_or(0.0);
}

nlohmann::json remediation(AgentHarness& h) {
  return socket_json(h.socket(), {{"op", "health"}})["drain"]["remediation"];
}

TEST(Reboot, AnXid79IsRebootedAsapToComeBackDown) {
  AgentHarness h("reboot", "node001", kRemediate);
  h.slurm().set_node(node("node001", "IDLE"));
  h.start();
  ASSERT_TRUE(h.agent().ingest({xid79("boot-a:7", "boot-a")}, "c1"));
  ASSERT_TRUE(eventually([&] { return action_count(h, "reboot", "done") == 1.0; }))
      << remediation(h);
  EXPECT_TRUE(ran(h, std::string("scontrol reboot ASAP nextstate=DOWN reason=triage: reboot: ") +
                         kSummary + " [boot boot-a] node001"))
      << h.slurm().commands().back();
  EXPECT_TRUE(h.slurm().drains().empty()) << "the reboot drains; no separate drain";
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(action_count(h, "reboot", "done"), 1.0) << "asked once";
}

// The port watch's events for mlx5_0/1 going down `down_s` seconds ago and still down now.
std::vector<KernelEvent> port_down_for(int64_t down_s) {
  collector::IbPortWatch w("node001", "boot-a", collector::IbThresholds{});
  auto reading = [](int64_t t_usec, const char* state) {
    collector::SysfsSnapshot s;
    s.time_usec = t_usec;
    collector::IbPort p;
    p.device = "mlx5_0";
    p.port = "1";
    p.state = state;
    p.phys_state = std::string(state) == "ACTIVE" ? "LinkUp" : "Disabled";
    p.path = "/sys/class/infiniband/mlx5_0/ports/1";
    s.ib = {p};
    return s;
  };
  const int64_t now = now_usec();
  std::vector<KernelEvent> out;
  w.update(reading(now - (down_s + 5) * 1000000, "ACTIVE"));
  for (int64_t t = now - down_s * 1000000; t <= now; t += int64_t{5} * 1000000) {
    for (auto& e : w.update(reading(t, "DOWN")))
      out.push_back(std::move(e));
  }
  return out;
}

TEST(Reboot, APortThatStaysDownTenMinutesIsRebootedOneDownTenSecondsIsNot) {
  AgentHarness h("reboot", "node001", kRemediate);
  h.slurm().set_node(node("node001", "IDLE"));
  h.start();
  ASSERT_TRUE(h.agent().ingest(port_down_for(10), "c1"));
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(ran(h, "scontrol reboot")) << "10 s down may come back";
  EXPECT_TRUE(h.slurm().drains().empty());
  ASSERT_TRUE(h.agent().ingest(port_down_for(600), "c2"));
  ASSERT_TRUE(eventually([&] { return action_count(h, "reboot", "done") == 1.0; }))
      << remediation(h);
  EXPECT_TRUE(ran(h,
                  "scontrol reboot ASAP nextstate=DOWN reason=triage: reboot: port mlx5_0/1 has "
                  "been down for 240 s and does not come up (state DOWN, phys_state Disabled) "
                  "[boot boot-a] node001"))
      << h.slurm().commands().back();
}

TEST(Reboot, TheFirstCleanHealthPassAfterOurRebootResumesTheNode) {
  AgentHarness h("reboot", "node001", kRemediate);
  h.options.boot_id = "boot-b";
  h.slurm().set_node(node(
      "node001", "DOWN", reboot_reason(kSummary, "boot-a") + " : reboot issued : reboot complete"));
  h.start();
  ASSERT_TRUE(eventually([&] { return action_count(h, "resume", "done") == 1.0; }))
      << remediation(h);
  EXPECT_TRUE(ran(h, "scontrol update NodeName=node001 State=RESUME"));
  std::string error;
  EXPECT_EQ(h.slurm().load_node("node001", error)->state, "IDLE");
  EXPECT_NE(remediation(h)["steps"].back().get<std::string>().find("resume done"),
            std::string::npos)
      << remediation(h);
}

TEST(Reboot, TheFaultBackAfterTheRebootLeavesTheNodeDownWithNeedsHands) {
  AgentHarness h("reboot", "node001", kRemediate);
  h.options.boot_id = "boot-b";
  h.slurm().set_node(node(
      "node001", "DOWN", reboot_reason(kSummary, "boot-a") + " : reboot issued : reboot complete"));
  // The GPU falls off the bus again as the driver loads: the line is in the kernel log the agent
  // reads before its first health pass on the new boot.
  const std::string dmesg = h.dir() + "/dmesg.txt";
  // `dmesg --time-format iso`: "2026-11-28T12:26:37,123456+00:00".
  std::string stamp = format_utc(now_usec(), true);
  stamp[stamp.find('.')] = ',';
  stamp.replace(stamp.size() - 1, 1, "+00:00");
  write_file(dmesg,
             stamp + " NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus.\n");
  h.config.kernel_source = "file";
  h.config.kernel_path = dmesg;
  h.start();
  ASSERT_TRUE(eventually([&] {
    std::string error;
    const auto n = h.slurm().load_node("node001", error);
    return n && n->reason.rfind("triage: needs hands: ", 0) == 0;
  })) << remediation(h);
  std::string error;
  const auto n = h.slurm().load_node("node001", error);
  EXPECT_EQ(n->state, "DOWN");
  EXPECT_NE(n->reason.find("Xid 79 on GPU 0000:3b:00"), std::string::npos) << n->reason;
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_FALSE(ran(h, "scontrol reboot")) << "no second reboot";
  EXPECT_FALSE(ran(h, "scontrol update NodeName=node001 State=RESUME"));
  EXPECT_EQ(action_count(h, "needs-hands", "done"), 1.0);
}

TEST(Reboot, TheSameFaultAfterAResumeIsNotRebootedTwice) {
  AgentHarness h("reboot", "node001", kRemediate);
  h.options.boot_id = "boot-b";
  h.slurm().set_node(node("node001", "IDLE"));
  // The reboot the agent asked on boot-a, an hour ago, for the same GPU.
  write_file(
      h.config.spool_dir + "/remediation.log",
      format_reboot_record({now_usec() / 1000000 - 3600, "boot-a", "nvidia-xid@0000:3b:00"}));
  h.start();
  ASSERT_TRUE(h.agent().ingest({xid79("boot-b:9", "boot-b")}, "c1"));
  ASSERT_TRUE(eventually([&] { return action_count(h, "needs-hands", "done") == 1.0; }))
      << remediation(h);
  ASSERT_EQ(h.slurm().drains().size(), 1u);
  EXPECT_EQ(h.slurm().drains()[0].second.rfind("needs hands: ", 0), 0u)
      << h.slurm().drains()[0].second;
  EXPECT_FALSE(ran(h, "scontrol reboot"));
}

TEST(Reboot, ThePartitionLimitHoldsTheRebootBackAndAlerts) {
  AgentHarness h("reboot", "node001", std::string(kRemediate) + "MaxTriageDrainFraction=0.5\n");
  h.slurm().set_node(node("node001", "IDLE"));
  h.slurm().set_node(node("node002", "DRAINED", "triage: Xid 48 [boot x]"));
  h.slurm().set_node(node("node003", "DOWN", "triage: needs hands: Xid 79 [boot y]"));
  h.slurm().set_node(node("node004", "IDLE"));
  h.start();
  ASSERT_TRUE(h.agent().ingest({xid79("boot-a:7", "boot-a")}, "c1"));
  ASSERT_TRUE(eventually([&] { return action_count(h, "reboot", "limited") >= 1.0; }))
      << remediation(h);
  EXPECT_EQ(metric_value(h.agent().metrics(), R"(triage_remediation_limited{host="node001"})"),
            1.0);
  EXPECT_FALSE(ran(h, "scontrol reboot"));
  EXPECT_TRUE(h.slurm().drains().empty());
  const std::string state = socket_json(h.socket(), {{"op", "health"}})["drain"]["state"];
  EXPECT_EQ(state,
            "limited: would reboot (partition debug has 2 of 4 nodes out by triage, limit 2)");
}

TEST(Reboot, ADryRunSaysWhatItWouldDoAndDoesNothing) {
  AgentHarness h("reboot", "node001", std::string(kRemediate) + "RemediateDryRun=yes\n");
  h.slurm().set_node(node("node001", "IDLE"));
  h.start();
  ASSERT_TRUE(h.agent().ingest({xid79("boot-a:7", "boot-a")}, "c1"));
  ASSERT_TRUE(eventually([&] { return action_count(h, "reboot", "dry-run") == 1.0; }))
      << remediation(h);
  const std::string state = socket_json(h.socket(), {{"op", "health"}})["drain"]["state"];
  EXPECT_EQ(state.rfind("dry run: would reboot with reason \"triage: reboot: ", 0), 0u) << state;
  EXPECT_FALSE(ran(h, "scontrol reboot"));
  EXPECT_TRUE(h.slurm().drains().empty());
}

}  // namespace
}  // namespace triage::agent
