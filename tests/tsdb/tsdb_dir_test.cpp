// Reading a job's prometheus/ directory and copying it privately: blocks, WAL, the lock, and what a
// user could have planted there.
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analyzer/tsdb/tsdb_dir.h"
#include "common/safe_io.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

namespace fs = std::filesystem;

class TsdbDirTest : public TsdbTest {
 protected:
  // A job whose Prometheus wrote blocks, a WAL segment, a lock, and its own log.
  void make_job() {
    Scenario sc({.hosts = {"node001"}, .gpus_per_host = 1, .rdma_per_host = 1, .duration_s = 600});
    sc.build_tsdb(job_dir());
    prom_ = job_dir() + "/prometheus";
    fs::create_directories(prom_ + "/wal/checkpoint.00000001");
    std::ofstream(prom_ + "/wal/00000002") << std::string(1000, 'w');
    std::ofstream(prom_ + "/wal/checkpoint.00000001/00000000") << std::string(10, 'c');
    fs::create_directories(prom_ + "/chunks_head");
    std::ofstream(prom_ + "/chunks_head/000001") << std::string(100, 'h');
    std::ofstream(prom_ + "/lock") << "";
    std::ofstream(prom_ + "/queries.active") << "";
    std::ofstream(prom_ + "/prometheus.log") << "level=info msg=started\n";
    std::ofstream(dir_ + "/secret") << "not yours";
  }
  std::string prom_;
};

TEST_F(TsdbDirTest, ScanSeesBlocksTheWriteAheadLogAndAStaleLock) {
  make_job();
  const auto scan = scan_tsdb_dir(job_dir());
  EXPECT_TRUE(scan.exists);
  EXPECT_TRUE(scan.error.empty()) << scan.error;
  ASSERT_FALSE(scan.blocks.empty());
  EXPECT_GT(scan.blocks.front().num_samples, 0);
  EXPECT_GT(scan.blocks.front().bytes, 0u);
  EXPECT_TRUE(scan.has_wal);
  EXPECT_EQ(scan.wal_bytes, 1010u);
  EXPECT_EQ(scan.chunks_head_bytes, 100u);
  EXPECT_TRUE(scan.has_lock);
  EXPECT_FALSE(scan.lock_holder.has_value());  // nobody holds it: a stale lock of a finished job
  EXPECT_FALSE(scan.empty());
  EXPECT_LT(*scan.blocks_min_ms(), *scan.blocks_max_ms());
}

