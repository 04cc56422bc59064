// Run as root, slurm-triage must act as the job's owner: it never shows a file the owner cannot
// read and never writes through a link the owner planted. These tests need root (they create a test
// user); elsewhere they are skipped.
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;

struct User {
  uid_t uid = 0;
  gid_t gid = 0;
};

// A system user for the tests, created once (useradd); nullopt when that is impossible.
std::optional<User> test_user(const char* name) {
  if (::geteuid() != 0) return std::nullopt;
  if (::getpwnam(name) == nullptr) {
    const std::string cmd =
        std::string("useradd --system --no-create-home --shell /usr/sbin/nologin ") + name +
        " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0 && ::getpwnam(name) == nullptr) return std::nullopt;
  }
  const struct passwd* pw = ::getpwnam(name);
  if (pw == nullptr) return std::nullopt;
  return User{pw->pw_uid, pw->pw_gid};
}

void chown_tree(const fs::path& root, const User& u) {
  ASSERT_EQ(::lchown(root.c_str(), u.uid, u.gid), 0);
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    ASSERT_EQ(::lchown(e.path().c_str(), u.uid, u.gid), 0) << e.path();
  }
}

class AsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    user_ = test_user("triage-test");
    if (!user_) GTEST_SKIP() << "needs root (to create a test user and drop to it)";
    // The scratch directory itself must be reachable by the test user.
    ::chmod(dir_.path().c_str(), 0755);
  }
  // A job in the seed's layout owned by the test user, with `log_target` as its log.
  fs::path make_job(const std::string& name, const User& owner) {
    const fs::path out = dir_ / "outputs";
    fs::create_directories(out / name);
    test::write_file(out / (name + ".log"),
                     "0: completed step: 0, seconds: 30.0\n0: Traceback (most recent call "
                     "last):\n0: ValueError: x\n");
    fs::create_symlink("../" + name + ".log", out / name / "log");
    chown_tree(out / name, owner);
    ::lchown((out / (name + ".log")).c_str(), owner.uid, owner.gid);
    ::chmod(out.c_str(), 0755);
    return out / name;
  }
  test::ScratchDir dir_{"priv"};
  std::optional<User> user_;
};

TEST_F(AsRoot, ALogSymlinkToAFileTheOwnerCannotReadGivesANoteNeverItsContent) {
  const fs::path job = make_job("601-shadow", *user_);
  fs::remove(job / "log");
  fs::create_symlink("/etc/shadow", job / "log");
  ::lchown((job / "log").c_str(), user_->uid, user_->gid);
  const auto r =
      test::run_cli({"analyze", "--slurm-state", "none", "--format", "json", job.string()});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const std::string shadow = test::read_file("/etc/shadow");
  ASSERT_FALSE(shadow.empty());
  const std::string root_line = shadow.substr(0, shadow.find('\n'));
  EXPECT_EQ(r.out.find(root_line), std::string::npos);
  EXPECT_EQ(r.out.find("root:"), std::string::npos);
  const auto j = nlohmann::json::parse(r.out);
  bool noted = false;
  for (const auto& n : j.at("notes"))
    noted = noted || n.get<std::string>().find("permission denied") != std::string::npos;
  EXPECT_TRUE(noted) << r.out;
}

TEST_F(AsRoot, APlantedReportSymlinkToARootFileIsReplacedNotFollowed) {
  const fs::path job = make_job("602-plant", *user_);
  const fs::path victim = dir_ / "root-owned";
  test::write_file(victim, "root's data\n");
  ::chmod(victim.c_str(), 0644);
  fs::create_symlink(victim, job / "triage.md");
  ::lchown((job / "triage.md").c_str(), user_->uid, user_->gid);
  const auto r = test::run_cli({"analyze", "--slurm-state", "none", "--write", "-q", job.string()});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(test::read_file(victim), "root's data\n");
  ASSERT_FALSE(fs::is_symlink(job / "triage.md"));
  struct stat st {};
  ASSERT_EQ(::stat((job / "triage.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid) << "the report is written as the job's owner";
  ASSERT_EQ(::stat((job / "triage.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, user_->uid);
}

TEST_F(AsRoot, ADirectoryTheOwnerCannotWriteIsNotWrittenByRoot) {
  const fs::path job = make_job("603-readonly", *user_);
  // The job directory now belongs to root; the log (given directly) still belongs to the user, so
  // the analysis runs as the user, who may not write into root's directory.
  ::chown(job.c_str(), 0, 0);
  ::chmod(job.c_str(), 0755);
  const auto r = test::run_cli({"analyze", "--slurm-state", "none", "--write", "-q",
                                (job.parent_path() / "603-readonly.log").string()});
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_FALSE(fs::exists(job / "triage.md"));
}

TEST_F(AsRoot, AnOutputsFolderOfSeveralOwnersAnalysesEachJobAsItsOwner) {
  const auto other = test_user("triage-test2");
  ASSERT_TRUE(other);
  const fs::path a = make_job("604-alice", *user_);
  const fs::path b = make_job("605-bob", *other);
  const auto r =
      test::run_cli({"analyze", "--slurm-state", "none", "--write", (dir_ / "outputs").string()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  struct stat st {};
  ASSERT_EQ(::stat((a / "triage.md").c_str(), &st), 0) << r.out << r.err;
  EXPECT_EQ(st.st_uid, user_->uid);
  ASSERT_EQ(::stat((b / "triage.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, other->uid);
  EXPECT_NE(r.out.find("604-alice"), std::string::npos);
  EXPECT_NE(r.out.find("605-bob"), std::string::npos);
}

}  // namespace
}  // namespace triage
