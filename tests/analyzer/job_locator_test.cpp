#include "analyzer/job_locator.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;

// outputs/7877-FOO/ (log -> ../7877-FOO.log), outputs/7877-FOO.log, outputs/ckpt-shared/
struct Outputs {
  test::ScratchDir d{"outputs"};
  fs::path out = d / "outputs";
  Outputs() {
    test::write_file(out / "7877-FOO.log", "x\n");
    fs::create_directories(out / "7877-FOO");
    fs::create_symlink("../7877-FOO.log", out / "7877-FOO" / "log");
    test::write_file(out / "7878-BAR.log", "y\n");
    fs::create_directories(out / "ckpt-shared" / "checkpoints");
    test::write_file(out / "local_20261121_100000-BAZ.log", "z\n");
    fs::create_directories(out / "local_20261121_100000-BAZ");
    fs::create_symlink("../local_20261121_100000-BAZ.log",
                       out / "local_20261121_100000-BAZ" / "log");
  }
};

TEST(JobLocator, AJobDirectoryLeadsToItsLogAndALogToItsDirectory) {
  Outputs o;
  JobTarget t = resolve_job_path((o.out / "7877-FOO").string() + "/");
  EXPECT_EQ(t.job_dir, (o.out / "7877-FOO").string());
  EXPECT_EQ(t.log_path, (o.out / "7877-FOO" / "log").string());
  EXPECT_EQ(t.job_id, 7877u);
  EXPECT_EQ(t.job_name, "FOO");
  t = resolve_job_path((o.out / "7877-FOO.log").string());
  EXPECT_EQ(t.job_dir, (o.out / "7877-FOO").string());
  t = resolve_job_path((o.out / "7878-BAR.log").string());
  EXPECT_TRUE(t.job_dir.empty());
  EXPECT_EQ(t.job_id, 7878u);
}

TEST(JobLocator, AJobIdIsLookedUpUnderTheOutputsRoot) {
  Outputs o;
  EXPECT_EQ(resolve_job_id(7877, o.out.string()).job_dir, (o.out / "7877-FOO").string());
  const JobTarget bar = resolve_job_id(7878, o.out.string());
  EXPECT_TRUE(bar.job_dir.empty());
  EXPECT_EQ(bar.log_path, (o.out / "7878-BAR.log").string());
  EXPECT_FALSE(resolve_job_id(1, o.out.string()).error.empty());
}

TEST(JobLocator, AnOutputsFolderListsJobDirectoriesAndSkipsSharedCheckpointDirectories) {
  Outputs o;
  EXPECT_EQ(classify_argument(o.out.string()), ArgumentKind::kOutputsFolder);
  EXPECT_EQ(classify_argument((o.out / "7877-FOO").string()), ArgumentKind::kJobDir);
  EXPECT_EQ(classify_argument((o.out / "7878-BAR.log").string()), ArgumentKind::kLogFile);
  EXPECT_EQ(classify_argument("123456"), ArgumentKind::kJobId);
  EXPECT_EQ(classify_argument((o.out / "missing").string()), ArgumentKind::kMissing);
  std::vector<std::string> skipped;
  const auto jobs = list_job_dirs(o.out.string(), &skipped);
  EXPECT_EQ(jobs, (std::vector<std::string>{"7877-FOO", "local_20261121_100000-BAZ"}));
  EXPECT_EQ(skipped, std::vector<std::string>{"ckpt-shared"});
}

TEST(JobLocator, ADanglingLogSymlinkStillNamesTheLog) {
  test::ScratchDir d("dangling");
  fs::create_directories(d / "9-X");
  fs::create_symlink("../9-X.log", d / "9-X" / "log");
  const JobTarget t = resolve_job_path((d / "9-X").string());
  EXPECT_TRUE(t.error.empty());
  EXPECT_EQ(t.log_path, (d / "9-X" / "log").string());
}

TEST(JobLocator, JobNamesInTheCommonShapes) {
  std::optional<uint64_t> id;
  std::string name;
  parse_job_name("7877-llama3-70b", id, name);
  EXPECT_EQ(id, 7877u);
  EXPECT_EQ(name, "llama3-70b");
  parse_job_name("slurm-4242.out", id, name);
  EXPECT_EQ(id, 4242u);
  parse_job_name("local_20261121_100000-BAZ.log", id, name);
  EXPECT_FALSE(id);
  EXPECT_EQ(name, "BAZ");
  parse_job_name("train.log", id, name);
  EXPECT_FALSE(id);
  EXPECT_EQ(name, "train");
}

}  // namespace
}  // namespace triage
