// The InfiniBand/RoCE port evidence: reading the ports from a sysfs tree (collector/sysfs/
// ib_ports.h), the judgements over plain values (ib_judgement.h), and the events successive
// readings make (ib_port_watch.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>

#include "collector/health/node_health.h"
#include "collector/sysfs/hw_counters.h"
#include "collector/sysfs/ib_judgement.h"
#include "collector/sysfs/ib_port_watch.h"
#include "common/build_config.h"
#include "common/rules_file.h"
#include "tests/agent/test_support.h"

namespace triage::collector {
namespace {

using agent::testing::TempDir;
using agent::testing::write_file;

constexpr int64_t kSec = 1000000;

// One port as the kernel lays it out: state, phys_state, rate, link_layer and counters/.
void write_port(const std::string& ib, const std::string& dev, const std::string& port,
                const std::string& state, const std::string& rate,
                const std::vector<std::pair<std::string, std::string>>& counters) {
  const std::string p = ib + "/" + dev + "/ports/" + port;
  write_file(p + "/state", state == "ACTIVE" ? "4: ACTIVE\n" : "1: DOWN\n");
  write_file(p + "/phys_state", state == "ACTIVE" ? "5: LinkUp\n" : "3: Disabled\n");
  write_file(p + "/rate", rate + "\n");
  write_file(p + "/link_layer", "InfiniBand\n");
  for (const auto& [name, value] : counters)
    write_file(std::string(p).append("/counters/").append(name), value + "\n");
}

HwCounterReader::Options options(const std::string& root) {
  HwCounterReader::Options o;
  o.sysfs_root = root;
  o.read_timeout = std::chrono::milliseconds(200);
  o.max_stuck = 4;
  return o;
}

const IbPort* find_port(const SysfsSnapshot& s, const std::string& name) {
  for (const auto& p : s.ib) {
    if (p.name() == name) return &p;
  }
  return nullptr;
}

IbPort port(const std::string& dev, const std::string& state, double rate,
            std::map<std::string, uint64_t> counters = {}) {
  IbPort p;
  p.device = dev;
  p.port = "1";
  p.state = state;
  p.phys_state = state == "ACTIVE" ? "LinkUp" : "Disabled";
  p.link_layer = "InfiniBand";
  p.rate_gbps = rate;
  p.counters = std::move(counters);
  p.path = "/sys/class/infiniband/" + dev + "/ports/1";
  return p;
}

SysfsSnapshot snapshot(int64_t t_s, std::vector<IbPort> ports) {
  SysfsSnapshot s;
  s.time_usec = 1'700'000'000 * kSec + t_s * kSec;
  s.ib = std::move(ports);
  return s;
}

std::vector<const KernelEvent*> of_kind(const std::vector<KernelEvent>& evs, const char* kind) {
  std::vector<const KernelEvent*> out;
  for (const auto& e : evs) {
    if (e.kind == kind) out.push_back(&e);
  }
  return out;
}

TEST(IbPortFormats, StateAndRateFilesParseAsTheKernelPrintsThem) {
  EXPECT_EQ(parse_ib_state("4: ACTIVE\n"), "ACTIVE");
  EXPECT_EQ(parse_ib_state("5: LinkUp\n"), "LinkUp");
  EXPECT_EQ(parse_ib_state("InfiniBand\n"), "InfiniBand") << "link_layer has no number";
  EXPECT_FALSE(parse_ib_state(""));
  EXPECT_FALSE(parse_ib_state("x: ACTIVE"));
  EXPECT_FALSE(parse_ib_state("4: NOT ACTIVE"));
  EXPECT_EQ(parse_ib_rate("400 Gb/sec (4X NDR)\n"), 400.0);
  EXPECT_EQ(parse_ib_rate("2.5 Gb/sec (1X SDR)"), 2.5);
  EXPECT_FALSE(parse_ib_rate("fast"));
  EXPECT_FALSE(parse_ib_rate("100 Mb/sec"));
}

TEST(IbPortReader, ReadsEveryPortsStateRateAndTheCountersThatExist) {
  TempDir dir("ib");
  const std::string root = dir / "sys";
  const std::string ib = root + "/class/infiniband";
  write_port(ib, "mlx5_0", "1", "ACTIVE", "400 Gb/sec (4X NDR)",
             {{"link_downed", "2"}, {"symbol_error", "17"}});
  // mlx5_1 has no counters/ at all (a RoCE function without them) and one hw counter.
  write_port(ib, "mlx5_1", "1", "DOWN", "100 Gb/sec (4X EDR)", {});
  write_file(ib + "/mlx5_1/ports/1/hw_counters/rnr_nak_retry_err", "5\n");
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  EXPECT_EQ(s.errors, std::vector<std::string>{});
  ASSERT_EQ(s.ib.size(), 2u);
  const IbPort* a = find_port(s, "mlx5_0/1");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->state, "ACTIVE");
  EXPECT_EQ(a->phys_state, "LinkUp");
  EXPECT_EQ(a->rate_gbps, 400.0);
  EXPECT_EQ(a->counters.at("symbol_error"), 17u);
  EXPECT_EQ(a->counters.count("port_rcv_errors"), 0u) << "a missing counter is left out";
  const IbPort* b = find_port(s, "mlx5_1/1");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->state, "DOWN");
  EXPECT_EQ(b->counters.at("hw_counters/rnr_nak_retry_err"), 5u);
}

