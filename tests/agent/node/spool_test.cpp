#include "agent/node/spool.h"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/node/event_store.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::make_event;
using testing::read_file;
using testing::TempDir;

std::vector<KernelEvent> live_events(const SpoolReplay& r) {
  EventStore store(1000);
  for (const KernelEvent& e : r.events)
    store.restore(e);
  return store.events();
}

TEST(Spool, EventsAndTheirPositionComeBackAfterARestart) {
  TempDir dir("spool");
  {
    Spool s({dir / "spool"});
    s.open();
    ASSERT_TRUE(s.append_events(
        {make_event("b:1", "oom-kill", 100), make_event("b:2", "gpu-reset", 200)}, "cursor-2"));
    KernelEvent flood = make_event("b:3", "gpu-ring-timeout", 300);
    ASSERT_TRUE(s.append_events({flood}, "cursor-3"));
    flood.count = 800000;
    flood.last_usec = 900;
    ASSERT_TRUE(s.append_events({flood}, "cursor-9"));
  }
  Spool s({dir / "spool"});
  const SpoolReplay r = s.open();
  EXPECT_EQ(r.kernel_position, "cursor-9");
  const auto live = live_events(r);
  ASSERT_EQ(live.size(), 3u);
  EXPECT_EQ(live[2].count, 800000u) << "the later version of an event supersedes the earlier one";
  EXPECT_EQ(r.torn_lines, 0u);
}

TEST(Spool, ATornLastLineIsCutOffAndTheNextWriteStartsClean) {
  TempDir dir("spool");
  {
    Spool s({dir / "spool"});
    s.open();
    ASSERT_TRUE(s.append_events({make_event("b:1", "oom-kill", 100)}, "c1"));
  }
  const std::string seg = dir / "spool/events/00000001.jsonl";
  {
    // kill -9 in the middle of a write: half a line, no newline.
    std::ofstream out(seg, std::ios::app);
    out << R"({"r":"ev","e":{"id":"b:2","kind":"gpu-re)";
  }
  {
    Spool s({dir / "spool"});
    const SpoolReplay r = s.open();
    EXPECT_EQ(r.torn_lines, 1u);
    EXPECT_EQ(r.events.size(), 1u);
    EXPECT_EQ(r.kernel_position, "c1");
    ASSERT_TRUE(s.append_events({make_event("b:2", "gpu-reset", 200)}, "c2"));
  }
  Spool s({dir / "spool"});
  const SpoolReplay r = s.open();
  EXPECT_EQ(r.torn_lines, 0u);
  EXPECT_EQ(r.bad_lines, 0u);
  EXPECT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.kernel_position, "c2");
}

TEST(Spool, JobRecordsAreReadBackAndRepaired) {
  TempDir dir("spool");
  Spool s({dir / "spool"});
  s.open();
  ASSERT_TRUE(s.append_job(4242, {{"r", "msg"}, {"m", {{"op", "job_start"}}}}));
  {
    std::ofstream out(dir / "spool/jobs/4242.jsonl", std::ios::app);
    out << R"({"r":"msg","m":{"op":"task_st)";
  }
  size_t torn = 0;
  auto records = s.read_job(4242, &torn);
  EXPECT_EQ(torn, 1u);
  ASSERT_EQ(records.size(), 1u);
  ASSERT_TRUE(s.append_job(4242, {{"r", "analysis"}, {"result", "ok"}}));
  records = s.read_job(4242);
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[1]["result"], "ok");
  const auto files = s.list_jobs();
  ASSERT_EQ(files.size(), 1u);
  EXPECT_EQ(files[0].job_id, 4242u);
  EXPECT_TRUE(s.remove_job(4242));
  EXPECT_TRUE(s.list_jobs().empty());
}

TEST(Spool, GarbageInTheMiddleIsSkippedNotFatal) {
  TempDir dir("spool");
  testing::write_file(
      dir / "spool/events/00000001.jsonl",
      "{\"r\":\"ev\",\"e\":{\"id\":\"a\",\"kind\":\"oom-kill\"}}\n\x01\x02 junk\n"
      "{\"r\":\"ev\",\"e\":{\"id\":\"b\",\"kind\":7}}\n{\"r\":\"pos\",\"p\":\"c\"}\n",
      0600);
  Spool s({dir / "spool"});
  const SpoolReplay r = s.open();
  EXPECT_EQ(r.events.size(), 1u);
  EXPECT_EQ(r.bad_lines, 2u);
  EXPECT_EQ(r.kernel_position, "c");
}

