// `slurm-triage kernel`, run as an admin would: `dmesg | slurm-triage kernel -`, a saved file, a
// journal file, kmsg records; JSON for programs, Markdown for people; clear errors otherwise.
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::run_command;
using testing::TempDir;
using testing::write_file;

const std::string kCli = TRIAGE_CLI_BINARY;

std::string fixture_path(const std::string& name) {
  return std::string(TRIAGE_KERNEL_FIXTURES) + "/" + name;
}

TEST(KernelCommand, DmesgOnStdinAsJson) {
  std::string out;
  const int rc = run_command("cat " + fixture_path("node-mixed.dmesg") + " | " + kCli +
                                 " kernel - --format json --host node003",
                             out);
  ASSERT_EQ(rc, 0) << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j["events"].is_array());
  EXPECT_EQ(j["host"], "node003");
  EXPECT_EQ(j["records"], 251);
  std::set<std::string> kinds;
  for (const auto& e : j["events"]) {
    kinds.insert(e["kind"].get<std::string>());
    EXPECT_EQ(e["host"], "node003");
  }
  for (const char* k :
       {"oom-kill", "nvidia-xid", "gpu-driver-oops", "gpu-page-fault", "gpu-reset",
        "gpu-ras-uncorrectable", "gpu-ras-correctable", "gpu-hardware-error", "pcie-aer",
        "nfs-timeout", "lustre-error", "link-down", "hung-task", "soft-lockup", "rcu-stall", "mce",
        "gpu-init-failure", "gpu-fallen-off-bus", "gpu-ring-timeout"}) {
    EXPECT_TRUE(kinds.count(k)) << k;
  }
}

TEST(KernelCommand, MarkdownReportEscapesWhatTheKernelSaid) {
  TempDir dir;
  write_file(dir.file("dmesg.txt"),
             "[  10.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=42, name=evil|`cmd`<b>, Graphics "
             "Exception\n"
             "[  11.000000] usb 1-1: new device\n");
  std::string out;
  ASSERT_EQ(run_command(kCli + " kernel " + dir.file("dmesg.txt") + " --format md", out), 0) << out;
  EXPECT_NE(out.find("# Kernel events"), std::string::npos);
  EXPECT_NE(out.find("Read 2 kernel lines"), std::string::npos);
  EXPECT_NE(out.find(" | nvidia\\-xid | warning | 0000:3b:00\\.0 | 1 | none | "), std::string::npos)
      << out;
  // The task name from the log appears as a code span (literal in Markdown) and verbatim inside
  // the fenced block; nowhere else may it act as Markdown or HTML.
  EXPECT_NE(out.find("pid 42 (`` evil|`cmd`<b> ``)"), std::string::npos) << out;
  EXPECT_NE(
      out.find("```\n[  10.000000] NVRM: Xid (PCI:0000:3b:00): 13, pid=42, name=evil|`cmd`<b>"),
      std::string::npos);
  size_t raw = 0;
  for (size_t at = out.find("<b>"); at != std::string::npos; at = out.find("<b>", at + 1))
    ++raw;
  EXPECT_EQ(raw, 2U) << "only the code span and the code block may hold the raw text";
}

TEST(KernelCommand, CleanLogSaysSo) {
  std::string out;
  ASSERT_EQ(run_command(
                "printf '[ 1.0] usb 1-1: new device\\n' | " + kCli + " kernel - --format md", out),
            0);
  EXPECT_NE(out.find("Nothing in this kernel log points at a problem."), std::string::npos);
}

TEST(KernelCommand, JournalAndKmsgInputs) {
  TempDir dir;
  write_file(dir.file("boot"), "");
  write_file(dir.file("kmsg"),
             "4,7,5000000,-;nfs: server fs01 not responding, timed out\n"
             "3,8,6000000,-;amdgpu 0000:c1:00.0: amdgpu: device lost from bus!\n");
  std::string out;
  ASSERT_EQ(run_command(kCli + " kernel --kmsg " + dir.file("kmsg") + " --format json", out), 0)
      << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["events"].size(), 2U);
  EXPECT_EQ(j["events"][0]["kind"], "nfs-timeout");
  EXPECT_EQ(j["events"][1]["kind"], "gpu-fallen-off-bus");
}

