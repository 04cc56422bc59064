// `slurm-triage analyze` on job directories built to exhaust it: a ray_logs/ with 100,000
// entries (a Ray cluster that never cleaned up its sessions) must be listed only up to the cap
// (ExtraLogLimits::max_dir_entries), finish promptly and say that the listing was cut short.
#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "common/safe_io.h"
#include "tests/analyzer/test_support.h"

namespace triage {
namespace {

namespace fs = std::filesystem;

void touch(const fs::path& p) {
  const triage::UniqueFd fd(::open(p.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd) << p;
}

TEST(AnalyzerLimits, ARayLogsDirWith100000EntriesIsListedOnlyUpToTheCapAndSaysSo) {
  test::ScratchDir dir("ray-flood");
  const fs::path job = dir.path() / "9001";
  fs::create_directories(job / "ray_logs");
  test::write_file(job / "log",
                   "step 100 loss 1.9\nTraceback (most recent call last):\n"
                   "RuntimeError: NCCL error: unhandled system error\n");
  // One real session with a worker log, lost among 100,000 leftovers.
  fs::create_directories(job / "ray_logs" / "session_latest");
  test::write_file(job / "ray_logs" / "session_latest" / "worker-1.err", "worker died\n");
  for (int i = 0; i < 100000; ++i)
    touch(job / "ray_logs" / ("stale-" + std::to_string(i) + ".lock"));

  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::run_cli(
      {"analyze", "--slurm-state", "none", "--mode", "full", "--format", "json", job.string()});
  const auto took = std::chrono::steady_clock::now() - t0;
  EXPECT_LT(took, std::chrono::seconds(30)) << "bounded: the listing stops at the cap";
  EXPECT_EQ(r.exit_code, 1) << "analysed; the job failed\n" << r.err;
  const nlohmann::json out = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(out.is_object()) << r.out;
  bool noted = false;
  for (const auto& n : out.value("notes", nlohmann::json::array())) {
    if (n.is_string() && n.get<std::string>().find("too many entries") != std::string::npos)
      noted = true;
  }
  EXPECT_TRUE(noted) << "the report says the listing was capped: " << r.out;
}

}  // namespace
}  // namespace triage