TEST(IbPortReader, JunkInAFileIsAnErrorNamingThePathAndTheRestIsRead) {
  TempDir dir("ib");
  const std::string root = dir / "sys";
  const std::string ib = root + "/class/infiniband";
  write_port(ib, "mlx5_0", "1", "ACTIVE", "400 Gb/sec (4X NDR)", {{"symbol_error", "lots"}});
  write_file(ib + "/mlx5_0/ports/1/rate", "\x01\x02 binary junk");
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  ASSERT_EQ(s.errors.size(), 2u);
  const auto names = [&](const char* f) {
    return std::any_of(s.errors.begin(), s.errors.end(),
                       [&](const std::string& e) { return e.find(f) != std::string::npos; });
  };
  EXPECT_TRUE(names("/counters/symbol_error: expected a count"));
  EXPECT_TRUE(names("/rate: expected 'N Gb/sec"));
  ASSERT_EQ(s.ib.size(), 1u);
  EXPECT_EQ(s.ib[0].state, "ACTIVE");
  EXPECT_FALSE(s.ib[0].rate_gbps);
}

TEST(IbPortReader, ACounterReadThatHangsIsStuckAndTheOtherFilesAreStillRead) {
  TempDir dir("ib");
  const std::string root = dir / "sys";
  const std::string ib = root + "/class/infiniband";
  write_port(ib, "mlx5_0", "1", "ACTIVE", "400 Gb/sec (4X NDR)", {{"link_downed", "0"}});
  const std::string hung = ib + "/mlx5_0/ports/1/counters/symbol_error";
  ASSERT_EQ(::mkfifo(hung.c_str(), 0644), 0);
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  ASSERT_EQ(s.stuck.size(), 1u);
  EXPECT_EQ(s.stuck[0].path, hung);
  ASSERT_EQ(s.ib.size(), 1u);
  EXPECT_EQ(s.ib[0].state, "ACTIVE");
  EXPECT_EQ(s.ib[0].counters.count("link_downed"), 1u);
  const SysfsSnapshot again = reader.read();
  EXPECT_EQ(again.skipped, std::vector<std::string>{hung}) << "skipped until the kernel returns";
  EXPECT_EQ(reader.reader().stuck_workers(), 1u);
  const int fd = ::open(hung.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
  EXPECT_TRUE(agent::testing::eventually([&] { return reader.reader().stuck_workers() == 0; }));
}

TEST(IbPortReader, TheInfinibandDirCanBeGivenApartFromTheSysfsRoot) {
  TempDir dir("ib");
  write_port(dir / "fake-ib", "mlx5_0", "1", "DOWN", "400 Gb/sec (4X NDR)", {});
  HwCounterReader::Options o = options(dir / "no-sys");
  o.infiniband_dir = dir / "fake-ib";
  HwCounterReader reader(o);
  EXPECT_EQ(ib_ports_down(reader.read().ib), std::vector<std::string>{"mlx5_0/1"});
}

TEST(IbJudgement, APortIsDownUnlessActiveAndLinkUp) {
  EXPECT_FALSE(ib_port_down(port("mlx5_0", "ACTIVE", 400)));
  EXPECT_TRUE(ib_port_down(port("mlx5_0", "DOWN", 400)));
  IbPort polling = port("mlx5_0", "ACTIVE", 400);
  polling.phys_state = "Polling";
  EXPECT_TRUE(ib_port_down(polling));
  IbPort unread = port("mlx5_0", "", 400);
  unread.phys_state = "";
  EXPECT_FALSE(ib_port_down(unread)) << "an unreadable port is not known to be down";
  EXPECT_EQ(ib_ports_down({port("mlx5_0", "ACTIVE", 400), port("mlx5_1", "DOWN", 400)}),
            std::vector<std::string>{"mlx5_1/1"});
}

TEST(IbJudgement, APortSlowerThanItsPeersOfTheSameLinkLayerIsNamed) {
  IbPort roce = port("mlx5_9", "ACTIVE", 25);
  roce.link_layer = "Ethernet";
  const auto slow =
      ib_ports_below_peers({port("mlx5_0", "ACTIVE", 400), port("mlx5_1", "ACTIVE", 200), roce,
                            port("mlx5_2", "DOWN", 800)});
  ASSERT_EQ(slow.size(), 1u) << "the Ethernet port has no Ethernet peer; the down one counts not";
  EXPECT_EQ(slow[0].port, "mlx5_1/1");
  EXPECT_EQ(slow[0].rate_gbps, 200);
  EXPECT_EQ(slow[0].peer_gbps, 400);
}

TEST(IbJudgement, FlapsAndCounterRatesFollowGpudAndNvsentinel) {
  const IbThresholds t;  // the built-in defaults equal the shipped rules
  EXPECT_FALSE(ib_is_flap(24, t));
  EXPECT_TRUE(ib_is_flap(25, t));
  const int64_t now = 100'000 * kSec;
  EXPECT_EQ(ib_flaps_in_window({now - int64_t{13} * 3600 * kSec, now - int64_t{3600} * kSec, now},
                               now, t),
            2);
  const IbCounterLimit any{"link_downed", 0, 1, "investigate"};
  EXPECT_FALSE(ib_counter_over_limit(0, 10, any));
  EXPECT_TRUE(ib_counter_over_limit(1, 10, any));
  const IbCounterLimit symbol{"symbol_error", 10, 1, "investigate"};
  EXPECT_FALSE(ib_counter_over_limit(100, 10, symbol)) << "10/s over 10 s";
  EXPECT_TRUE(ib_counter_over_limit(101, 10, symbol));
  const IbCounterLimit recovery{"link_error_recovery", 5, 60, "investigate"};
  EXPECT_FALSE(ib_counter_over_limit(5, 10, recovery)) << "one poll within the minute: 5 allowed";
  EXPECT_TRUE(ib_counter_over_limit(6, 10, recovery));
  EXPECT_TRUE(ib_counter_over_limit(11, 120, recovery));
}

TEST(IbJudgement, APortDownFourMinutesWithoutABreakIsStuckGpudsDrop) {
  const IbThresholds t;
  EXPECT_FALSE(ib_is_stuck_down(0, 239 * kSec, t));
  EXPECT_TRUE(ib_is_stuck_down(0, 240 * kSec, t));
}

TEST(IbThresholdsFile, TheShippedRulesLoadCleanAndMatchTheBuiltIns) {
  const RulesLoad load = parse_rules_file(std::string(kSourceRulesDir) + "/ib-ports.rules");
  ASSERT_EQ(load.errors.size(), 0u);
  const IbThresholdsLoad t = ib_thresholds_from(load.sections);
  ASSERT_EQ(t.errors.size(), 0u);
  const IbThresholds builtin;
  EXPECT_EQ(t.thresholds.flap_down_min_s, builtin.flap_down_min_s);
  EXPECT_EQ(t.thresholds.flap_count, builtin.flap_count);
  EXPECT_EQ(t.thresholds.flap_window_s, builtin.flap_window_s);
  EXPECT_EQ(t.thresholds.flap_action, "drain");
  EXPECT_EQ(t.thresholds.stuck_down_s, builtin.stuck_down_s);
  EXPECT_EQ(t.thresholds.stuck_action, "drain");
  EXPECT_EQ(t.thresholds.stuck_remedy, "reboot");
  const auto symbol =
      std::find_if(t.thresholds.counters.begin(), t.thresholds.counters.end(),
                   [](const IbCounterLimit& l) { return l.counter == "symbol_error"; });
  ASSERT_NE(symbol, t.thresholds.counters.end());
  EXPECT_EQ(symbol->max_increase, 10);
  EXPECT_EQ(symbol->per_s, 1);
}

TEST(IbThresholdsFile, BadLinesAreErrorsNamingFileLineAndKey) {
  const RulesLoad load = parse_rules_text(
      "[ib-port-thresholds default]\nflap-count = 2\nflap-action = reboot\n"
      "counter = symbol_error ten 1\ncolour = blue\nstuck-remedy = power-cycle\n",
      "site.rules");
  const IbThresholdsLoad t = ib_thresholds_from(load.sections);
  ASSERT_EQ(t.errors.size(), 4u);
  EXPECT_EQ(t.errors[0].line(), 3);
  EXPECT_NE(std::string(t.errors[0].what()).find("flap-action"), std::string::npos);
  EXPECT_EQ(t.errors[1].file(), "site.rules");
  EXPECT_NE(t.errors[1].message().find("MAX-INCREASE 'ten'"), std::string::npos);
  EXPECT_NE(t.errors[2].message().find("colour"), std::string::npos);
  EXPECT_EQ(t.errors[3].line(), 6);
  EXPECT_NE(t.errors[3].message().find("stuck-remedy = 'power-cycle': expected reboot or none"),
            std::string::npos)
      << t.errors[3].message();
  EXPECT_EQ(t.thresholds.flap_count, 2) << "the good lines still apply";
}

TEST(IbPortWatch, APortThatGoesDownAndComesBackIsOneEventWithHowLongItWasDown) {
  IbPortWatch w("gpu-a017", "boot-a", IbThresholds{});
  EXPECT_TRUE(w.update(snapshot(0, {port("mlx5_0", "ACTIVE", 400)})).empty());
  const auto down = w.update(snapshot(10, {port("mlx5_0", "DOWN", 400)}));
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].kind, "ib-port-down");
  EXPECT_EQ(down[0].severity, Severity::kError);
  EXPECT_EQ(down[0].fields.at("port"), "mlx5_0/1");
  EXPECT_EQ(down[0].host, "gpu-a017");
  EXPECT_NE(down[0].summary.find("port mlx5_0/1 is down"), std::string::npos);
  EXPECT_TRUE(w.update(snapshot(20, {port("mlx5_0", "DOWN", 400)})).empty()) << "still down";
  const auto up = w.update(snapshot(40, {port("mlx5_0", "ACTIVE", 400)}));
  ASSERT_EQ(up.size(), 1u) << "one flap is not yet a flapping port";
  EXPECT_EQ(up[0].id, down[0].id) << "the same event, updated";
  EXPECT_EQ(up[0].time_usec, down[0].time_usec);
  EXPECT_NE(up[0].summary.find("down for 30 s"), std::string::npos) << up[0].summary;
  EXPECT_EQ(up[0].fields.at("state"), "ACTIVE");
}

