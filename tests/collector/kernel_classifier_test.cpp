// How the classifier assembles, folds and links events, and where it says a restart may resume.
#include <gtest/gtest.h>

#include "collector/kernel_pipeline.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::classify_text;
using testing::of_kind;
using testing::shipped_rules;

const std::string kBoot = "8a1f0e6c2b6d4f4e9a3e2f1d0c9b8a7f";

// A kmsg-like record: boot id, sequence number, seconds since boot.
KernelRecord rec(uint64_t seq, double seconds, std::string text) {
  KernelRecord r;
  r.text = std::move(text);
  r.boot_id = kBoot;
  r.seq = seq;
  r.seq_space = SeqSpace::kKmsg;
  r.monotonic_usec = static_cast<int64_t>(seconds * 1e6);
  r.realtime_usec = 1763726400000000 + r.monotonic_usec;
  r.facility = 0;
  r.position = "kmsg:" + kBoot + ":" + std::to_string(seq);
  return r;
}

TEST(KernelClassifier, Xid45AfterAFatalXidNamesItAsTheCause) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  c.feed(rec(10, 100.0,
             "NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off "
             "the bus."),
         ev);
  for (uint64_t i = 0; i < 3; ++i) {
    c.feed(rec(11 + i, 100.001 + 0.001 * static_cast<double>(i),
               "NVRM: Xid (PCI:0000:3b:00): 45, pid=4242, name=python3, Ch 0000000" +
                   std::to_string(8 + i)),
           ev);
  }
  // Another GPU's Xid 45 has no cause on its own GPU.
  c.feed(rec(20, 100.01, "NVRM: Xid (PCI:0000:5e:00): 45, pid=4243, name=python3, Ch 00000001"),
         ev);
  c.flush(ev);
  const auto xids = of_kind(ev, "nvidia-xid");
  ASSERT_EQ(xids.size(), 3U);
  const std::string fatal_id = kBoot + ":10";
  EXPECT_EQ(xids[0]->id, fatal_id);
  EXPECT_EQ(xids[0]->code, 79);
  EXPECT_EQ(xids[1]->code, 45);
  EXPECT_EQ(xids[1]->count, 3U);
  EXPECT_EQ(xids[1]->cause, fatal_id);
  EXPECT_EQ(xids[2]->device, "0000:5e:00.0");
  EXPECT_TRUE(xids[2]->cause.empty());
}

TEST(KernelClassifier, Xid45LongAfterTheFatalOneHasNoCause) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  c.feed(rec(10, 100.0,
             "NVRM: Xid (PCI:0000:3b:00): 48, pid=1, name=x, An uncorrectable double bit error "
             "(DBE) has been detected on GPU in the framebuffer at partition 6, subpartition 0."),
         ev);
  c.feed(rec(11, 400.0, "NVRM: Xid (PCI:0000:3b:00): 45, pid=2, name=y, Ch 00000008"), ev);
  c.flush(ev);
  const auto xids = of_kind(ev, "nvidia-xid");
  ASSERT_EQ(xids.size(), 2U);
  EXPECT_TRUE(xids[1]->cause.empty());
}

TEST(KernelClassifier, NvidiaMultiLineMessageInOneKmsgRecord) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  c.feed(rec(5, 50.0,
             "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this "
             "system has\n"
             "NVRM: fallen off the bus and is not responding to commands."),
         ev);
  c.flush(ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].kind, "gpu-fallen-off-bus");
  EXPECT_EQ(ev[0].device, "0000:b3:00.0");
  EXPECT_EQ(ev[0].fields.at("pci_id"), "10de:26b5");
  EXPECT_EQ(ev[0].lines.size(), 3U);
  EXPECT_EQ(ev[0].action, "drain");
}

TEST(KernelClassifier, NvidiaMultiLineMessageAsDmesgPrintsIt) {
  const auto ev = classify_text(
      "[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
      "               NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
      "               NVRM: fallen off the bus and is not responding to commands.\n"
      "[ 1843.308200] NVRM: Xid (PCI:0000:b3:00): 79, pid=1, name=x, GPU has fallen off the "
      "bus.\n");
  ASSERT_EQ(of_kind(ev, "gpu-fallen-off-bus").size(), 1U);
  EXPECT_EQ(of_kind(ev, "gpu-fallen-off-bus")[0]->lines.size(), 3U);
  EXPECT_EQ(of_kind(ev, "nvidia-xid").size(), 1U);
}