TEST(Spool, SegmentsRotateAndCompactionKeepsOnlyTheLiveSet) {
  TempDir dir("spool");
  Spool s({dir / "spool", 512});
  s.open();
  KernelEvent flood = make_event("b:flood", "gpu-ring-timeout", 100);
  for (uint64_t n = 1; n <= 50; ++n) {
    flood.count = n;
    flood.last_usec = static_cast<int64_t>(100 + n);
    ASSERT_TRUE(s.append_events({flood}, "pos-" + std::to_string(n)));
  }
  EXPECT_GT(s.usage().event_segments, 5u);
  ASSERT_TRUE(s.compact_events({flood, make_event("b:other", "oom-kill", 50)}, "pos-50"));
  EXPECT_EQ(s.usage().event_segments, 1u);
  ASSERT_TRUE(s.append_events({make_event("b:new", "oom-kill", 60)}, "pos-51"));
  Spool again({dir / "spool", 512});
  const SpoolReplay r = again.open();
  const auto live = live_events(r);
  EXPECT_EQ(live.size(), 3u);
  EXPECT_EQ(r.kernel_position, "pos-51");
}

TEST(Spool, TheSpoolDirectoryIsPrivate) {
  TempDir dir("spool");
  Spool s({dir / "spool"});
  s.open();
  struct stat st {};
  ASSERT_EQ(::stat((dir / "spool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  ASSERT_TRUE(s.append_job(1, {{"r", "msg"}}));
  ASSERT_EQ(::stat((dir / "spool/jobs/1.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// A full disk: the write fails, is counted, leaves no half line, and works again once space is
// back.
TEST(Spool, AFullDiskIsCountedAndRecoveredFrom) {
  TempDir dir("spool");
  const std::string mnt = dir / "small";
  testing::make_dirs(mnt, 0755);
  if (::mount("tmpfs", mnt.c_str(), "tmpfs", 0, "size=256k") != 0) {
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  }
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{mnt};
  Spool s({mnt + "/spool"});
  s.open();
  ASSERT_TRUE(s.append_events({make_event("b:1", "oom-kill", 100)}, "c1"));
  const std::string filler = mnt + "/filler";
  {
    std::ofstream out(filler, std::ios::binary);
    const std::string block(4096, 'x');
    while (out.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  KernelEvent big = make_event("b:2", "gpu-reset", 200);
  big.lines.assign(64, std::string(1000, 'y'));
  EXPECT_FALSE(s.append_events({big}, "c2"));
  EXPECT_EQ(s.write_failures(), 1u);
  EXPECT_NE(s.last_error().find("No space left"), std::string::npos) << s.last_error();
  const std::string seg = read_file(mnt + "/spool/events/00000001.jsonl");
  EXPECT_EQ(seg.back(), '\n') << "a failed write is rolled back to the last complete line";

  std::filesystem::remove(filler);
  EXPECT_TRUE(s.append_events({big}, "c2"));
  Spool again({mnt + "/spool"});
  const SpoolReplay r = again.open();
  EXPECT_EQ(r.events.size(), 2u);
  EXPECT_EQ(r.kernel_position, "c2");
  EXPECT_EQ(r.torn_lines, 0u);
}

TEST(EventStore, ReplaysAreDuplicatesAndGrowingFloodsAreUpdates) {
  EventStore store(100);
  KernelEvent e = make_event("b:1", "gpu-ring-timeout", 100);
  EXPECT_EQ(store.classify(e), EventStore::Change::kNew);
  store.apply(e);
  EXPECT_EQ(store.classify(e), EventStore::Change::kDuplicate);
  KernelEvent grown = e;
  grown.count = 3;
  grown.last_usec = 300;
  grown.time_usec = 150;  // a replay that started mid-flood sees a later first line
  EXPECT_EQ(store.classify(grown), EventStore::Change::kUpdated);
  store.apply(grown);
  EXPECT_EQ(store.find("b:1")->count, 3u);
  EXPECT_EQ(store.find("b:1")->time_usec, 100) << "the first sighting is kept";
  KernelEvent older = e;
  older.count = 2;
  EXPECT_EQ(store.classify(older), EventStore::Change::kDuplicate) << "an older version never wins";
}

TEST(EventStore, PruningDropsOldEventsAndKeepsTheNewestUnderTheCap) {
  EventStore store(3);
  for (int i = 1; i <= 3; ++i)
    store.apply(make_event("e" + std::to_string(i), "oom-kill", int64_t{i} * 100));
  store.apply(make_event("e4", "oom-kill", 400));
  EXPECT_EQ(store.size(), 3u) << "beyond the cap the oldest goes";
  EXPECT_EQ(store.find("e1"), nullptr);
  EXPECT_NE(store.find("e4"), nullptr);
  EXPECT_EQ(store.prune(350), 2u);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.classify(make_event("e4", "oom-kill", 400)), EventStore::Change::kDuplicate);
}

}  // namespace
}  // namespace triage::agent