TEST(IbPortWatch, ThreeLongDownsIn12HoursMakeAFlapEvent) {
  IbPortWatch w("gpu-a017", "boot-a", IbThresholds{});
  std::vector<KernelEvent> flaps;
  int64_t t = 0;
  for (int i = 0; i < 3; ++i) {
    w.update(snapshot(t, {port("mlx5_0", "DOWN", 400)}));
    t += 30;
    for (auto& e : w.update(snapshot(t, {port("mlx5_0", "ACTIVE", 400)}))) {
      if (e.kind == "ib-port-flap") flaps.push_back(e);
    }
    t += 3600;
  }
  ASSERT_EQ(flaps.size(), 1u);
  EXPECT_EQ(flaps[0].count, 3u);
  EXPECT_EQ(flaps[0].action, "drain");
  EXPECT_NE(flaps[0].summary.find("flapped 3 times in 12 h"), std::string::npos);

  IbPortWatch brief("gpu-a017", "boot-a", IbThresholds{});
  for (int i = 0; i < 5; ++i) {
    brief.update(snapshot(int64_t{i} * 100, {port("mlx5_0", "DOWN", 400)}));
    const auto evs = brief.update(snapshot(i * 100 + 10, {port("mlx5_0", "ACTIVE", 400)}));
    EXPECT_TRUE(of_kind(evs, "ib-port-flap").empty()) << "10 s down is no flap (GPUd: 25 s)";
  }
}

