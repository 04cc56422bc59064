// Faults around the job-end analysis: the analyzer never ends or is killed, a peer agent accepts
// the evidence request and then says nothing, and the real `slurm-triage analyze` reports a job
// that failed (its exit 1). Each case must leave a truthful summary and metric, and the next job's
// analysis must run as usual.
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "common/text.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::hardening {
namespace {

using agent::testing::AgentHarness;
using agent::testing::eventually;
using agent::testing::field;
using agent::testing::kNobody;
using agent::testing::kNogroup;
using agent::testing::lifecycle;
using agent::testing::metric_value;
using agent::testing::MungeDaemon;
using agent::testing::read_file;
using agent::testing::socket_json;
using agent::testing::TempDir;
using agent::testing::write_file;

std::vector<nlohmann::json> summaries(const std::string& spool, uint64_t job) {
  return agent::testing::analysis_summaries(spool, job);
}

// A TCP port on loopback that completes connections (the kernel's backlog) and never reads or
// answers: a peer agent wedged in a hung filesystem call.
class SilentPeer {
 public:
  SilentPeer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 16) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
  }
  ~SilentPeer() {
    if (fd_ >= 0) ::close(fd_);
  }
  SilentPeer(const SilentPeer&) = delete;
  SilentPeer& operator=(const SilentPeer&) = delete;
  int port() const { return port_; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

// One node, node-a, that runs the batch step of every job; jobs are owned by nobody and write
// into a work dir nobody can write.
class AnalysisFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    work = scratch / "run";
    agent::testing::make_dirs(work, 0777);
    agent::testing::make_dirs(work + "/outputs", 0777);
  }

  // What the plugin sends for a job whose batch step ran on node-a and exited with `exit_code`.
  void run_job(uint64_t job, const std::string& nodes, const std::string& name, int exit_code) {
    const std::string tag = std::to_string(job);
    const int64_t t0 = now_usec();
    ASSERT_EQ(socket_json(a.socket(), lifecycle("job_start", job, "js" + tag,
                                                {{"uid", kNobody},
                                                 {"gid", kNogroup},
                                                 {"nodelist", nodes},
                                                 {"mode", "basic"},
                                                 {"time_usec", t0}}))["ok"],
              true);
    ASSERT_EQ(
        socket_json(
            a.socket(),
            lifecycle(
                "task_start", job, "ts" + tag,
                {{"step", "batch"}, {"task", 0}, {"pid", 3000 + job}, {"time_usec", t0}}))["ok"],
        true);
    ASSERT_EQ(socket_json(a.socket(), lifecycle("job_end", job, "je" + tag,
                                                {{"uid", kNobody},
                                                 {"gid", kNogroup},
                                                 {"nodelist", nodes},
                                                 {"mode", "basic"},
                                                 {"wait_status", exit_code << 8},
                                                 {"work_dir", work},
                                                 {"stdout_pattern", "outputs/%j-%x.log"},
                                                 {"job_name", name}}))["ok"],
              true);
  }

  std::vector<nlohmann::json> summary_of(uint64_t job, int ms = 20000) {
    std::vector<nlohmann::json> sums;
    EXPECT_TRUE(
        eventually([&] { return !(sums = summaries(a.dir() + "/spool", job)).empty(); }, ms))
        << "no summary for job " << job;
    return sums;
  }

  double analyses(const std::string& result) {
    return metric_value(a.agent().metrics(),
                        R"(triage_analyses_total{host="node-a",result=")" + result + "\"}")
        .value_or(0);
  }

  TempDir scratch{"analysis-faults"};
  std::string work;
  AgentHarness a{"node-a", "node-a"};
};

