// /dev/kmsg records: parsing (escapes, dictionary lines), files and pipes of saved records, resume
// by boot id and sequence number, overruns counted as lost records, and the real device.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "collector/kernel_pipeline.h"
#include "collector/kmsg_record.h"
#include "common/boot_id.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::read_all;
using testing::TempDir;
using testing::write_file;

const std::string kBootDashed = "8a1f0e6c-2b6d-4f4e-9a3e-2f1d0c9b8a7f";
const std::string kBoot = "8a1f0e6c2b6d4f4e9a3e2f1d0c9b8a7f";

TEST(KmsgRecord, HeaderMessageAndDictionary) {
  std::string error;
  const auto r = parse_kmsg_record(
      "3,1912,76914152141,-,caller=T4321;amdgpu 0000:dd:00.0: {1}uncorrectable hardware "
      "error(ERREVENT_ATHUB_INTERRUPT) detected!\n SUBSYSTEM=pci\n DEVICE=+pci:0000:dd:00.0\n",
      &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->priority, 3);
  EXPECT_EQ(r->facility, 0);
  EXPECT_EQ(r->seq, 1912U);
  EXPECT_EQ(r->usec, 76914152141);
  EXPECT_EQ(r->message.rfind("amdgpu 0000:dd:00.0: {1}uncorrectable", 0), 0U);
  EXPECT_EQ(r->device, "+pci:0000:dd:00.0");
  EXPECT_EQ(r->subsystem, "pci");
}

TEST(KmsgRecord, EscapedBytesAreDecoded) {
  std::string error;
  const auto r = parse_kmsg_record(
      "4,7,100,-;NVRM: The NVIDIA GPU 0000:b3:00.0\\x0aNVRM: fallen off the bus\\x5c \\xc3\\xa9",
      &error);
  ASSERT_TRUE(r) << error;
  EXPECT_EQ(r->message, "NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: fallen off the bus\\ \xc3\xa9");
}

TEST(KmsgRecord, MalformedHeadersAreRejectedWithAReason) {
  std::string error;
  EXPECT_FALSE(parse_kmsg_record("no header here", &error));
  EXPECT_NE(error.find("';'"), std::string::npos);
  EXPECT_FALSE(parse_kmsg_record("x,1,2,-;m", &error));
  EXPECT_NE(error.find("priority"), std::string::npos);
  EXPECT_FALSE(parse_kmsg_record("6,1;m", &error));
  EXPECT_FALSE(parse_kmsg_record("6,-1,2,-;m", &error));
}

class KmsgSourceTest : public ::testing::Test {
 protected:
  void SetUp() override { write_file(dir.file("boot_id"), kBootDashed + "\n"); }

  KmsgOptions options(const std::string& path) {
    KmsgOptions o;
    o.path = path;
    o.boot_id_path = dir.file("boot_id");
    return o;
  }

  TempDir dir;
};

const char* kSaved =
    "6,100,5000000,-;usb 1-1: new high-speed USB device number 2 using xhci_hcd\n"
    " SUBSYSTEM=usb\n"
    " DEVICE=c189:1\n"
    "3,101,5100000,-;amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1, emitted "
    "seq=3\n"
    " SUBSYSTEM=pci\n"
    " DEVICE=+pci:0000:c1:00.0\n"
    "not a record at all\n"
    "4,102,5200000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n"
    "14,103,5300000,-;slurm-triage-test: written by userspace\n";

TEST_F(KmsgSourceTest, SavedRecordsInAFile) {
  write_file(dir.file("kmsg"), kSaved);
  auto src = open_kmsg_source(options(dir.file("kmsg")));
  const auto recs = read_all(*src);
  ASSERT_EQ(recs.size(), 4U);
  EXPECT_EQ(recs[0].seq, 100U);
  EXPECT_EQ(recs[0].seq_space, SeqSpace::kKmsg);
  EXPECT_EQ(recs[0].boot_id, kBoot);
  EXPECT_EQ(recs[0].monotonic_usec, 5000000);
  EXPECT_GT(recs[0].realtime_usec, 5000000);
  EXPECT_EQ(recs[0].position, "kmsg:" + kBoot + ":100");
  EXPECT_EQ(recs[1].priority, 3);
  EXPECT_EQ(recs[1].kernel_device, "+pci:0000:c1:00.0");
  EXPECT_EQ(recs[2].text,
            "NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.");
  EXPECT_EQ(recs[3].facility, 1);
  EXPECT_EQ(event_id_for(recs[2]), kBoot + ":102");
  for (const auto& r : recs)
    EXPECT_EQ(r.lost_before, 0);
}

// Found by fuzz_kernel_text: a saved record claiming 292,000 years of uptime overflowed the
// conversion to wall-clock time and the classifier's windows. It is malformed; the next is read.
TEST_F(KmsgSourceTest, ATimestampNoKernelCanPrintIsMalformedAndReadingGoesOn) {
  std::string error;
  EXPECT_FALSE(parse_kmsg_record("6,1,9223372036854775807,-;hello", &error));
  EXPECT_NE(error.find("bad timestamp"), std::string::npos) << error;
  EXPECT_TRUE(parse_kmsg_record("6,1,18446744073709551,-;the largest a kernel can print", &error));
  write_file(dir.file("kmsg"), "6,1,9223372036854775807,-;hello\n6,2,5000000,-;world\n");
  auto src = open_kmsg_source(options(dir.file("kmsg")));
  const auto recs = read_all(*src);
  ASSERT_EQ(recs.size(), 1U);
  EXPECT_EQ(recs[0].text, "world");
  EXPECT_GT(recs[0].realtime_usec, 5000000);
}

