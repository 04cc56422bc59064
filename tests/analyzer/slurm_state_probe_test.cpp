// Asking squeue, with stand-in scripts for a controller that answers, forgot the job, fails or
// hangs.
#include "analyzer/slurm_state_probe.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/time_util.h"
#include "test_support.h"

namespace triage {
namespace {

std::string fake_squeue(const test::ScratchDir& d, const std::string& body) {
  const auto p = d / "squeue";
  test::write_file(p, "#!/bin/sh\n" + body + "\n");
  ::chmod(p.c_str(), 0755);
  return p.string();
}

TEST(SqueueProbe, ReadsTheStateOfAQueuedJob) {
  test::ScratchDir d("squeue");
  const std::string exe =
      fake_squeue(d, "[ \"$1 $2 $3 $4 $5\" = \"-h -j 4242 -o %T\" ] && echo RUNNING");
  const SlurmStateAnswer a = query_squeue_state(4242, 5000, exe);
  EXPECT_TRUE(a.available) << a.detail;
  EXPECT_EQ(a.state, "RUNNING");
}

TEST(SqueueProbe, AJobSqueueNoLongerListsHasEnded) {
  test::ScratchDir d("squeue");
  EXPECT_EQ(query_squeue_state(1, 5000, fake_squeue(d, "exit 0")).state, "ENDED");
  test::ScratchDir e("squeue");
  const auto purged = query_squeue_state(
      1, 5000,
      fake_squeue(e, "echo 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1"));
  EXPECT_TRUE(purged.available);
  EXPECT_EQ(purged.state, "ENDED");
}

TEST(SqueueProbe, AControllerThatFailsOrHangsMeansUnavailable) {
  test::ScratchDir d("squeue");
  const auto down = query_squeue_state(
      1, 5000,
      fake_squeue(d, "echo 'squeue: error: Unable to contact slurm controller' >&2; exit 1"));
  EXPECT_FALSE(down.available);
  EXPECT_NE(down.detail.find("Unable to contact"), std::string::npos);
  test::ScratchDir e("squeue");
  const int64_t t0 = monotonic_usec();
  const auto hung = query_squeue_state(1, 300, fake_squeue(e, "exec sleep 30"));
  EXPECT_FALSE(hung.available);
  EXPECT_LT(monotonic_usec() - t0, 5 * 1000000);
  EXPECT_FALSE(query_squeue_state(1, 300, (d / "no-such-squeue").string()).available);
}

TEST(SqueueProbe, TheCliAsksSqueueWhenNoStateIsGiven) {
  test::ScratchDir d("squeue");
  fake_squeue(d, "echo RUNNING");
  // One getenv: the analyzer cannot know that two calls give the same answer.
  const char* path = std::getenv("PATH");
  const std::string old_path = path != nullptr ? path : "";
  ::setenv("PATH", (d.str() + ":" + old_path).c_str(), 1);
  test::ScratchDir job("job");
  test::copy_tree(std::filesystem::path(TRIAGE_FIXTURES_DIR) / "running", job.path());
  const auto r = test::run_cli({"analyze", "--now", "1795258530", "--format", "json",
                                (job / "outputs/9136-llama3-70b").string()});
  ::setenv("PATH", old_path.c_str(), 1);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j.at("job").at("slurm_state"), "RUNNING");
  EXPECT_EQ(j.at("job").at("slurm_state_source"), "squeue");
  EXPECT_EQ(j.at("status"), "running");
}

}  // namespace
}  // namespace triage
