// `slurm-triage follow`: the live judgement driven from the command line, as people and scripts
// use it without the agent.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzer/line_text.h"
#include "test_support.h"

namespace triage {
namespace {

using test::run_cli;

std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    v.push_back(nlohmann::json::parse(line));
  return v;
}

// Thirty steps a second apart from 10:00:00 (local time, as the job printed it).
std::string thirty_steps() {
  std::string log = "SLURM_JOB_ID=4242\n";
  for (int s = 0; s < 30; ++s) {
    char buf[160];
    (void)std::snprintf(
        buf, sizeof buf,
        "0: [2026-11-21 10:00:%02d] completed step: %d, seconds: 1.000, loss: 9.1\n", s, s);
    log += buf;
  }
  return log;
}

int64_t last_step_epoch() {
  return leading_timestamp_usec("[2026-11-21 10:00:29]").value() / 1000000;
}

class FollowCli : public ::testing::Test {
 protected:
  FollowCli() : dir("follow") { test::use_source_rules(); }
  std::vector<std::string> once(const std::string& log, int64_t now) {
    test::write_file(dir / "slurm-4242.out", log);
    return {"follow",
            "--once",
            "--stall-min",
            "60",
            "--now",
            std::to_string(now),
            (dir / "slurm-4242.out").string()};
  }
  test::ScratchDir dir;
};

TEST_F(FollowCli, AJobSilentPastItsThresholdIsReportedStalledAndExits1) {
  const auto r = run_cli(once(thirty_steps(), last_step_epoch() + 61));
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 1u) << r.out;
  EXPECT_EQ(lines[0]["event"], "verdict");
  EXPECT_EQ(lines[0]["stalled"], true);
  EXPECT_EQ(lines[0]["last_step"], 29);
  EXPECT_EQ(lines[0]["last_step_line"], 31);
  EXPECT_EQ(lines[0]["threshold_s"], 60.0);
  EXPECT_EQ(lines[0]["silence_s"], 61.0);
}

TEST_F(FollowCli, BeforeTheThresholdTheJobIsProgressing) {
  const auto r = run_cli(once(thirty_steps(), last_step_epoch() + 59));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json_lines(r.out).at(0)["stalled"], false);
}

TEST_F(FollowCli, AWatchdogTimeoutIsPrintedAsAWarningWithItsLine) {
  const std::string watchdog =
      "2: [rank2]:[E1121 10:11:35.574914 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught "
      "collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, "
      "NumelOut=262144, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.";
  const auto r = run_cli(once(thirty_steps() + watchdog + "\n", last_step_epoch() + 10));
  const auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0]["event"], "warning");
  EXPECT_EQ(lines[0]["class"], "nccl-timeout");
  EXPECT_EQ(lines[0]["line"], 32);
  EXPECT_EQ(lines[0]["text"], watchdog);
  EXPECT_EQ(lines[1]["event"], "verdict");
}

TEST_F(FollowCli, ALogWithoutStepLinesIsNeverJudged) {
  const auto r = run_cli(once("hello\nepoch 1 loss 0.4\n", last_step_epoch() + 86400));
  EXPECT_EQ(r.exit_code, 0);
  const auto v = json_lines(r.out).at(0);
  EXPECT_EQ(v["judged"], false);
  EXPECT_EQ(v["guards_applied"], nlohmann::json::array({"no-step-lines"}));
}

TEST_F(FollowCli, AnIncompleteLastLineWaitsForItsLineBreak) {
  const auto r = run_cli(
      once(thirty_steps() + "0: [2026-11-21 10:00:30] completed step: 30", last_step_epoch() + 10));
  EXPECT_EQ(json_lines(r.out).at(0)["last_step"], 29);
}

