// The prefixes dmesg and journalctl put in front of kernel messages are recognised and removed,
// so that the same rules see the kernel's own words whatever printed them.
#include "collector/kernel_line_parser.h"

#include <gtest/gtest.h>

#include "common/time_util.h"

namespace triage::collector {
namespace {

// 2026-11-21T12:30:00Z, a moment after every syslog timestamp below.
const int64_t kNow = *parse_timestamp_usec("2026-11-21T12:30:00Z");

std::string_view message_of(std::string_view line, const ParsedLine& p) {
  return line.substr(p.message_offset);
}

TEST(KernelLineParser, RawDmesgGivesSecondsSinceBoot) {
  const std::string line = "[  123.456789] amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.kind, LineKind::kMessage);
  EXPECT_EQ(p.monotonic_usec, 123456789);
  EXPECT_EQ(p.realtime_usec, 0);
  EXPECT_EQ(message_of(line, p), "amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!");
}

TEST(KernelLineParser, DmesgWithHumanTimestamps) {
  const std::string line = "[Sat Nov 21 12:00:01 2026] NVRM: Xid (PCI:0000:3b:00): 79, pid=1";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.realtime_usec, *parse_timestamp_usec("2026-11-21T12:00:01Z"));
  EXPECT_EQ(message_of(line, p), "NVRM: Xid (PCI:0000:3b:00): 79, pid=1");
}

TEST(KernelLineParser, DmesgIsoTimestamps) {
  const std::string line =
      "2026-11-21T12:00:01,123456+00:00 nfs: server fs01 not responding, still trying";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.realtime_usec, *parse_timestamp_usec("2026-11-21T12:00:01.123456Z"));
  EXPECT_EQ(message_of(line, p), "nfs: server fs01 not responding, still trying");
}

TEST(KernelLineParser, JournalctlShortFormatNamesTheHost) {
  const std::string line =
      "Nov 21 12:00:01 node003 kernel: mce: [Hardware Error]: Machine check events logged";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.host, "node003");
  EXPECT_EQ(p.realtime_usec, *parse_timestamp_usec("2026-11-21T12:00:01Z"));
  EXPECT_EQ(message_of(line, p), "mce: [Hardware Error]: Machine check events logged");
}

TEST(KernelLineParser, SyslogTimestampsFromLastDecemberBelongToLastYear) {
  const std::string line = "Dec 31 23:59:59 node003 kernel: hello";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.realtime_usec, *parse_timestamp_usec("2025-12-31T23:59:59Z"));
}

TEST(KernelLineParser, JournalctlShortIsoAndPrecise) {
  for (const std::string& line :
       {std::string("2026-11-21T12:00:01+0000 node003 kernel: LustreError: x"),
        std::string("2026-11-21T12:00:01.000000+00:00 node003 kernel: LustreError: x")}) {
    const ParsedLine p = parse_kernel_line(line, kNow);
    EXPECT_EQ(p.host, "node003") << line;
    EXPECT_EQ(p.realtime_usec, *parse_timestamp_usec("2026-11-21T12:00:01Z")) << line;
    EXPECT_EQ(message_of(line, p), "LustreError: x") << line;
  }
}

TEST(KernelLineParser, JournalctlShortMonotonic) {
  const std::string line =
      "[  300.000001] node003 kernel: INFO: task python3:1234 blocked for more than 122 seconds.";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.monotonic_usec, 300000001);
  EXPECT_EQ(p.host, "node003");
  EXPECT_EQ(message_of(line, p), "INFO: task python3:1234 blocked for more than 122 seconds.");
}

TEST(KernelLineParser, KernLogKeepsTheKernelTimestampAfterTheTag) {
  const std::string line =
      "Nov 21 12:00:01 node003 kernel: [  123.000001] mce: CPU3: Core temperature above threshold";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.monotonic_usec, 123000001);
  EXPECT_GT(p.realtime_usec, 0);
  EXPECT_EQ(message_of(line, p), "mce: CPU3: Core temperature above threshold");
}

TEST(KernelLineParser, BareKernelTagAndCallerIds) {
  const std::string tagged = "kernel: nfs: server fs01 not responding, timed out";
  EXPECT_EQ(message_of(tagged, parse_kernel_line(tagged, kNow)),
            "nfs: server fs01 not responding, timed out");
  const std::string caller =
      "[  12.000000] [  T4321] BUG: kernel NULL pointer dereference, address: 0000000000000008";
  const ParsedLine p = parse_kernel_line(caller, kNow);
  EXPECT_EQ(p.monotonic_usec, 12000000);
  EXPECT_EQ(message_of(caller, p),
            "BUG: kernel NULL pointer dereference, address: 0000000000000008");
}

