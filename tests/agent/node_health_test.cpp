#include "collector/health/node_health.h"

#include <gtest/gtest.h>

#include "tests/agent/test_support.h"

namespace triage::collector {
namespace {

using agent::testing::make_event;

constexpr int64_t kHour = 3600LL * 1000000;
constexpr int64_t kNow = 1800000000LL * 1000000;

NodeVerdict judge(const std::vector<KernelEvent>& events, const DStateSample* dstate = nullptr,
                  size_t stuck = 0, const HealthPolicy& policy = {}) {
  HealthInputs in;
  in.host = "node001";
  in.boot_id = "boot-a";
  in.now_usec = kNow;
  in.events = &events;
  in.dstate = dstate;
  in.stuck_sysfs_reads = stuck;
  return evaluate_node_health(in, policy);
}

KernelEvent xid(int code, const std::string& action, const std::string& id) {
  KernelEvent e = make_event(id, "nvidia-xid", kNow - kHour);
  e.code = code;
  e.action = action;
  e.summary = "NVIDIA Xid " + std::to_string(code);
  return e;
}

TEST(NodeHealth, AQuietNodeIsHealthy) {
  const NodeVerdict v = judge({});
  EXPECT_EQ(v.verdict, "healthy");
  EXPECT_TRUE(v.reasons.empty());
  EXPECT_EQ(v.host, "node001");
}

TEST(NodeHealth, AnUncorrectableEccErrorRecommendsADrainWithTheEventAsEvidence) {
  KernelEvent ue = make_event("boot-a:812", "gpu-ras-uncorrectable", kNow - 10 * kHour * 5);
  ue.summary = "uncorrectable umc error on GPU 0000:c1:00.0";
  const NodeVerdict v = judge({ue});
  EXPECT_EQ(v.verdict, "drain-recommended");
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_EQ(v.reasons[0].action, "drain");
  EXPECT_EQ(v.reasons[0].event_ids, std::vector<std::string>{"boot-a:812"});
  EXPECT_EQ(v.reasons[0].reason, "uncorrectable umc error on GPU 0000:c1:00.0");
}

TEST(NodeHealth, XidsFollowTheCatalogsAction) {
  // Xid 79 (fallen off the bus), 48 (DBE), 74 (NVLink), 94/95 (ECC): the catalog says drain.
  for (int code : {79, 48, 74, 94, 95}) {
    const NodeVerdict v = judge({xid(code, "drain", "x" + std::to_string(code))});
    EXPECT_EQ(v.verdict, "drain-recommended") << "Xid " << code;
  }
  // Xid 13, 31, 43 are the application's faults: the node stays healthy.
  for (int code : {13, 31, 43}) {
    const NodeVerdict v = judge({xid(code, "none", "x" + std::to_string(code))});
    EXPECT_EQ(v.verdict, "healthy") << "Xid " << code;
  }
  // Xid 62 (micro-controller halted): the GPU fails every job until it is reset.
  const NodeVerdict reset = judge({xid(62, "reset-gpu", "x62")});
  EXPECT_EQ(reset.verdict, "drain-recommended");
  EXPECT_EQ(reset.reasons[0].action, "reset-gpu");
  // Xid 63 (a row remap waits for the next reset) is a warning: the GPU keeps working.
  KernelEvent pending = xid(63, "reset-gpu", "x63");
  pending.severity = Severity::kWarning;
  const NodeVerdict later = judge({pending});
  EXPECT_EQ(later.verdict, "degraded");
  EXPECT_EQ(later.reasons[0].action, "reset-gpu");
}

TEST(NodeHealth, OneGpuResetIsWorthWatchingThreeAreADrain) {
  std::vector<KernelEvent> events = {make_event("r1", "gpu-reset", kNow - 3 * kHour)};
  EXPECT_EQ(judge(events).verdict, "degraded");
  events.push_back(make_event("r2", "gpu-reset", kNow - 2 * kHour));
  events.push_back(make_event("r3", "gpu-ring-timeout", kNow - kHour));
  EXPECT_EQ(judge(events).verdict, "degraded") << "resets and ring timeouts are counted separately";
  events.push_back(make_event("r4", "gpu-reset", kNow - kHour));
  const NodeVerdict v = judge(events);
  EXPECT_EQ(v.verdict, "drain-recommended");
  EXPECT_EQ(v.reasons[0].reason, "3 GPU reset(s) in the health window");
  EXPECT_EQ(v.reasons[0].event_ids.size(), 3u);
}

TEST(NodeHealth, CountedRulesOnlyLookAtTheHealthWindowAndFloodsCountTheirRepeats) {
  KernelEvent old = make_event("old", "gpu-reset", kNow - 30 * kHour);
  EXPECT_EQ(judge({old}).verdict, "healthy");
  KernelEvent flood = make_event("flood", "gpu-ring-timeout", kNow - kHour);
  flood.count = 5;
  EXPECT_EQ(judge({flood}).verdict, "drain-recommended");
  HealthPolicy off;
  off.ring_timeout_drain = 0;
  off.ring_timeout_degraded = 0;
  EXPECT_EQ(judge({flood}, nullptr, 0, off).verdict, "healthy")
      << "a threshold of 0 turns the rule off";
}

TEST(NodeHealth, EventsOfAnEarlierBootDoNotCount) {
  KernelEvent ue = make_event("b:1", "gpu-ras-uncorrectable", kNow - kHour, "boot-before-reboot");
  EXPECT_EQ(judge({ue}).verdict, "healthy");
}

TEST(NodeHealth, GpuDriverDStatePileUpMeansRebootAtTheNextJobBoundary) {
  DStateSample s;
  for (int64_t pid : {100, 101, 102}) {
    DStateTask t;
    t.pid = pid;
    t.wchan = "amdgpu_cper_ring_write";
    t.persistent = true;
    s.tasks.push_back(t);
  }
  DStateTask fresh;
  fresh.pid = 103;
  fresh.wchan = "amdgpu_cper_ring_write";
  fresh.persistent = false;
  s.tasks.push_back(fresh);
  const NodeVerdict v = judge({}, &s);
  EXPECT_EQ(v.verdict, "drain-recommended");
  EXPECT_EQ(v.reasons[0].action, "reboot-at-job-boundary");
  EXPECT_NE(v.reasons[0].reason.find("amdgpu_cper_ring_write x3"), std::string::npos);

  s.tasks.resize(2);
  EXPECT_EQ(judge({}, &s).verdict, "healthy")
      << "two stuck tasks are below the default threshold of 3";
}

TEST(NodeHealth, ManyTasksStuckOutsideGpuPathsOnlyDegrade) {
  DStateSample s;
  for (int64_t pid = 1; pid <= 20; ++pid) {
    DStateTask t;
    t.pid = pid;
    t.wchan = "nfs_wait_on_request";
    t.persistent = true;
    s.tasks.push_back(t);
  }
  const NodeVerdict v = judge({}, &s);
  EXPECT_EQ(v.verdict, "degraded");
  EXPECT_EQ(v.reasons[0].reason, "20 task(s) stuck in D state");
}

TEST(NodeHealth, PcieFatalDrainsNonFatalDegrades) {
  KernelEvent fatal = make_event("aer1", "pcie-aer", kNow - kHour);
  fatal.severity = Severity::kCritical;
  EXPECT_EQ(judge({fatal}).verdict, "drain-recommended");
  KernelEvent nonfatal = make_event("aer2", "pcie-aer", kNow - kHour);
  nonfatal.severity = Severity::kError;
  EXPECT_EQ(judge({nonfatal}).verdict, "degraded");
  KernelEvent corrected = make_event("aer3", "pcie-aer", kNow - kHour);
  corrected.severity = Severity::kWarning;
  EXPECT_EQ(judge({corrected}).verdict, "healthy");
}

TEST(NodeHealth, HungTasksDegradeAndPersistentOnesDrain) {
  std::vector<KernelEvent> events;
  events.push_back(make_event("h0", "hung-task", kNow - kHour));
  EXPECT_EQ(judge(events).verdict, "degraded");
  for (int i = 1; i < 10; ++i)
    events.push_back(make_event("h" + std::to_string(i), "hung-task", kNow - kHour));
  EXPECT_EQ(judge(events).verdict, "drain-recommended");
}

TEST(NodeHealth, StuckSysfsReadsDegrade) {
  EXPECT_EQ(judge({}, nullptr, 1).verdict, "degraded");
  KernelEvent stuck = make_event("s1", "stuck-sysfs-read", kNow - kHour);
  stuck.summary = "read of /sys/.../umc_err_count has not returned for 30s";
  const NodeVerdict v = judge({stuck});
  EXPECT_EQ(v.verdict, "degraded");
  EXPECT_EQ(v.reasons[0].event_ids, std::vector<std::string>{"s1"});
}

TEST(NodeHealth, ApplicationSideEventsDoNotMakeTheNodeUnhealthy) {
  EXPECT_EQ(judge({make_event("o1", "oom-kill", kNow - kHour),
                   make_event("p1", "gpu-page-fault", kNow - kHour)})
                .verdict,
            "healthy");
}

TEST(NodeHealth, AFileSystemOrANetworkAdapterTheNodeCannotUseDegradesIt) {
  for (const char* kind : {"nfs-timeout", "lustre-error", "nic-init-failure"}) {
    KernelEvent e = make_event("n1", kind, kNow - kHour);
    e.action = "investigate";
    EXPECT_EQ(judge({e}).verdict, "degraded") << kind;
    e.time_usec = e.last_usec = kNow - 30 * kHour;
    EXPECT_EQ(judge({e}).verdict, "healthy") << kind << " outside the health window";
  }
  KernelEvent lost = make_event("l1", "lustre-error", kNow - kHour);
  lost.action = "none";  // a lost connection that the client restores on its own
  EXPECT_EQ(judge({lost}).verdict, "healthy");
}

TEST(NodeHealth, ReasonsAreOrderedWorstFirstAndMerged) {
  KernelEvent ce = make_event("ce", "gpu-ras-correctable", kNow - kHour);
  ce.count = 12;
  KernelEvent ue1 = make_event("ue1", "gpu-ras-uncorrectable", kNow - kHour);
  ue1.summary = "uncorrectable umc error on card0";
  KernelEvent ue2 = ue1;
  ue2.id = "ue2";
  const NodeVerdict v = judge({ce, ue1, ue2});
  EXPECT_EQ(v.verdict, "drain-recommended");
  ASSERT_EQ(v.reasons.size(), 2u);
  EXPECT_EQ(v.reasons[0].event_ids, (std::vector<std::string>{"ue1", "ue2"}));
  EXPECT_EQ(v.reasons[1].reason, "12 correctable GPU RAS error(s) in the health window");
}

// An RCU stall report as the kernel prints it: `jiffies` is its t=, the age of the stalled grace
// period.
KernelEvent rcu_stall(const std::string& id, int64_t at, const std::string& jiffies,
                      const std::string& flavor = "rcu_sched") {
  KernelEvent e = make_event(id, "rcu-stall", at);
  e.severity = Severity::kError;
  e.action = "investigate";
  e.fields["flavor"] = flavor;
  e.fields["jiffies"] = jiffies;
  e.lines = {"INFO: " + flavor + " detected stall on CPU 1 (t=" + jiffies + " jiffies)"};
  return e;
}

TEST(NodeHealth, AnRcuGracePeriodTheKernelWarnsAboutAgainRecommendsADrain) {
  // A storage server: CPU 1 stalls the grace period; the kernel warns at one stall timeout
  // (t=15000) and, three minutes later with the same grace period still open, again at t=60031.
  const std::vector<KernelEvent> events = {rcu_stall("s1", kNow - 3 * kHour, "15000"),
                                           rcu_stall("s2", kNow - 3 * kHour + 180000000, "60031")};
  const NodeVerdict v = judge(events);
  EXPECT_EQ(v.verdict, "drain-recommended");
  ASSERT_FALSE(v.reasons.empty());
  EXPECT_EQ(v.reasons[0].action, "drain");
  EXPECT_EQ(v.reasons[0].event_ids, std::vector<std::string>{"s2"});
  EXPECT_NE(v.reasons[0].reason.find("repeated RCU stall warning"), std::string::npos);
}

TEST(NodeHealth, RcuStallsThatEachEndAtTheirFirstWarningOnlyDegrade) {
  // Stalls on three CPUs hours apart, each reported once at one stall timeout: every grace period
  // ended after its first warning.
  const std::vector<KernelEvent> events = {rcu_stall("a", kNow - 5 * kHour, "15000"),
                                           rcu_stall("b", kNow - 3 * kHour, "15002"),
                                           rcu_stall("c", kNow - kHour, "15000")};
  EXPECT_EQ(judge(events).verdict, "degraded");
  // A single long report with nothing to compare it with is a first warning as far as we know.
  EXPECT_EQ(judge({rcu_stall("d", kNow - kHour, "105060")}).verdict, "degraded");
}

TEST(NodeHealth, AnRcuStallTheKernelDoubtsOrOfAnotherFlavorIsNoRepeat) {
  // After a live migration the clock jumps: the kernel marks the report "(false positive?)".
  KernelEvent doubted = rcu_stall("m2", kNow - kHour, "60000");
  doubted.lines.push_back(
      "rcu: \t0-...!: (0 ticks this GP) idle=5fc/0/0x0 fqs=0  (false positive?)");
  EXPECT_EQ(judge({rcu_stall("m1", kNow - 2 * kHour, "5250"), doubted}).verdict, "degraded");
  // rcu_bh and rcu_sched each have their own grace periods: one's long report is not the other's
  // repeat.
  EXPECT_EQ(judge({rcu_stall("f1", kNow - 2 * kHour, "2100", "rcu_sched"),
                   rcu_stall("f2", kNow - kHour, "21000", "rcu_bh")})
                .verdict,
            "degraded");
}

TEST(NodeHealth, TheRcuRepeatRuleCanBeTurnedOff) {
  HealthPolicy off;
  off.rcu_stall_repeat_drain = 0;
  const std::vector<KernelEvent> events = {rcu_stall("s1", kNow - 2 * kHour, "21000"),
                                           rcu_stall("s2", kNow - kHour, "84003")};
  EXPECT_EQ(judge(events, nullptr, 0, off).verdict, "degraded");
  EXPECT_EQ(judge(events).verdict, "drain-recommended");
}

// An Xid as the driver logs it for a process on the GPU at `device`; the catalog's action for
// Xid 31 and 43 is none (the application's fault).
KernelEvent xid_on(int code, const std::string& device, int64_t at, const std::string& id) {
  KernelEvent e = xid(code, "none", id);
  e.device = device;
  e.time_usec = e.last_usec = at;
  return e;
}

TEST(NodeHealth, Xid31FaultsComingBackOnOneGpuFromProcessAfterProcessDegradeTheNode) {
  // Three processes, each killed by an MMU fault on GPU db:00 within the hour; no other GPU faults.
  const std::vector<KernelEvent> events = {
      xid_on(31, "0000:db:00", kNow - 3 * kHour, "x1"),
      xid_on(31, "0000:db:00", kNow - 3 * kHour + 1366LL * 1000000, "x2"),
      xid_on(31, "0000:db:00", kNow - 3 * kHour + 3014LL * 1000000, "x3")};
  const NodeVerdict v = judge(events);
  EXPECT_EQ(v.verdict, "degraded");
  ASSERT_EQ(v.reasons.size(), 1u);
  EXPECT_EQ(v.reasons[0].action, "investigate");
  EXPECT_EQ(v.reasons[0].event_ids, (std::vector<std::string>{"x1", "x2", "x3"}));
  EXPECT_NE(v.reasons[0].reason.find("3 separate bursts on GPU 0000:db:00"), std::string::npos);
}

TEST(NodeHealth, AnXid31BurstOrFaultsSpreadOverGpusAreTheApplications) {
  // One process faulting: a single Xid 31.
  EXPECT_EQ(judge({xid_on(31, "0000:db:00", kNow - kHour, "solo")}).verdict, "healthy");
  // One fault printed as a burst of lines a minute apart is still one burst.
  EXPECT_EQ(judge({xid_on(31, "0000:db:00", kNow - kHour, "b1"),
                   xid_on(31, "0000:db:00", kNow - kHour + 60LL * 1000000, "b2")})
                .verdict,
            "healthy");
  // The same job faulting on two GPUs, twice: the application, not a GPU.
  EXPECT_EQ(judge({xid_on(31, "0000:3d:00", kNow - 2 * kHour, "d1"),
                   xid_on(31, "0000:db:00", kNow - 2 * kHour, "d2"),
                   xid_on(31, "0000:3d:00", kNow - kHour, "d3"),
                   xid_on(31, "0000:db:00", kNow - kHour, "d4")})
                .verdict,
            "healthy");
  // Repeats a day apart fall out of the health window one by one.
  EXPECT_EQ(judge({xid_on(31, "0000:db:00", kNow - 30 * kHour, "old"),
                   xid_on(31, "0000:db:00", kNow - kHour, "new")})
                .verdict,
            "healthy");
}

TEST(NodeHealth, Xid43RecurringOnOneGpuAcrossProcessesLeavesItHealthy) {
  // NVIDIA's catalog: after Xid 43 "the GPU remains in a healthy state"; it names no count that
  // would say otherwise, so four processes stopped on one GPU within hours are four applications.
  std::vector<KernelEvent> events;
  events.reserve(4);
  for (int i = 0; i < 4; ++i)
    events.push_back(xid_on(43, "0000:3d:00", kNow - (4 - i) * kHour, "s" + std::to_string(i)));
  EXPECT_EQ(judge(events).verdict, "healthy");
}

TEST(NodeHealth, TheXid31RepeatRuleCanBeTurnedOff) {
  HealthPolicy off;
  off.xid31_repeat_degraded = 0;
  const std::vector<KernelEvent> events = {xid_on(31, "0000:db:00", kNow - 2 * kHour, "x1"),
                                           xid_on(31, "0000:db:00", kNow - kHour, "x2")};
  EXPECT_EQ(judge(events, nullptr, 0, off).verdict, "healthy");
  EXPECT_EQ(judge(events).verdict, "degraded");
}

}  // namespace
}  // namespace triage::collector
