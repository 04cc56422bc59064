// Kernel records from real journal files, made at test time by systemd-journal-remote from Journal
// Export Format fixtures and read back through sd-journal: kernel transport only, resume after a
// cursor with no gap and no duplicate, a journal that grows while it is read, rotation, and a
// vacuumed cursor.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include <gtest/gtest.h>

#include "collector/journal_cursor.h"
#include "collector/kernel_pipeline.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::run_command;
using testing::TempDir;
using testing::write_file;

const std::string kBoot = "63b6750b5488447fa75aa1667f9abc17";
constexpr int64_t kBootRealtime = 1763726400000000;  // 2026-11-21T12:00:00Z

struct Entry {
  std::string message;
  int64_t offset_usec;  // since boot
  std::string transport = "kernel";
  std::string device;
  int facility = 0;
};

// One entry in the Journal Export Format; MESSAGE is written in the binary form when it holds a
// newline, as journald does for multi-line kernel messages.
std::string export_entry(const Entry& e, uint64_t n) {
  std::string s;
  s += "__CURSOR=s=0;i=" + std::to_string(n) + "\n";
  s += "__REALTIME_TIMESTAMP=" + std::to_string(kBootRealtime + e.offset_usec) + "\n";
  s += "__MONOTONIC_TIMESTAMP=" + std::to_string(e.offset_usec + 500) + "\n";
  s += "_BOOT_ID=" + kBoot + "\n";
  s += "_TRANSPORT=" + e.transport + "\n";
  s += "_HOSTNAME=node003\n";
  s += "PRIORITY=3\n";
  s += "SYSLOG_FACILITY=" + std::to_string(e.facility) + "\n";
  s += "_SOURCE_MONOTONIC_TIMESTAMP=" + std::to_string(e.offset_usec) + "\n";
  if (!e.device.empty()) s += "_KERNEL_DEVICE=" + e.device + "\n";
  if (e.message.find('\n') == std::string::npos) {
    s += "MESSAGE=" + e.message + "\n";
  } else {
    s += "MESSAGE\n";
    const uint64_t len = e.message.size();
    for (int i = 0; i < 8; ++i)
      s.push_back(static_cast<char>((len >> (8 * i)) & 0xff));
    s += e.message + "\n";
  }
  return s + "\n";
}

class JournalSourceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(TRIAGE_JOURNAL_REMOTE, X_OK) != 0)
      GTEST_SKIP() << "systemd-journal-remote missing";
  }

  // Appends entries to the journal file `path` (created on first use).
  void journal(const std::string& path, const std::vector<Entry>& entries) {
    std::string exp;
    for (const auto& e : entries)
      exp += export_entry(e, ++written_);
    const std::string in = dir.file("export-" + std::to_string(written_));
    write_file(in, exp);
    std::string out;
    const int rc =
        run_command(std::string(TRIAGE_JOURNAL_REMOTE) + " --output=" + path + " " + in, out, true);
    ASSERT_EQ(rc, 0) << out;
  }

  static std::vector<Entry> numbered(int from, int to, int64_t base_usec) {
    std::vector<Entry> v;
    for (int i = from; i <= to; ++i) {
      v.push_back({"eth0: kernel line " + std::to_string(i), base_usec + int64_t{i} * 1000});
    }
    return v;
  }

  static std::vector<KernelRecord> drain(KernelSource& s) {
    std::vector<KernelRecord> out;
    for (int i = 0; i < 20; ++i) {
      const size_t before = out.size();
      s.read(out, 0);
      if (out.size() == before) break;
    }
    return out;
  }

  TempDir dir;
  uint64_t written_ = 0;
};