TEST_F(TsdbDirTest, ALockHeldByALocalProcessIsFoundInProcLocks) {
  make_job();
  triage::UniqueFd fd(::open((prom_ + "/lock").c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(fd);
  ASSERT_EQ(::flock(fd.get(), LOCK_EX | LOCK_NB), 0);
  const auto scan = scan_tsdb_dir(job_dir());
  fd.reset();
  ASSERT_TRUE(scan.lock_holder.has_value());
  EXPECT_EQ(*scan.lock_holder, ::getpid());
}

TEST_F(TsdbDirTest, ProcLocksLinesAreMatchedByDeviceAndInode) {
  const dev_t dev = makedev(0xfd, 0x01);
  const std::string text =
      "1: POSIX  ADVISORY  WRITE 111 00:1a:99 0 EOF\n"
      "2: FLOCK  ADVISORY  WRITE 4242 fd:01:1234567 0 EOF\n"
      "2: -> FLOCK  ADVISORY  WRITE 5555 fd:01:1234567 0 EOF\n"
      "garbage line\n";
  EXPECT_EQ(lock_holder_from_proc_locks(text, dev, 1234567), 4242);
  EXPECT_FALSE(lock_holder_from_proc_locks(text, dev, 7654321).has_value());
  EXPECT_FALSE(lock_holder_from_proc_locks(text, makedev(8, 1), 1234567).has_value());
}

TEST_F(TsdbDirTest, TheCopyKeepsTheWalButNeverTheLockLogsOrPlantedSymlinks) {
  make_job();
  fs::create_symlink(dir_ + "/secret", prom_ + "/wal/00000003");
  fs::create_symlink(dir_, prom_ + "/01ARZ3NDEKTSV4RRFFQ69G5FAV");
  const auto scan = scan_tsdb_dir(job_dir());
  EXPECT_FALSE(scan.problems.empty());  // the planted block symlink is reported, not followed
  const std::string dest = dir_ + "/copy";
  fs::create_directories(dest);
  const auto rep = copy_tsdb(scan, dest, {});
  EXPECT_TRUE(rep.wal_copied);
  EXPECT_EQ(rep.blocks.size(), scan.blocks.size());
  EXPECT_TRUE(fs::exists(dest + "/wal/00000002"));
  EXPECT_TRUE(fs::exists(dest + "/wal/checkpoint.00000001/00000000"));
  EXPECT_TRUE(fs::exists(dest + "/chunks_head/000001"));
  EXPECT_FALSE(fs::exists(dest + "/lock"));
  EXPECT_FALSE(fs::exists(dest + "/queries.active"));
  EXPECT_FALSE(fs::exists(dest + "/prometheus.log"));
  EXPECT_FALSE(fs::exists(fs::symlink_status(dest + "/wal/00000003")));
  EXPECT_FALSE(fs::exists(dest + "/01ARZ3NDEKTSV4RRFFQ69G5FAV"));
  bool symlink_reported = false;
  for (const auto& s : rep.skipped)
    symlink_reported = symlink_reported || s.find("symlink") != std::string::npos;
  EXPECT_TRUE(symlink_reported);
  for (const auto& b : rep.blocks) {
    const fs::path copied = fs::path(dest) / b;
    EXPECT_EQ(fs::file_size(copied / "index"), fs::file_size(fs::path(prom_) / b / "index"));
    EXPECT_EQ(fs::status(copied).permissions() & fs::perms::others_all, fs::perms::none);
  }
}

TEST_F(TsdbDirTest, ALiveJobsCopyHoldsOnlyTheImmutableBlocks) {
  make_job();
  const std::string dest = dir_ + "/copy";
  fs::create_directories(dest);
  const auto rep = copy_tsdb(scan_tsdb_dir(job_dir()), dest, {.include_wal = false});
  EXPECT_FALSE(rep.wal_copied);
  EXPECT_FALSE(fs::exists(dest + "/wal"));
  EXPECT_FALSE(fs::exists(dest + "/chunks_head"));
  EXPECT_FALSE(rep.blocks.empty());
}

TEST_F(TsdbDirTest, OnlyBlocksOverlappingTheWindowAreCopiedAndTheSizeLimitHolds) {
  make_job();
  const auto scan = scan_tsdb_dir(job_dir());
  const std::string dest = dir_ + "/copy";
  fs::create_directories(dest);
  const auto rep =
      copy_tsdb(scan, dest, {.include_wal = false, .min_ms = *scan.blocks_max_ms() + 1});
  EXPECT_TRUE(rep.blocks.empty());
  fs::create_directories(dir_ + "/copy2");
  EXPECT_THROW(copy_tsdb(scan, dir_ + "/copy2", {.max_bytes = 16}), std::runtime_error);
}

TEST_F(TsdbDirTest, NoPrometheusDirectoryIsNotAnError) {
  fs::create_directories(job_dir());
  const auto scan = scan_tsdb_dir(job_dir());
  EXPECT_FALSE(scan.exists);
  EXPECT_TRUE(scan.error.empty());
  std::ofstream(job_dir() + "/prometheus") << "a file, not a directory";
  EXPECT_FALSE(scan_tsdb_dir(job_dir()).exists);
}

TEST_F(TsdbDirTest, AMalformedBlockIsAProblemNotACrash) {
  fs::create_directories(job_dir() + "/prometheus/01BX5ZZKBKACTAV9WEVGEMMVRZ");
  std::ofstream(job_dir() + "/prometheus/01BX5ZZKBKACTAV9WEVGEMMVRZ/meta.json")
      << "{\"minTime\": \"soon\"}";
  fs::create_directories(job_dir() + "/prometheus/01BX5ZZKBKACTAV9WEVGEMMVS0");
  const auto scan = scan_tsdb_dir(job_dir());
  EXPECT_TRUE(scan.blocks.empty());
  EXPECT_EQ(scan.problems.size(), 2u);
  EXPECT_TRUE(scan.empty());
}

}  // namespace
}  // namespace triage::tsdb::testing