TEST(IbPortWatch, APortThatStaysDownTenMinutesTurnsItsEventIntoADrainARebootClears) {
  IbPortWatch w("gpu-a017", "boot-a", IbThresholds{});
  w.update(snapshot(0, {port("mlx5_0", "ACTIVE", 400, {{"link_downed", 4}})}));
  const auto down = w.update(snapshot(10, {port("mlx5_0", "DOWN", 400, {{"link_downed", 5}})}));
  ASSERT_EQ(down.size(), 1u);
  EXPECT_EQ(down[0].action, "investigate");
  EXPECT_EQ(down[0].fields.count("remedy"), 0u) << "just down: nothing says it will not come up";
  std::vector<KernelEvent> stuck;
  for (int64_t t = 20; t <= 610; t += 10) {
    for (auto& e : w.update(snapshot(t, {port("mlx5_0", "DOWN", 400, {{"link_downed", 5}})})))
      stuck.push_back(e);
  }
  ASSERT_EQ(stuck.size(), 1u) << "said once, at 4 min";
  EXPECT_EQ(stuck[0].id, down[0].id) << "the same event, updated";
  EXPECT_EQ(stuck[0].kind, "ib-port-down");
  EXPECT_EQ(stuck[0].action, "drain");
  EXPECT_EQ(stuck[0].fields.at("remedy"), "reboot");
  EXPECT_EQ(stuck[0].time_usec, down[0].time_usec);
  EXPECT_NE(stuck[0].summary.find("port mlx5_0/1 has been down for 240 s and does not come up"),
            std::string::npos)
      << stuck[0].summary;
  const auto back = w.update(snapshot(620, {port("mlx5_0", "ACTIVE", 400, {{"link_downed", 5}})}));
  const auto came_back = of_kind(back, "ib-port-down");
  ASSERT_EQ(came_back.size(), 1u);
  EXPECT_EQ(came_back[0]->action, "investigate");
  EXPECT_EQ(came_back[0]->fields.count("remedy"), 0u) << "back up: nothing left to reboot for";
}

