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

}  // namespace
}  // namespace triage::collector
