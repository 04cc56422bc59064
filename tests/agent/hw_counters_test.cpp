#include "collector/sysfs/hw_counters.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/agent/test_support.h"

namespace triage::collector {
namespace {

using agent::testing::TempDir;
using agent::testing::write_file;
using agent::testing::write_sysfs_tree;

HwCounterReader::Options options(const std::string& root) {
  HwCounterReader::Options o;
  o.sysfs_root = root;
  o.read_timeout = std::chrono::milliseconds(200);
  o.max_stuck = 4;
  return o;
}

const RasCounter* find_ras(const SysfsSnapshot& s, const std::string& card,
                           const std::string& block) {
  for (const auto& c : s.ras) {
    if (c.card == card && c.block == block) return &c;
  }
  return nullptr;
}

TEST(HwCounterFormats, RasAndAerFilesParseAsTheKernelPrintsThem) {
  EXPECT_EQ(parse_ras_count("ue: 0\nce: 3\n"), std::make_pair(uint64_t{0}, uint64_t{3}));
  EXPECT_EQ(parse_ras_count("ue: 2\nce: 0\nde: 5\n"), std::make_pair(uint64_t{2}, uint64_t{0}));
  EXPECT_FALSE(parse_ras_count("Not supported\n"));
  EXPECT_EQ(parse_aer_total("RxErr 0\nBadTLP 2\nBadDLLP 1\nRollover 0\nTimeout 0\nNonFatalErr 0\n"
                            "CorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 3\n"),
            3u);
  EXPECT_EQ(
      parse_aer_total("Undefined 0\nDLP 1\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nTOTAL_ERR_FATAL 1\n"),
      1u);
  EXPECT_EQ(parse_aer_total("DLP 1\nTLP 2\n"), 3u) << "older kernels print no total";
  EXPECT_FALSE(parse_aer_total(""));
  EXPECT_EQ(ras_metric_block("xgmi_wafl"), "xgmi");
  EXPECT_EQ(ras_metric_block("umc"), "umc");
}

TEST(HwCounterReader, ReadsEveryGpusRasBlocksAndAerCounters) {
  TempDir dir("sysfs");
  const std::string root = dir / "sys";
  write_sysfs_tree(root, {{0,
                           "0000:c1:00.0",
                           {{"umc", {0, 3}}, {"xgmi_wafl", {0, 0}}, {"gfx", {0, 0}}},
                           {{"correctable", 4}, {"nonfatal", 0}, {"fatal", 0}}},
                          {1, "0000:c2:00.0", {{"umc", {1, 0}}}, {}}});
  // A NIC with AER counters: not a GPU, still read.
  write_file(root + "/bus/pci/devices/0000:41:00.0/aer_dev_fatal",
             "Undefined 0\nTOTAL_ERR_FATAL 0\n");
  write_file(root + "/class/drm/card0/device/ras/features", "feature mask: 0x3fff\n");
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  EXPECT_TRUE(s.errors.empty()) << s.errors.front();
  EXPECT_TRUE(s.stuck.empty());
  ASSERT_EQ(s.ras.size(), 4u);
  const RasCounter* umc0 = find_ras(s, "card0", "umc");
  ASSERT_NE(umc0, nullptr);
  EXPECT_EQ(umc0->ce, 3u);
  EXPECT_EQ(umc0->device, "0000:c1:00.0");
  EXPECT_EQ(find_ras(s, "card1", "umc")->ue, 1u);
  ASSERT_EQ(s.aer.size(), 4u);
  int gpu_aer = 0;
  for (const auto& a : s.aer) {
    if (a.card == "card0") ++gpu_aer;
    if (a.device == "0000:41:00.0") {
      EXPECT_TRUE(a.card.empty());
    }
  }
  EXPECT_EQ(gpu_aer, 3) << "the GPU's AER files are read once, through the card";
}

TEST(HwCounterReader, MalformedFilesAreErrorsNamingThePath) {
  TempDir dir("sysfs");
  const std::string root = dir / "sys";
  write_sysfs_tree(root, {{0, "0000:c1:00.0", {{"umc", {0, 0}}}, {}}});
  write_file(root + "/devices/pci0000:00/0000:c1:00.0/ras/umc_err_count", "\x01\x02 binary junk");
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  ASSERT_EQ(s.errors.size(), 1u);
  EXPECT_NE(s.errors[0].find("umc_err_count"), std::string::npos);
}

TEST(HwCounterReader, AReadThatHangsInTheKernelIsReportedStuckAndSkippedUntilItReturns) {
  TempDir dir("sysfs");
  const std::string root = dir / "sys";
  write_sysfs_tree(root, {{0, "0000:c1:00.0", {{"umc", {0, 1}}}, {}}});
  const std::string hung = root + "/devices/pci0000:00/0000:c1:00.0/ras/gfx_err_count";
  ASSERT_EQ(::mkfifo(hung.c_str(), 0644), 0);
  HwCounterReader reader(options(root));
  const SysfsSnapshot s = reader.read();
  ASSERT_EQ(s.stuck.size(), 1u);
  EXPECT_NE(s.stuck[0].path.find("gfx_err_count"), std::string::npos);
  EXPECT_EQ(s.ras.size(), 1u) << "the other counters are still read";

  const SysfsSnapshot again = reader.read();
  EXPECT_EQ(again.stuck.size(), 1u);
  EXPECT_EQ(again.skipped.size(), 1u);
  EXPECT_EQ(reader.reader().stuck_workers(), 1u) << "one stuck thread per file, not one per read";

  HwCounterWatch watch("node001", "boot-a");
  const auto events = watch.update(again);
  const auto stuck = std::find_if(events.begin(), events.end(), [](const KernelEvent& e) {
    return e.kind == "stuck-sysfs-read";
  });
  ASSERT_NE(stuck, events.end());
  EXPECT_EQ(stuck->fields.at("path"), s.stuck[0].path);
  EXPECT_EQ(stuck->host, "node001");

  const int fd = ::open(hung.c_str(), O_WRONLY | O_NONBLOCK);
  if (fd >= 0) ::close(fd);
  EXPECT_TRUE(agent::testing::eventually([&] { return reader.reader().stuck_workers() == 0; }));
  EXPECT_TRUE(reader.reader().stuck_reads().empty());
}

TEST(HwCounterWatch, RisingCountersBecomeEventsWithStableIds) {
  HwCounterWatch watch("node001", "boot-a");
  SysfsSnapshot s;
  s.time_usec = 1000;
  s.ras = {{"card0", "0000:c1:00.0", "umc", 0, 2, "/sys/x"}};
  s.aer = {{"0000:c1:00.0", "card0", "fatal", 0, "/sys/y"},
           {"0000:c1:00.0", "card0", "correctable", 9, "/sys/z"}};
  auto first = watch.update(s);
  ASSERT_EQ(first.size(), 1u) << "correctable AER stays a metric; zero counters say nothing";
  EXPECT_EQ(first[0].kind, "gpu-ras-correctable");
  EXPECT_EQ(first[0].count, 2u);
  EXPECT_EQ(first[0].id, "sysfs-ras:boot-a:card0:umc:ce");

  EXPECT_TRUE(watch.update(s).empty()) << "unchanged counters make no events";

  s.time_usec = 2000;
  s.ras[0].ue = 1;
  s.aer[0].total = 1;
  auto second = watch.update(s);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(second[0].kind, "gpu-ras-uncorrectable");
  EXPECT_EQ(second[0].action, "drain");
  EXPECT_EQ(second[0].severity, Severity::kCritical);
  EXPECT_EQ(second[0].block, "umc");
  EXPECT_EQ(second[1].kind, "pcie-aer");
  EXPECT_EQ(second[1].severity, Severity::kCritical);
  EXPECT_EQ(second[1].fields.at("aer_severity"), "fatal");

  // A restarted agent reading the same values makes the same ids: the spool drops them as known.
  HwCounterWatch restarted("node001", "boot-a");
  const auto replay = restarted.update(s);
  ASSERT_EQ(replay.size(), 3u);
  EXPECT_EQ(replay[0].id, "sysfs-ras:boot-a:card0:umc:ue");
  EXPECT_EQ(replay[0].count, 1u);
}

}  // namespace
}  // namespace triage::collector
