#include "common/safe_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <system_error>

namespace triage {
namespace {

class SafeIo : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() / ("safe_io_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(SafeIo, AtomicWriteReplacesASymlinkInsteadOfFollowingIt) {
  const auto victim = dir_ / "victim";
  std::ofstream(victim) << "precious";
  std::filesystem::create_symlink(victim, dir_ / "triage.md");
  UniqueFd d = open_dir(dir_.string());
  atomic_write_at(d.get(), "triage.md", "report");
  std::ifstream in(victim);
  std::string content;
  std::getline(in, content);
  EXPECT_EQ(content, "precious");
  EXPECT_FALSE(std::filesystem::is_symlink(dir_ / "triage.md"));
  struct stat st {};
  ASSERT_EQ(::stat((dir_ / "triage.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
}

TEST_F(SafeIo, RefusesFifosDirectoriesAndSymlinks) {
  ASSERT_EQ(::mkfifo((dir_ / "fifo").c_str(), 0600), 0);
  EXPECT_THROW(open_regular_file((dir_ / "fifo").string(), true), std::system_error);
  EXPECT_THROW(open_regular_file(dir_.string(), true), std::system_error);
  std::ofstream(dir_ / "real") << "x";
  std::filesystem::create_symlink(dir_ / "real", dir_ / "link");
  EXPECT_THROW(open_regular_file((dir_ / "link").string(), true), std::system_error);
  EXPECT_NO_THROW(open_regular_file((dir_ / "link").string(), false));
}

// What /proc hands out is refused; the same file by its own path is not.
TEST_F(SafeIo, OutsideProcRefusesDescriptorLinksAndProcFilesButOpensTheFileItself) {
  const auto log = dir_ / "slurm-1.out";
  std::ofstream(log) << "line\n";
  const UniqueFd held(::open(log.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_TRUE(held);
  const std::string by_fd = "/proc/self/fd/" + std::to_string(held.get());
  std::filesystem::create_symlink(by_fd, dir_ / "link");
  const auto refused = [](const std::string& path) -> int {
    try {
      (void)open_regular_file_outside_proc(path);
      return 0;
    } catch (const std::system_error& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      return e.code().value();
    }
  };
  EXPECT_EQ(refused(by_fd), ELOOP);                     // a descriptor link, named directly
  EXPECT_EQ(refused((dir_ / "link").string()), ELOOP);  // or behind a symlink
  EXPECT_EQ(refused("/proc/self/status"), EACCES);      // a regular-looking file of procfs
  EXPECT_TRUE(open_regular_file_outside_proc(log.string()));
  std::filesystem::create_symlink(log, dir_ / "plain-link");  // ordinary symlinks still work
  EXPECT_TRUE(open_regular_file_outside_proc((dir_ / "plain-link").string()));
}

TEST_F(SafeIo, ReadLimitReportsTruncation) {
  std::ofstream(dir_ / "big") << std::string(100, 'x');
  UniqueFd f = open_regular_file((dir_ / "big").string(), true);
  bool truncated = false;
  EXPECT_EQ(read_fd_limited(f.get(), 10, &truncated).size(), 10u);
  EXPECT_TRUE(truncated);
}

TEST_F(SafeIo, ListsADirectorySortedWithoutDotEntriesAndKeepsTheCallersOffset) {
  std::ofstream(dir_ / "b") << "";
  std::filesystem::create_directory(dir_ / "a");
  std::filesystem::create_symlink("b", dir_ / "c");
  UniqueFd d = open_dir(dir_.string());
  const auto entries = list_dir_at(d.get());
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "a");
  EXPECT_EQ(entries[0].type, DT_DIR);
  EXPECT_EQ(entries[1].name, "b");
  EXPECT_EQ(entries[2].name, "c");
  EXPECT_EQ(entries[2].type, DT_LNK);
  EXPECT_EQ(list_dir_at(d.get()).size(), 3u) << "a second listing through the same fd sees all";
}

TEST_F(SafeIo, ListingStopsAtTheCapAndSaysSo) {
  for (int i = 0; i < 10; ++i)
    std::ofstream(dir_ / ("f" + std::to_string(i))) << "";
  bool capped = false;
  EXPECT_EQ(list_dir(dir_.string(), 12, &capped).size(), 10u);  // 10 files plus . and ..
  EXPECT_FALSE(capped);
  EXPECT_LT(list_dir(dir_.string(), 5, &capped).size(), 5u);
  EXPECT_TRUE(capped);
}

TEST_F(SafeIo, ListingAMissingDirectoryNamesIt) {
  try {
    (void)list_dir((dir_ / "missing").string());
    FAIL() << "expected an error";
  } catch (const std::system_error& e) {
    EXPECT_EQ(e.code().value(), ENOENT);
    EXPECT_NE(std::string(e.what()).find("list " + (dir_ / "missing").string()), std::string::npos);
  }
}

}  // namespace
}  // namespace triage