TEST(IbPortWatch, APortDownTenSecondsOrOneThatKeepsRetrainingIsNotStuck) {
  IbPortWatch brief("gpu-a017", "boot-a", IbThresholds{});
  brief.update(snapshot(0, {port("mlx5_0", "DOWN", 400, {{"link_downed", 1}})}));
  EXPECT_TRUE(
      brief.update(snapshot(10, {port("mlx5_0", "DOWN", 400, {{"link_downed", 1}})})).empty());
  // Down at every reading for 10 min, but link_downed moves: the link comes up between readings
  // and falls again (a flap too fast to see), which is not a port that will not come up.
  IbPortWatch retraining("gpu-a017", "boot-a", IbThresholds{});
  for (uint64_t i = 0; i <= 20; ++i) {
    const auto evs = retraining.update(snapshot(
        static_cast<int64_t>(i) * 30, {port("mlx5_0", "DOWN", 400, {{"link_downed", i}})}));
    for (const auto& e : evs)
      EXPECT_EQ(e.fields.count("remedy"), 0u) << "at " << i * 30 << " s: " << e.summary;
  }
}

TEST(IbPortWatch, ACounterRisingFasterThanItsLimitIsAnEventOthersAreNot) {
  IbThresholds t;
  t.counters = {{"symbol_error", 10, 1, "investigate"},
                {"local_link_integrity_errors", 0, 1, "drain"}};
  IbPortWatch w("gpu-a017", "boot-a", t);
  EXPECT_TRUE(
      w.update(snapshot(0, {port("mlx5_0", "ACTIVE", 400,
                                 {{"symbol_error", 1000}, {"local_link_integrity_errors", 0}})}))
          .empty())
      << "the first reading is the baseline, whatever its values";
  EXPECT_TRUE(
      w.update(snapshot(10, {port("mlx5_0", "ACTIVE", 400,
                                  {{"symbol_error", 1050}, {"local_link_integrity_errors", 0}})}))
          .empty());
  const auto evs =
      w.update(snapshot(20, {port("mlx5_0", "ACTIVE", 400,
                                  {{"symbol_error", 1500}, {"local_link_integrity_errors", 1}})}));
  ASSERT_EQ(evs.size(), 2u);
  EXPECT_EQ(evs[0].fields.at("counter"), "symbol_error");
  EXPECT_EQ(evs[0].severity, Severity::kWarning);
  EXPECT_NE(evs[0].summary.find("rose by 450 in 10 s"), std::string::npos) << evs[0].summary;
  EXPECT_EQ(evs[1].action, "drain");
  EXPECT_EQ(evs[1].severity, Severity::kError);
}