TEST(KernelLineParser, DmesgRawAndDecodedLevels) {
  const std::string raw =
      "<3>[  5.000000] amdgpu 0000:c1:00.0: amdgpu: Fatal error during GPU init";
  const ParsedLine a = parse_kernel_line(raw, kNow);
  EXPECT_EQ(a.priority, 3);
  EXPECT_EQ(a.facility, 0);
  EXPECT_EQ(message_of(raw, a), "amdgpu 0000:c1:00.0: amdgpu: Fatal error during GPU init");
  const std::string decoded = "kern  :err   : [  5.000000] pcieport 0000:00:01.1: AER: x";
  const ParsedLine b = parse_kernel_line(decoded, kNow);
  EXPECT_EQ(b.priority, 3);
  EXPECT_EQ(b.facility, 0);
  EXPECT_EQ(b.monotonic_usec, 5000000);
  EXPECT_EQ(message_of(decoded, b), "pcieport 0000:00:01.1: AER: x");
}

TEST(KernelLineParser, MessagesThatMerelyLookLikePrefixesStayIntact) {
  for (const std::string& line :
       {std::string("[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout"),
        std::string("[Hardware Error]: Corrected error, no action required."),
        std::string(
            "{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0"),
        std::string("python3 kernel: not a tag because no timestamp came first"),
        std::string(
            "               NVRM: fallen off the bus and is not responding to commands.")}) {
    const ParsedLine p = parse_kernel_line(line, kNow);
    EXPECT_EQ(p.message_offset, 0U) << line;
    EXPECT_EQ(p.monotonic_usec, -1) << line;
    EXPECT_EQ(p.realtime_usec, 0) << line;
  }
}

TEST(KernelLineParser, JournalctlBootSeparators) {
  const ParsedLine boot = parse_kernel_line("-- Boot 63b6750b5488447fa75aa1667f9abc17 --", kNow);
  EXPECT_EQ(boot.kind, LineKind::kBoot);
  EXPECT_EQ(boot.boot_id, "63b6750b5488447fa75aa1667f9abc17");
  EXPECT_EQ(parse_kernel_line("-- Reboot --", kNow).kind, LineKind::kBoot);
  EXPECT_EQ(parse_kernel_line("-- No entries --", kNow).kind, LineKind::kAnnotation);
}

TEST(KernelLineParser, DmesgHumanFormatLosesItsBracketsButGivesNoTime) {
  for (const std::string& line :
       {std::string("[  +0.000049] task:python3.11      state:D stack:    0 pid:15277"),
        std::string("[Nov21 12:00] task:python3.11      state:D stack:    0 pid:15277"),
        std::string("[Nov 1 12:00] task:python3.11      state:D stack:    0 pid:15277")}) {
    const ParsedLine p = parse_kernel_line(line, kNow);
    EXPECT_EQ(message_of(line, p), "task:python3.11      state:D stack:    0 pid:15277") << line;
    EXPECT_EQ(p.monotonic_usec, -1) << line;
    EXPECT_EQ(p.realtime_usec, 0) << line;
  }
  const std::string drm = "[drm] Initialized amdgpu 3.57.0 20150101 for 0000:c1:00.0 on minor 1";
  EXPECT_EQ(parse_kernel_line(drm, kNow).message_offset, 0U) << "a message in brackets stays";
}

TEST(KernelLineParser, SyslogTemplateWithTheSeverityBeforeTheTag) {
  const std::string line =
      "Apr  9 21:05:38.106121 str-s6100-acs-4 INFO kernel: [10601.214044] igb 0000:00:14.0 eth0: "
      "igb: eth0 NIC Link is Down";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.host, "str-s6100-acs-4");
  EXPECT_EQ(p.monotonic_usec, 10601214044);
  EXPECT_EQ(message_of(line, p), "igb 0000:00:14.0 eth0: igb: eth0 NIC Link is Down");
}

TEST(KernelLineParser, SyslogdConsoleBroadcastIndentsTheTag) {
  const std::string line =
      " kernel:[405108.698255] watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]";
  const ParsedLine p = parse_kernel_line(line, kNow);
  EXPECT_EQ(p.monotonic_usec, 405108698255);
  EXPECT_EQ(message_of(line, p),
            "watchdog: BUG: soft lockup - CPU#2 stuck for 22s! [chia_plot:29632]");
}

TEST(KernelLineParser, JunkNeverCrashes) {
  for (const std::string& line :
       {std::string(""), std::string("["), std::string("[ ]"), std::string("<"),
        std::string("<99999999999>"), std::string("Nov"),
        std::string("Nov 99 99:99:99 h kernel: x"), std::string("kern  :"),
        std::string("\xff\xfe[ 1.0\x00]", 9), std::string("-- ")}) {
    const ParsedLine p = parse_kernel_line(line, kNow);
    EXPECT_LE(p.message_offset, line.size());
  }
}

}  // namespace
}  // namespace triage::collector
