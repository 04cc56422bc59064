#include "common/safe_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

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

TEST_F(SafeIo, ReadLimitReportsTruncation) {
  std::ofstream(dir_ / "big") << std::string(100, 'x');
  UniqueFd f = open_regular_file((dir_ / "big").string(), true);
  bool truncated = false;
  EXPECT_EQ(read_fd_limited(f.get(), 10, &truncated).size(), 10u);
  EXPECT_TRUE(truncated);
}

}  // namespace
}  // namespace triage