// `slurm-triage follow` polling a log, read line by line as it prints; killed on destruction.
class RunningFollower {
 public:
  explicit RunningFollower(const std::vector<std::string>& args) {
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    std::vector<std::string> argv_s = {TRIAGE_CLI_BINARY};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    argv.reserve(argv_s.size() + 1);
    for (auto& a : argv_s)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = ::fdopen(out[0], "r");
  }
  ~RunningFollower() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    (void)std::fclose(out_);
  }
  RunningFollower(const RunningFollower&) = delete;
  RunningFollower& operator=(const RunningFollower&) = delete;

  // The next JSON line it prints (null at its end).
  nlohmann::json next() {
    char buf[8192];
    if (std::fgets(buf, sizeof buf, out_) == nullptr) return nullptr;
    return nlohmann::json::parse(buf);
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

TEST_F(FollowCli, PollingPrintsEachVerdictChangeAsTheLogGrowsAndFallsSilent) {
  const auto log = dir / "slurm-4242.out";
  std::string steps;
  for (int s = 0; s < 10; ++s)
    steps += "0: completed step: " + std::to_string(s) + ", seconds: 0.010, loss: 9.1\n";
  test::write_file(log, steps);
  RunningFollower f({"follow", "--interval", "0.1", "--stall-min", "1", log.string()});
  const auto first = f.next();
  EXPECT_EQ(first["stalled"], false) << first;  // the steps just arrived
  const auto silent = f.next();
  EXPECT_EQ(silent["stalled"], true) << silent;  // a second without a step
  EXPECT_GE(silent["silence_s"].get<double>(), 1.0);
  std::ofstream(log, std::ios::app) << "0: completed step: 10, seconds: 0.010, loss: 9.1\n";
  const auto resumed = f.next();
  EXPECT_EQ(resumed["stalled"], false) << resumed;
  EXPECT_EQ(resumed["last_step"], 10);
  EXPECT_EQ(resumed["guards_applied"], nlohmann::json::array({"burst-floor"}));
}

// Steps [from, to) of a run printing each step's time, every one `seconds` long.
std::string paced_steps(int from, int to, double seconds) {
  std::string out;
  for (int s = from; s < to; ++s) {
    char buf[160];
    (void)std::snprintf(buf, sizeof buf, "0: completed step: %d, seconds: %.3f, loss: 9.1\n", s,
                        seconds);
    out += buf;
  }
  return out;
}

// The next pace event it prints (the verdicts between skipped).
nlohmann::json next_pace(RunningFollower& f) {
  for (nlohmann::json j = f.next(); !j.is_null(); j = f.next()) {
    if (j["event"] == "pace") return j;
  }
  return nullptr;
}

// Issue 28: a job that keeps stepping but 30% slower from step 200 is warned about once, as the
// log grows, and the warning clears when its pace comes back; no stall is ever reported.
TEST_F(FollowCli, PollingWarnsOfALastingSlowdownOnceAndClearsItWhenThePaceComesBack) {
  const auto log = dir / "slurm-4242.out";
  test::write_file(log, paced_steps(0, 200, 0.010));
  RunningFollower f({"follow", "--interval", "0.1", "--stall-min", "3600", log.string()});
  const auto first = f.next();
  EXPECT_EQ(first["event"], "verdict") << first;
  EXPECT_EQ(first["stalled"], false) << first;
  std::ofstream(log, std::ios::app) << paced_steps(200, 300, 0.013);
  const auto raised = next_pace(f);
  ASSERT_FALSE(raised.is_null());
  EXPECT_EQ(raised["warning"], true) << raised;
  EXPECT_EQ(raised["slowdown"], true) << raised;
  EXPECT_EQ(raised["slowdown_since_step"], 200) << raised;
  EXPECT_EQ(raised["slowdown_since"], "line 201") << raised;  // the lines have no timestamps
  EXPECT_EQ(raised["stragglers"], nlohmann::json::array());
  EXPECT_EQ(raised["line"].get<std::string>().rfind(
                "Pace (live): slowdown: step time 0.01 s -> 0.013 s since step 200", 0),
            0U)
      << raised;
  std::ofstream(log, std::ios::app) << paced_steps(300, 600, 0.010);
  const auto cleared = next_pace(f);
  ASSERT_FALSE(cleared.is_null());
  EXPECT_EQ(cleared["warning"], false) << cleared;
  EXPECT_EQ(cleared["line"], "") << cleared;
}

TEST_F(FollowCli, UsageAndInputErrors) {
  EXPECT_EQ(run_cli({"follow"}).exit_code, 2);
  EXPECT_EQ(run_cli({"follow", "--now", "5", "x.log"}).exit_code,
            2);  // a pinned clock needs --once
  EXPECT_EQ(run_cli({"follow", "--stall-min", "-3", "x.log"}).exit_code, 2);
  EXPECT_EQ(run_cli({"follow", "--once", (dir / "missing.log").string()}).exit_code, 3);
  const auto help = run_cli({"follow", "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--stall-factor"), std::string::npos);
}

}  // namespace
}  // namespace triage