TEST_F(AnalysisFaults, AnAnalyzerThatHangsOrIsKilledIsRecordedAndTheNextJobIsAnalysed) {
  a.config.analysis_timeout_sec = 1;
  a.config.analysis_concurrency = 1;
  a.start();
  run_job(501, "node-a", "hang", 0);
  run_job(502, "node-a", "selfkill", 0);
  run_job(503, "node-a", "fine", 0);

  const auto hung = summary_of(501);
  ASSERT_EQ(hung.size(), 1u);
  EXPECT_EQ(field(hung[0], "result"), "timeout");
  EXPECT_EQ(field(hung[0], "exit"), "signal SIGKILL") << "the agent killed it at AnalysisTimeout";
  const auto killed = summary_of(502);
  ASSERT_EQ(killed.size(), 1u);
  EXPECT_EQ(field(killed[0], "result"), "failed");
  EXPECT_EQ(field(killed[0], "exit"), "signal SIGKILL");
  EXPECT_NE(killed[0].value("error", "").find("killing itself"), std::string::npos)
      << killed[0].dump();
  const auto fine = summary_of(503);
  ASSERT_EQ(fine.size(), 1u);
  EXPECT_EQ(field(fine[0], "result"), "ok") << "the queue moved on";

  EXPECT_EQ(analyses("timeout"), 1);
  EXPECT_EQ(analyses("failed"), 1);
  EXPECT_EQ(analyses("ok"), 1);
  EXPECT_EQ(metric_value(a.agent().metrics(), R"(triage_analyses_running{host="node-a"})"), 0);
  const nlohmann::json health = socket_json(a.socket(), {{"op", "ping"}});
  EXPECT_EQ(health["ok"], true);
}

TEST_F(AnalysisFaults, APeerThatAcceptsButNeverAnswersCostsOnlyThePeerTimeout) {
  TempDir munge_dir{"munge"};
  MungeDaemon munge{munge_dir.path()};
  ASSERT_TRUE(munge.ok()) << "munged did not start";
  SilentPeer silent;
  ASSERT_GT(silent.port(), 0);
  a.config.munge_socket = munge.socket();
  a.config.peer_fetch_timeout_ms = 1500;
  a.options.peer_url = [&](const std::string&) {
    return "http://127.0.0.1:" + std::to_string(silent.port());
  };
  a.start();
  const auto t0 = std::chrono::steady_clock::now();
  run_job(601, "node-a,node-s", "wedged-peer", 0);
  const auto sums = summary_of(601);
  const auto waited = std::chrono::steady_clock::now() - t0;
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(field(sums[0], "result"), "ok") << sums[0].dump();
  EXPECT_EQ(field(sums[0], "unreachable_nodes"), nlohmann::json::array({"node-s"}));
  // The fetch gives up at PeerFetchTimeout (plus curl's bookkeeping); generous slack for ASan.
  EXPECT_LT(waited, std::chrono::milliseconds(1500) + std::chrono::seconds(8));
  EXPECT_EQ(metric_value(a.agent().metrics(), R"(triage_peer_fetch_failures_total{host="node-a"})"),
            1);
  // The analyzer was told which node is missing and why.
  bool named = false;
  for (const auto& entry : std::filesystem::directory_iterator(work)) {
    if (entry.path().filename().string().rfind("analyzer-601-", 0) != 0) continue;
    const auto rec = nlohmann::json::parse(read_file(entry.path().string()), nullptr, false);
    for (const auto& node : field(field(rec, "evidence"), "nodes")) {
      if (node.value("host", "") != "node-s") continue;
      named = true;
      EXPECT_EQ(node.value("reachable", true), false);
      EXPECT_NE(node.value("error", "").find("timed out"), std::string::npos) << node.dump();
    }
  }
  EXPECT_TRUE(named) << "node-s appears in the evidence as unreachable";
}

// The real analyzer: a job that died with exit 9 is a failed job, which `slurm-triage analyze`
// reports with its exit 1. That is a successful analysis, not a failed one.
TEST_F(AnalysisFaults, AFailedJobReportedByTheRealAnalyzerIsASuccessfulAnalysis) {
  a.config.analyzer_path = agent::testing::analyzer_cli_in(a.dir());
  a.start();
  write_file(work + "/outputs/701-train.log",
             "step 10 loss 2.31\nTraceback (most recent call last):\n  File \"train.py\", line 9\n"
             "RuntimeError: CUDA error: an illegal memory access was encountered\n",
             0644);
  // The report goes beside the log; the owner (nobody) must be able to create it there.
  ASSERT_EQ(::chmod((work + "/outputs").c_str(), 0777), 0);
  run_job(701, "node-a", "train", 9);
  const auto sums = summary_of(701, 60000);
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(field(sums[0], "exit"), "exit 1") << sums[0].dump();
  EXPECT_EQ(field(sums[0], "result"), "ok") << sums[0].dump();
  EXPECT_EQ(field(sums[0], "status"), "failed")
      << "the job's status comes from the analyzer's answer";
  EXPECT_FALSE(sums[0].contains("error"));
  EXPECT_EQ(analyses("ok"), 1);
  EXPECT_EQ(analyses("failed"), 0);
}

}  // namespace
}  // namespace triage::hardening