TEST_F(KmsgSourceTest, ResumeSkipsWhatWasReadAndCountsWhatTheRingDropped) {
  write_file(dir.file("kmsg"), kSaved);
  KmsgOptions o = options(dir.file("kmsg"));
  o.resume_after = "kmsg:" + kBootDashed + ":101";
  auto same_boot = read_all(*open_kmsg_source(o));
  ASSERT_EQ(same_boot.size(), 2U);
  EXPECT_EQ(same_boot[0].seq, 102U);
  EXPECT_EQ(same_boot[0].lost_before, 0);

  // The agent was down while the ring buffer wrapped: records 91..99 are gone.
  o.resume_after = "kmsg:" + kBoot + ":90";
  auto wrapped = read_all(*open_kmsg_source(o));
  ASSERT_EQ(wrapped.size(), 4U);
  EXPECT_EQ(wrapped[0].lost_before, 9);

  // A position from an earlier boot says nothing about this one: read everything.
  o.resume_after = "kmsg:0123456789abcdef0123456789abcdef:101";
  EXPECT_EQ(read_all(*open_kmsg_source(o)).size(), 4U);

  o.resume_after = "journal-cursor-by-mistake";
  EXPECT_THROW(open_kmsg_source(o), std::runtime_error);
}

// Serves records the way the device does, one per read(), and overruns once: the reader gets
// EPIPE and the ring has moved on past 5 records.
TEST_F(KmsgSourceTest, AnOverrunIsCountedAndReadingGoesOn) {
  write_file(dir.file("empty"), "");
  auto served = std::make_shared<std::deque<std::string>>();
  for (uint64_t seq = 1; seq <= 20; ++seq) {
    served->push_back("6," + std::to_string(seq) + "," + std::to_string(seq * 1000) +
                      ",-;eth0: message " + std::to_string(seq) + "\n");
  }
  auto calls = std::make_shared<int>(0);
  KmsgOptions o = options(dir.file("empty"));
  o.read_fn = [served, calls](int, void* buf, size_t len) -> ssize_t {
    if (++*calls == 8) {
      for (int i = 0; i < 5; ++i)
        served->pop_front();
      errno = EPIPE;
      return -1;
    }
    if (served->empty()) return 0;
    const std::string r = served->front();
    served->pop_front();
    const size_t n = std::min(len, r.size());
    std::memcpy(buf, r.data(), n);
    return static_cast<ssize_t>(n);
  };
  auto src = open_kmsg_source(o);
  const auto recs = read_all(*src);
  ASSERT_EQ(recs.size(), 15U);
  EXPECT_EQ(src->lost_records(), 5U);
  size_t with_loss = 0;
  for (const auto& r : recs) {
    if (r.lost_before != 0) {
      ++with_loss;
      EXPECT_EQ(r.lost_before, 5);
    }
  }
  EXPECT_EQ(with_loss, 1U);

  KernelClassifier c(testing::shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  for (const auto& r : recs)
    c.feed(r, ev);
  c.flush(ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].kind, "records-lost");
  EXPECT_EQ(ev[0].count, 5U);
}

TEST_F(KmsgSourceTest, RecordsThroughAPipe) {
  const std::string fifo = dir.file("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    UniqueFd w(::open(fifo.c_str(), O_WRONLY | O_CLOEXEC));
    // Split mid-record: the reader must join the pieces.
    const std::string all = kSaved;
    write_all(w.get(), all.substr(0, 50));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    write_all(w.get(), all.substr(50));
  });
  auto src = open_kmsg_source(options(fifo));
  std::vector<KernelRecord> recs;
  while (src->read(recs, 2000)) {
  }
  writer.join();
  ASSERT_EQ(recs.size(), 4U);
  EXPECT_EQ(recs[1].kernel_device, "+pci:0000:c1:00.0");
}

// The real device: a marker written into the kernel log comes back as a record (from userspace,
// so with the user facility) and a restart after its position does not return it again.
TEST_F(KmsgSourceTest, TheRealDevice) {
  UniqueFd w(::open("/dev/kmsg", O_WRONLY | O_CLOEXEC));
  if (!w) GTEST_SKIP() << "/dev/kmsg is not writable here";
  std::mt19937_64 rng(std::random_device{}());
  const std::string marker = "slurm-triage-test marker " + std::to_string(rng());
  write_all(w.get(), "<6>" + marker + "\n");

  KmsgOptions o;
  auto src = open_kmsg_source(o);
  std::vector<KernelRecord> recs;
  const KernelRecord* found = nullptr;
  for (int round = 0; round < 50 && found == nullptr; ++round) {
    src->read(recs, 100);
    for (const auto& r : recs) {
      if (r.text == marker) found = &r;
    }
  }
  ASSERT_NE(found, nullptr) << "the marker did not come back from /dev/kmsg";
  EXPECT_EQ(found->facility, 1);
  EXPECT_EQ(found->priority, 6);
  EXPECT_EQ(found->boot_id, read_boot_id("/proc/sys/kernel/random/boot_id"));
  const std::string position = found->position;

  o.resume_after = position;
  auto again = open_kmsg_source(o);
  std::vector<KernelRecord> later;
  again->read(later, 0);
  for (const auto& r : later)
    EXPECT_NE(r.text, marker);
}

}  // namespace
}  // namespace triage::collector