TEST(KernelClassifier, InterleavedPageFaultsOfTwoGpusStayApart) {
  const auto ev = classify_text(
      "[ 10.000001] amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 "
      "pasid:32781)\n"
      "[ 10.000002] amdgpu 0000:83:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:5 "
      "pasid:32790)\n"
      "[ 10.000003] amdgpu 0000:03:00.0: amdgpu:  Process python3 pid 100 thread python3 pid 101\n"
      "[ 10.000004] amdgpu 0000:83:00.0: amdgpu:  Process python3 pid 200 thread python3 pid 201\n"
      "[ 10.000005] amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x0000000000001000 "
      "from client 10\n"
      "[ 10.000006] amdgpu 0000:83:00.0: amdgpu:   in page starting at address 0x0000000000002000 "
      "from client 10\n");
  const auto faults = of_kind(ev, "gpu-page-fault");
  ASSERT_EQ(faults.size(), 2U);
  for (const auto* f : faults) {
    EXPECT_EQ(f->lines.size(), 3U);
    if (f->device == "0000:03:00.0") {
      EXPECT_EQ(f->pid, 100);
      EXPECT_EQ(f->fields.at("address"), "0000000000001000");
    } else {
      EXPECT_EQ(f->device, "0000:83:00.0");
      EXPECT_EQ(f->pid, 200);
      EXPECT_EQ(f->fields.at("address"), "0000000000002000");
    }
  }
}

TEST(KernelClassifier, ABurstOfRepeatsFoldsAndALaterOneStartsAgain) {
  std::string text;
  for (int i = 0; i < 5; ++i) {
    text += "[ 20.00000" + std::to_string(i) +
            "] pcieport 0000:00:01.1: AER: Corrected error received: 0000:41:00.0\n";
  }
  text += "[ 90.000000] pcieport 0000:00:01.1: AER: Corrected error received: 0000:41:00.0\n";
  const auto ev = classify_text(text);
  const auto aer = of_kind(ev, "pcie-aer");
  ASSERT_EQ(aer.size(), 2U);
  EXPECT_EQ(aer[0]->count, 5U);
  EXPECT_EQ(aer[0]->lines.size(), 5U);
  EXPECT_EQ(aer[1]->count, 1U);
}

TEST(KernelClassifier, RepeatsOnDifferentGpusDoNotFoldTogether) {
  const auto ev = classify_text(
      "[ 1.0] amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1, emitted seq=3\n"
      "[ 1.1] amdgpu 0000:83:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=7, emitted seq=9\n"
      "[ 1.2] amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=4, emitted "
      "seq=6\n");
  const auto t = of_kind(ev, "gpu-ring-timeout");
  ASSERT_EQ(t.size(), 2U);
  EXPECT_EQ(t[0]->device == "0000:03:00.0" ? t[0]->count : t[1]->count, 2U);
}

TEST(KernelClassifier, UserspaceWritingIntoKmsgIsNotTrusted) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  KernelRecord spoof =
      rec(1, 1.0, "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.");
  spoof.facility = 1;  // LOG_USER: written by a process, not the kernel
  c.feed(spoof, ev);
  c.flush(ev);
  EXPECT_TRUE(ev.empty());
  EXPECT_EQ(c.stats().not_kernel, 1U);
}

TEST(KernelClassifier, LostRecordsBecomeAnEvent) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  KernelRecord r = rec(500, 5.0, "usb 1-1: new high-speed USB device number 2 using xhci_hcd");
  r.lost_before = 120;
  c.feed(r, ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].kind, "records-lost");
  EXPECT_EQ(ev[0].count, 120U);
  EXPECT_EQ(ev[0].id, kBoot + ":500!lost");
  EXPECT_EQ(c.stats().lost, 120U);
}

TEST(KernelClassifier, ARebootEndsWhatWasBeingAssembled) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  c.feed(rec(1, 300.0, "INFO: task python3:1234 blocked for more than 122 seconds."), ev);
  EXPECT_TRUE(ev.empty());
  KernelRecord next = rec(1, 0.5, "Linux version 6.8.0-45-generic (buildd@lcy02-amd64-080)");
  next.boot_id = "0123456789abcdef0123456789abcdef";
  c.feed(next, ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].kind, "hung-task");
}

