// `slurm-triage analyze --write` run by root on a job directory its owner has booby-trapped. The
// analysis must act as the owner: nothing the owner could not read ends up in the report, nothing
// outside the owner's reach is written, nothing blocks, and each case leaves a note saying why the
// log was not read. (A planted triage.md symlink and a log symlink to /etc/shadow without --write
// are covered in tests/analyzer/privilege_test.cpp.)
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "tests/analyzer/test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;

struct User {
  uid_t uid = 0;
  gid_t gid = 0;
};

std::optional<User> test_user() {
  constexpr const char* kName = "triage-test";
  if (::geteuid() != 0) return std::nullopt;
  if (::getpwnam(kName) == nullptr) {
    const std::string cmd = std::string(
                                "useradd --system --no-create-home --shell "
                                "/usr/sbin/nologin ") +
                            kName + " >/dev/null 2>&1";
    if (std::system(cmd.c_str()) != 0 && ::getpwnam(kName) == nullptr) return std::nullopt;
  }
  const struct passwd* pw = ::getpwnam(kName);
  if (pw == nullptr) return std::nullopt;
  return User{pw->pw_uid, pw->pw_gid};
}

class AnalyzeAsRoot : public ::testing::Test {
 protected:
  void SetUp() override {
    user_ = test_user();
    if (!user_) GTEST_SKIP() << "needs root (to create a test user and drop to it)";
    ::chmod(dir_.path().c_str(), 0755);
  }

  // An empty job directory owned by the test user; the test puts its `log` in place.
  fs::path job_dir(const std::string& name) {
    fs::path job = dir_ / name;
    fs::create_directories(job);
    own(job);
    return job;
  }
  void own(const fs::path& p) const { ASSERT_EQ(::lchown(p.c_str(), user_->uid, user_->gid), 0); }

  // Runs the analysis as root and checks what every trap has in common: it ends promptly, the
  // report (if any) belongs to the owner, and the note names why the log was not read.
  std::string analyze_trapped(const fs::path& job, const std::string& expected_note) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = test::run_cli(
        {"analyze", "--slurm-state", "none", "--write", "--format", "json", job.string()});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15)) << "nothing blocks";
    EXPECT_NE(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE((r.out + r.err).find(expected_note), std::string::npos)
        << "a clear note: " << r.out << r.err;
    for (const char* name : {"triage.md", "triage.json"}) {
      struct stat st {};
      if (::lstat((job / name).c_str(), &st) == 0) {
        EXPECT_TRUE(S_ISREG(st.st_mode)) << name;
        EXPECT_EQ(st.st_uid, user_->uid) << name << " is written as the owner, never as root";
      }
    }
    std::string written;
    if (fs::exists(job / "triage.md")) written += test::read_file(job / "triage.md");
    if (fs::exists(job / "triage.json")) written += test::read_file(job / "triage.json");
    return r.out + r.err + written;
  }

  test::ScratchDir dir_{"harden-priv"};
  std::optional<User> user_;
};

TEST_F(AnalyzeAsRoot, WithWriteALogSymlinkToShadowPutsNoneOfItInTheReport) {
  const fs::path job = job_dir("701-shadow");
  fs::create_symlink("/etc/shadow", job / "log");
  own(job / "log");
  const std::string everything = analyze_trapped(job, "permission denied");
  const std::string shadow = test::read_file("/etc/shadow");
  ASSERT_FALSE(shadow.empty());
  EXPECT_EQ(everything.find(shadow.substr(0, shadow.find('\n'))), std::string::npos);
  EXPECT_EQ(everything.find("root:"), std::string::npos);
}

TEST_F(AnalyzeAsRoot, AFifoAsTheLogIsRefusedWithoutBlocking) {
  const fs::path job = job_dir("702-fifo");
  ASSERT_EQ(::mkfifo((job / "log").c_str(), 0644), 0);
  own(job / "log");
  analyze_trapped(job, "a FIFO");
}

TEST_F(AnalyzeAsRoot, AFifoBehindTheLogSymlinkIsRefusedWithoutBlocking) {
  const fs::path job = job_dir("703-fifo-link");
  const fs::path fifo = dir_ / "703.pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0666), 0);
  own(fifo);
  fs::create_symlink(fifo, job / "log");
  own(job / "log");
  analyze_trapped(job, "a FIFO");
}

TEST_F(AnalyzeAsRoot, ALogThatIsADirectoryIsRefused) {
  const fs::path job = job_dir("704-dir");
  fs::create_directories(job / "log");
  own(job / "log");
  test::write_file(job / "log" / "secret", "not a log\n");
  analyze_trapped(job, "a directory");
}

TEST_F(AnalyzeAsRoot, ARootOnlyLogNextToAPlantedReportLinkTouchesNeither) {
  // Both traps at once: the log is root's (mode 0600) and triage.md points at a root-owned file.
  const fs::path job = job_dir("705-both");
  const fs::path root_log = dir_ / "705-root.log";
  test::write_file(root_log, "Traceback (most recent call last):\nroot-only-secret\n");
  ::chmod(root_log.c_str(), 0600);
  fs::create_symlink(root_log, job / "log");
  own(job / "log");
  const fs::path victim = dir_ / "705-victim";
  test::write_file(victim, "root's data\n");
  fs::create_symlink(victim, job / "triage.md");
  own(job / "triage.md");
  const std::string everything = analyze_trapped(job, "permission denied");
  EXPECT_EQ(everything.find("root-only-secret"), std::string::npos);
  EXPECT_EQ(test::read_file(victim), "root's data\n");
}

// The agent saw a job directory owned by the user; before the analyzer runs, the user swaps the
// directory for a symlink to a directory of root's. Whether the analyzer learns the owner from the
// path (lstat: the link is the user's) or from the agent's evidence (the job's uid), it writes as
// the user, who cannot write there: root's directory gets no report.
TEST_F(AnalyzeAsRoot, AJobDirSwappedForALinkToRootsDirectoryGetsNoReportThere) {
  const fs::path roots = dir_ / "801-roots";
  fs::create_directories(roots);
  ::chmod(roots.c_str(), 0755);
  test::write_file(roots / "log", "Traceback (most recent call last):\nRuntimeError: boom\n");
  const nlohmann::json evidence = {
      {"schema_version", 1},
      {"job", {{"job_id", 801}, {"uid", user_->uid}, {"gid", user_->gid}}},
      {"nodes", nlohmann::json::array()}};
  for (const bool with_evidence : {false, true}) {
    SCOPED_TRACE(with_evidence ? "owner from the agent's evidence" : "owner from the path");
    const fs::path job = job_dir(with_evidence ? "801-swap-ev" : "801-swap");
    test::write_file(job / "log", "step 1 loss 2.0\n");
    own(job / "log");
    fs::remove_all(job);  // the swap, between the agent's look and the analyzer's write
    fs::create_symlink(roots, job);
    own(job);
    std::vector<std::string> args = {"analyze", "--slurm-state", "none",
                                     "--write", "--format",      "json"};
    if (with_evidence) args.insert(args.end(), {"--evidence", "-"});
    args.push_back(job.string());
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = test::run_cli(args, with_evidence ? evidence.dump() : "");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
    EXPECT_EQ(r.err.find("evidence:"), std::string::npos) << "the evidence was accepted: " << r.err;
    EXPECT_EQ(r.exit_code, 4) << "the report could not be written: " << r.out << r.err;
    EXPECT_NE(r.err.find("Permission denied"), std::string::npos) << r.err;
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(roots))
      names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{"log"}) << "nothing written in root's directory\n"
                                                      << r.out << r.err;
  }
}

}  // namespace
}  // namespace triage