TEST_F(JournalSourceTest, KernelRecordsOnlyWithTheirFields) {
  const std::string file = dir.file("system.journal");
  journal(
      file,
      {{"NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.", 200000000},
       {"sshd[812]: Accepted publickey for alice", 200000500, "syslog"},
       {"amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!", 200001000, "kernel", "+pci:0000:c1:00.0"},
       {"NVRM: The NVIDIA GPU 0000:b3:00.0\nNVRM: (PCI ID: 10de:26b5) installed in this system "
        "has\nNVRM: fallen off the bus and is not responding to commands.",
        200002000}});
  JournalOptions o;
  o.files = {file};
  auto src = open_journal_source(o);
  const auto recs = drain(*src);
  ASSERT_EQ(recs.size(), 3U) << "the syslog entry must not be read";
  const KernelRecord& r = recs[1];
  EXPECT_EQ(r.boot_id, kBoot);
  EXPECT_EQ(r.host, "node003");
  EXPECT_EQ(r.priority, 3);
  EXPECT_EQ(r.facility, 0);
  EXPECT_EQ(r.monotonic_usec, 200001000);
  EXPECT_EQ(r.realtime_usec, kBootRealtime + 200001000);
  EXPECT_EQ(r.kernel_device, "+pci:0000:c1:00.0");
  EXPECT_EQ(r.seq_space, SeqSpace::kJournal);
  const auto cursor = parse_journal_cursor(r.position);
  ASSERT_TRUE(cursor);
  EXPECT_EQ(cursor->seqnum, r.seq);
  EXPECT_EQ(event_id_for(r),
            kBoot + ":j" + cursor->seqnum_id.substr(0, 8) + "-" + std::to_string(r.seq));

  KernelClassifier c(testing::shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  for (const auto& rec : recs)
    c.feed(rec, ev);
  c.flush(ev);
  ASSERT_EQ(testing::of_kind(ev, "nvidia-xid").size(), 1U);
  ASSERT_EQ(testing::of_kind(ev, "gpu-reset").size(), 1U);
  const auto bus = testing::of_kind(ev, "gpu-fallen-off-bus");
  ASSERT_EQ(bus.size(), 1U);
  EXPECT_EQ(bus[0]->lines.size(), 3U);
  EXPECT_EQ(bus[0]->time_usec, kBootRealtime + 200002000);
}

TEST_F(JournalSourceTest, ResumeAfterACursorHasNoGapAndNoDuplicate) {
  const std::string file = dir.file("system.journal");
  journal(file, numbered(1, 40, 1000000));
  JournalOptions o;
  o.files = {file};
  const auto all = drain(*open_journal_source(o));
  ASSERT_EQ(all.size(), 40U);
  for (size_t k : {size_t{0}, size_t{1}, size_t{17}, size_t{38}, size_t{39}}) {
    o.resume_after = all[k].position;
    const auto rest = drain(*open_journal_source(o));
    ASSERT_EQ(rest.size(), all.size() - k - 1) << "resumed after record " << k;
    for (size_t i = 0; i < rest.size(); ++i) {
      EXPECT_EQ(rest[i].position, all[k + 1 + i].position);
      EXPECT_EQ(rest[i].lost_before, 0);
    }
  }
}

TEST_F(JournalSourceTest, AJournalThatGrowsWhileItIsRead) {
  const std::string jdir = dir.file("journal");
  ASSERT_EQ(::mkdir(jdir.c_str(), 0755), 0);
  const std::string file = jdir + "/system.journal";
  journal(file, numbered(1, 5, 1000000));
  JournalOptions o;
  o.directory = jdir;
  auto src = open_journal_source(o);
  EXPECT_EQ(drain(*src).size(), 5U);
  journal(file, numbered(6, 9, 2000000));
  std::vector<KernelRecord> more;
  for (int i = 0; i < 50 && more.size() < 4; ++i)
    src->read(more, 100);
  ASSERT_EQ(more.size(), 4U);
  EXPECT_EQ(more.front().text, "eth0: kernel line 6");
  EXPECT_EQ(more.back().text, "eth0: kernel line 9");
}

TEST_F(JournalSourceTest, RotationAndThenVacuuming) {
  const std::string jdir = dir.file("journal");
  ASSERT_EQ(::mkdir(jdir.c_str(), 0755), 0);
  const std::string old_file = jdir + "/system@0000000000000000-0000000000000001.journal";
  journal(old_file, numbered(1, 10, 1000000));
  JournalOptions o;
  o.directory = jdir;
  auto live = open_journal_source(o);
  const auto first = drain(*live);
  ASSERT_EQ(first.size(), 10U);
  const std::string saved = first[6].position;  // the agent saved its cursor after record 7

  // Rotation: journald carries on in a new file; the running reader follows.
  journal(jdir + "/system.journal", numbered(11, 15, 5000000));
  std::vector<KernelRecord> rotated;
  for (int i = 0; i < 50 && rotated.size() < 5; ++i)
    live->read(rotated, 100);
  ASSERT_EQ(rotated.size(), 5U);
  EXPECT_EQ(rotated.front().text, "eth0: kernel line 11");

  // A restart while both files exist resumes right after the saved record, across the files.
  o.resume_after = saved;
  const auto resumed = drain(*open_journal_source(o));
  ASSERT_EQ(resumed.size(), 8U);
  EXPECT_EQ(resumed.front().text, "eth0: kernel line 8");
  EXPECT_EQ(resumed.back().text, "eth0: kernel line 15");
  EXPECT_EQ(resumed.front().lost_before, 0);

  // Vacuuming removes the old file: the saved entry is gone. Reading goes on with the oldest
  // entry after it and says that records may have been lost.
  ASSERT_EQ(::unlink(old_file.c_str()), 0);
  const auto after_vacuum = drain(*open_journal_source(o));
  ASSERT_EQ(after_vacuum.size(), 5U);
  EXPECT_EQ(after_vacuum.front().text, "eth0: kernel line 11");
  EXPECT_EQ(after_vacuum.front().lost_before, -1);
  for (size_t i = 1; i < after_vacuum.size(); ++i)
    EXPECT_EQ(after_vacuum[i].lost_before, 0);

  KernelClassifier c(testing::shipped_rules(), "node003");
  std::vector<KernelEvent> ev;
  for (const auto& r : after_vacuum)
    c.feed(r, ev);
  ASSERT_EQ(ev.size(), 1U);
  EXPECT_EQ(ev[0].kind, "records-lost");
  EXPECT_EQ(ev[0].fields.at("lost"), "unknown");
}

TEST_F(JournalSourceTest, StartAtTailReadsOnlyNewRecords) {
  const std::string jdir = dir.file("journal");
  ASSERT_EQ(::mkdir(jdir.c_str(), 0755), 0);
  journal(jdir + "/system.journal", numbered(1, 5, 1000000));
  JournalOptions o;
  o.directory = jdir;
  o.start_at_tail = true;
  auto src = open_journal_source(o);
  EXPECT_TRUE(drain(*src).empty());
  journal(jdir + "/system.journal", numbered(6, 6, 2000000));
  std::vector<KernelRecord> more;
  for (int i = 0; i < 50 && more.empty(); ++i)
    src->read(more, 100);
  ASSERT_EQ(more.size(), 1U);
  EXPECT_EQ(more[0].text, "eth0: kernel line 6");
}

TEST_F(JournalSourceTest, AMissingJournalIsAClearError) {
  JournalOptions o;
  o.files = {dir.file("nope.journal")};
  EXPECT_THROW(open_journal_source(o), std::runtime_error);
}

TEST(JournalCursor, FieldsOfACursor) {
  const auto c = parse_journal_cursor(
      "s=ae78d3bdda4347579fc3a678d476879e;i=1a;b=63b6750b5488447fa75aa1667f9abc17;m=5f5e100;"
      "t=644198d8d9000;x=b6ac1174521f57b6");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->seqnum, 26U);
  EXPECT_EQ(c->seqnum_id, "ae78d3bdda4347579fc3a678d476879e");
  EXPECT_EQ(c->monotonic_usec, 100000000U);
  EXPECT_EQ(c->realtime_usec, 1763726400000000U);
  EXPECT_FALSE(parse_journal_cursor("kmsg:abc:12"));
  EXPECT_FALSE(parse_journal_cursor("s=x;i=zz;t=1"));
}

}  // namespace
}  // namespace triage::collector