TEST(IbPortWatch, ASlowPortIsReportedOncePerRate) {
  IbPortWatch w("gpu-a017", "boot-a", IbThresholds{});
  const auto first =
      w.update(snapshot(0, {port("mlx5_0", "ACTIVE", 400), port("mlx5_1", "ACTIVE", 200)}));
  ASSERT_EQ(of_kind(first, "ib-port-rate").size(), 1u);
  EXPECT_NE(first[0].summary.find("mlx5_1/1 runs at 200 Gb/s, its peers at 400"),
            std::string::npos);
  EXPECT_TRUE(w.update(snapshot(10, {port("mlx5_0", "ACTIVE", 400), port("mlx5_1", "ACTIVE", 200)}))
                  .empty());
}

TEST(IbPortHealth, APortDownNowDegradesTheNodeOneBackDoesNotAFlapDrains) {
  IbPortWatch w("gpu-a017", "boot-a", IbThresholds{});
  w.update(snapshot(0, {port("mlx5_0", "ACTIVE", 400)}));
  std::vector<KernelEvent> events = w.update(snapshot(10, {port("mlx5_0", "DOWN", 400)}));
  HealthInputs in;
  in.host = "gpu-a017";
  in.boot_id = "boot-a";
  in.now_usec = snapshot(11, {}).time_usec;
  in.events = &events;
  EXPECT_EQ(evaluate_node_health(in, HealthPolicy{}).verdict, "degraded");
  events = w.update(snapshot(40, {port("mlx5_0", "ACTIVE", 400)}));
  EXPECT_EQ(evaluate_node_health(in, HealthPolicy{}).verdict, "healthy");
  KernelEvent flap = events[0];
  flap.kind = "ib-port-flap";
  flap.action = "drain";
  events = {flap};
  EXPECT_EQ(evaluate_node_health(in, HealthPolicy{}).verdict, "drain-recommended");
}

}  // namespace
}  // namespace triage::collector