// A node whose GPU reported uncorrectable memory errors: the verdict says drain, names the RAS
// record as its evidence, and the Markdown report leads with it.
TEST(KernelCommand, UncorrectableRasErrorMeansDrainRecommended) {
  TempDir dir;
  write_file(dir.file("dmesg.txt"),
             "[  43.618680] amdgpu 0000:1b:00.0: amdgpu: socket: 0, die: 1, 2 new uncorrectable "
             "hardware errors detected in umc block\n"
             "[  44.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd\n");
  std::string out;
  ASSERT_EQ(run_command(kCli + " kernel " + dir.file("dmesg.txt") + " --format json", out), 0)
      << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_EQ(j["events"].size(), 1U) << out;
  EXPECT_EQ(j["events"][0]["kind"], "gpu-ras-uncorrectable");
  ASSERT_TRUE(j["verdict"].is_object()) << out;
  EXPECT_EQ(j["verdict"]["verdict"], "drain-recommended");
  ASSERT_FALSE(j["verdict"]["reasons"].empty());
  EXPECT_EQ(j["verdict"]["reasons"][0]["action"], "drain");
  EXPECT_EQ(j["verdict"]["reasons"][0]["event_ids"][0], j["events"][0]["id"]);

  ASSERT_EQ(run_command(kCli + " kernel " + dir.file("dmesg.txt") + " --format md", out), 0);
  const size_t verdict = out.find("## Node verdict: drain\\-recommended");
  ASSERT_NE(verdict, std::string::npos) << out;
  EXPECT_LT(verdict, out.find("| # | first seen |")) << "the verdict comes before the event table";
  EXPECT_NE(out.find("(action: drain); events #1"), std::string::npos) << out;
}

// Xid 13 is a fault of the application's kernel, not of the GPU: the node stays in service.
TEST(KernelCommand, OnlyXid13IsNotTheNodesFault) {
  TempDir dir;
  write_file(dir.file("dmesg.txt"),
             "[  10.000000] NVRM: Xid (PCI:0000:5e:00): 13, pid=2222, name=python3, Graphics SM "
             "Warp Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address\n"
             "[  10.100000] NVRM: Xid (PCI:0000:5e:00): 13, pid=2222, name=python3, Graphics "
             "Exception: ESR 0x505648=0x102000e 0x50564c=0x17 0x505650=0x0 0x505644=0xd3eff2\n");
  std::string out;
  ASSERT_EQ(run_command(kCli + " kernel " + dir.file("dmesg.txt") + " --format json", out), 0)
      << out;
  const auto j = nlohmann::json::parse(out);
  ASSERT_FALSE(j["events"].empty()) << out;
  for (const auto& e : j["events"]) {
    EXPECT_EQ(e["kind"], "nvidia-xid");
    EXPECT_EQ(e["code"], 13);
  }
  EXPECT_EQ(j["verdict"]["verdict"], "healthy") << j["verdict"].dump();
  EXPECT_TRUE(j["verdict"]["reasons"].empty());

  ASSERT_EQ(run_command(kCli + " kernel " + dir.file("dmesg.txt") + " --format md", out), 0);
  EXPECT_NE(out.find("## Node verdict: healthy"), std::string::npos) << out;
  EXPECT_NE(out.find("No evidence against this node"), std::string::npos) << out;
}

TEST(KernelCommand, BadInputAndBadRulesAreClearErrors) {
  std::string out;
  EXPECT_EQ(run_command(kCli + " kernel /nonexistent/dmesg.txt", out, true), 2);
  EXPECT_NE(out.find("/nonexistent/dmesg.txt"), std::string::npos) << out;

  EXPECT_EQ(run_command(kCli + " kernel", out, true), 2);
  EXPECT_NE(out.find("nothing to read"), std::string::npos) << out;

  EXPECT_EQ(run_command(kCli + " kernel - --format yaml < /dev/null", out, true), 2);
  EXPECT_EQ(run_command(kCli + " kernel /etc", out, true), 2);
  EXPECT_NE(out.find("not a regular file"), std::string::npos) << out;

  TempDir rules;
  write_file(rules.file("site.rules"), "[kernel-rule broken]\nkind = mce\npattern = (unclosed\n");
  EXPECT_EQ(run_command(kCli + " kernel - --rules " + rules.path() + " < /dev/null", out, true), 2);
  EXPECT_NE(out.find("site.rules:3:"), std::string::npos) << out;
}

}  // namespace
}  // namespace triage::collector