TEST(KernelClassifier, SafePositionWaitsForAnEventBeingAssembled) {
  KernelClassifier c(shipped_rules(), "node003");
  c.set_initial_position("kmsg:" + kBoot + ":0");
  std::vector<KernelEvent> ev;
  EXPECT_EQ(c.safe_resume_position(), "kmsg:" + kBoot + ":0");
  c.feed(rec(1, 1.0, "usb 1-1: new device"), ev);
  EXPECT_EQ(c.safe_resume_position(), "kmsg:" + kBoot + ":1");
  c.feed(rec(2, 2.0, "INFO: task python3:1234 blocked for more than 122 seconds."), ev);
  c.feed(rec(3, 2.0, "Call Trace:"), ev);
  c.feed(rec(4, 2.0, " schedule+0x5e/0xd0"), ev);
  // The hung-task report may still grow: a restart must read it again from its first line.
  EXPECT_EQ(c.safe_resume_position(), "kmsg:" + kBoot + ":1");
  c.feed(rec(5, 9.0, "usb 1-1: device gone"), ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(c.safe_resume_position(), "kmsg:" + kBoot + ":5");
}

TEST(KernelClassifier, FlushEmitsWhatIsHeld) {
  KernelClassifier c(shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  c.feed(rec(1, 1.0, "nfs: server fs01 not responding, still trying"), ev);
  EXPECT_TRUE(ev.empty());  // a flood may follow
  c.flush(ev, 3600LL * 1000000);
  EXPECT_TRUE(ev.empty());  // not idle for an hour
  c.flush(ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(c.safe_resume_position(), "kmsg:" + kBoot + ":1");
}

TEST(KernelClassifier, AFloodLongerThanTheSpanLimitIsCutIntoEvents) {
  std::string text;
  for (int s = 0; s < 400; ++s) {
    text +=
        "[" + std::to_string(100 + s) + ".000000] nfs: server fs01 not responding, still trying\n";
  }
  const auto ev = classify_text(text);
  ASSERT_EQ(ev.size(), 2U);
  EXPECT_EQ(ev[0].count + ev[1].count, 400U);
  EXPECT_EQ(ev[0].count, 301U);  // 300 s span at one line a second
}

TEST(KernelClassifier, AnEndlessFloodStillLetsTheSafePositionAdvance) {
  KernelClassifierOptions o;
  o.max_hold_usec = 60'000'000;
  KernelClassifier c(shipped_rules(), "node003", o);
  std::vector<KernelEvent> ev;
  // Two floods overlapping without a pause, for ten minutes.
  for (uint64_t i = 0; i < 1200; ++i) {
    const double t = 100.0 + 0.5 * static_cast<double>(i);
    c.feed(rec(2 * i + 1, t, "nfs: server fs01 not responding, still trying"), ev);
    c.feed(rec(2 * i + 2, t + 0.25,
               "pcieport 0000:00:03.1: AER: Corrected error received: 0000:41:00.0"),
           ev);
  }
  const auto pos = c.safe_resume_position();
  ASSERT_FALSE(pos.empty());
  const auto seq = std::stoull(pos.substr(pos.rfind(':') + 1));
  EXPECT_GT(seq, 2000U) << "the safe position lags by more than the hold limit";
  EXPECT_GE(ev.size(), 18U);
}

TEST(KernelClassifier, JournalctlOutputOfSeveralBoots) {
  const auto ev = classify_text(
      "-- Boot 11111111111111111111111111111111 --\n"
      "Nov 20 10:00:00 node003 kernel: INFO: task python3:1 blocked for more than 122 seconds.\n"
      "-- Boot 22222222222222222222222222222222 --\n"
      "Nov 21 10:00:00 node003 kernel: INFO: task python3:2 blocked for more than 122 seconds.\n");
  const auto hung = of_kind(ev, "hung-task");
  ASSERT_EQ(hung.size(), 2U);
  EXPECT_EQ(hung[0]->boot_id, "11111111111111111111111111111111");
  EXPECT_EQ(hung[1]->boot_id, "22222222222222222222222222222222");
}

TEST(KernelClassifier, JunkAndHugeLinesAreHandled) {
  std::string text = std::string("\0\x01\xff\xfe garbage\n", 13);
  text += std::string(200000, 'A') + "\n";
  text +=
      "[ 1.0] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=\xff\xfe\x80, GPU has fallen off the "
      "bus.\n";
  text += "\xc3\x28 invalid utf-8\n";
  const auto ev = classify_text(text);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].code, 79);
  // Kernel bytes that are not UTF-8 are repaired for display.
  EXPECT_NE(ev[0].task.find("\xef\xbf\xbd"), std::string::npos);
}

}  // namespace
}  // namespace triage::collector
