// The node's outcome history: the record built from a real triage.json, the window's bounds, a
// restart, files it cannot read set aside and reported, its memory for a full window, and the
// munge-authenticated /v1/history endpoint.
#include <gtest/gtest.h>

#include <filesystem>

#include "agent/history/outcome_history.h"
#include "agent/history/outcome_record.h"
#include "agent/net/peer_client.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::http_get_munged;
using testing::MungeDaemon;
using testing::read_file;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;

constexpr int64_t kDay = 86400;
constexpr int64_t kNow = 1'800'000'000;

OutcomeRecord outcome(uint64_t job, int64_t end_time, std::string nodes = "gpu-a[001-008]") {
  OutcomeRecord r;
  r.job_id = job;
  r.user = "alice";
  r.end_time = end_time;
  r.status = "failed";
  r.cls = "nccl-timeout";
  r.blame = "platform";
  r.nodelist = std::move(nodes);
  r.implicated = {{"gpu-a003", "GPU ring timeouts in the window: 3 (drain)", true}};
  r.gpu_hours_lost = 12.5;
  return r;
}

JobFacts job_on(uint64_t id, std::vector<std::string> nodes, int64_t end_time) {
  JobFacts f;
  f.job_id = id;
  f.user = "alice";
  f.nodes = std::move(nodes);
  f.end_time = end_time;
  return f;
}

std::vector<uint64_t> job_ids(const OutcomeHistory& h) {
  std::vector<uint64_t> ids;
  for (const OutcomeRecord& r : h.records())
    ids.push_back(r.job_id);
  return ids;
}

TEST(OutcomeRecordBuild, FromTheHardwareFaultFixturesTriageJson) {
  const nlohmann::json triage = nlohmann::json::parse(read_file(
      std::string(SOURCE_DIR) + "/tests/analyzer/fixtures/evidence-hardware-fault/expected.json"));
  const OutcomeRecord r = build_outcome_record(
      triage, job_on(9141, {"gpu-a017", "gpu-a018", "gpu-a019", "gpu-a020"}, kNow), 32, 0);
  EXPECT_EQ(r.job_id, 9141u);
  EXPECT_EQ(r.user, "alice");
  EXPECT_EQ(r.end_time, kNow);
  EXPECT_EQ(r.status, "failed");
  EXPECT_EQ(r.cls, "hardware-fault");
  EXPECT_EQ(r.blame, "platform");
  EXPECT_EQ(r.nodelist, "gpu-a[017-020]");
  ASSERT_EQ(r.implicated.size(), 1u) << "only gpu-a019's agent saw the fault";
  EXPECT_EQ(r.implicated[0].node, "gpu-a019");
  EXPECT_TRUE(r.implicated[0].trusted);
  EXPECT_EQ(r.implicated[0].why, "uncorrectable ECC error on GPU 0000:c1:00.0 (drain)");
  ASSERT_TRUE(r.gpu_hours_lost.has_value());
  EXPECT_NEAR(*r.gpu_hours_lost, 873.0 * 32 / 3600, 1e-9) << "873 s since the checkpoint, 32 GPUs";

  const nlohmann::json served = outcome_to_json(r);
  EXPECT_EQ(served["v"], 1);
  EXPECT_EQ(served["nodes"],
            nlohmann::json::array({"gpu-a017", "gpu-a018", "gpu-a019", "gpu-a020"}));
  EXPECT_EQ(served["class"], "hardware-fault");
  EXPECT_EQ(served["implicated"][0],
            (nlohmann::json{{"node", "gpu-a019"},
                            {"why", "uncorrectable ECC error on GPU 0000:c1:00.0 (drain)"},
                            {"trusted", true}}));
  EXPECT_EQ(outcome_to_json(outcome_from_json(outcome_to_compact_json(r))), served)
      << "the stored form reads back to the same record";
}

TEST(OutcomeRecordBuild, WithoutAnAllocationOrAFailureTheUnknownsStayNull) {
  const nlohmann::json completed = {{"status", "completed"},
                                    {"primary_failure", nullptr},
                                    {"blame", nullptr},
                                    {"progress", {{"progress_lost_seconds", 0.0}}},
                                    {"nodes", nlohmann::json::array()}};
  const OutcomeRecord r = build_outcome_record(completed, job_on(7, {"n1"}, 0), std::nullopt, kNow);
  EXPECT_EQ(r.end_time, kNow) << "no end time in the facts: now";
  EXPECT_FALSE(r.cls);
  EXPECT_FALSE(r.blame);
  EXPECT_FALSE(r.gpu_hours_lost) << "no GPU count known";
  EXPECT_TRUE(r.implicated.empty());
  const nlohmann::json served = outcome_to_json(r);
  EXPECT_TRUE(served["class"].is_null());
  EXPECT_TRUE(served["gpu_hours_lost"].is_null());
  EXPECT_EQ(build_outcome_record("not an object", job_on(7, {"n1"}, 5), 8, kNow).status, "unknown");
}

TEST(OutcomeRecordBuild, ALogOnlyDegradedNodeIsImplicatedUntrusted) {
  const nlohmann::json triage = {
      {"status", "failed"},
      {"primary_failure", "nccl-timeout"},
      {"blame", "unknown"},
      {"nodes",
       {{{"host", "n2"}, {"verdict", "degraded"}, {"verdict_reasons", {"a", "b"}}},
        {{"host", "n3"}, {"verdict", "ok"}, {"from_agent", true}}}},
      {"findings",
       {{{"class", "nccl-timeout"}, {"host", "n4"}, {"trusted", true}, {"text", "watchdog"}},
        {{"class", "other"}, {"host", "n5"}, {"trusted", true}, {"text", "x"}}}}};
  const OutcomeRecord r = build_outcome_record(triage, job_on(8, {"n1", "n2"}, 1), 4, kNow);
  ASSERT_EQ(r.implicated.size(), 2u);
  EXPECT_EQ(r.implicated[0].node, "n2");
  EXPECT_EQ(r.implicated[0].why, "a; b");
  EXPECT_FALSE(r.implicated[0].trusted);
  EXPECT_EQ(r.implicated[1].node, "n4") << "a trusted finding of the primary class";
  EXPECT_EQ(r.implicated[1].why, "nccl-timeout: watchdog");
  EXPECT_TRUE(r.implicated[1].trusted);
}

TEST(OutcomeRecordBuild, TheGpuCountComesFromSlurmsAllocatedTres) {
  EXPECT_EQ(gpus_from_tres("cpu=64,mem=512G,node=2,billing=64,gres/gpu=16"), 16);
  EXPECT_EQ(gpus_from_tres("cpu=8,gres/gpu:a100=4,gres/gpu=4"), 4);
  EXPECT_EQ(gpus_from_tres("cpu=8,mem=16G,node=1"), std::nullopt);
  EXPECT_EQ(gpus_from_tres(""), std::nullopt);
}

TEST(OutcomeRecordRead, RecordsOfAnotherVersionOrShapeAreRefused) {
  nlohmann::json j = outcome_to_json(outcome(1, kNow));
  EXPECT_NO_THROW(outcome_from_json(j));
  j["v"] = 2;
  EXPECT_THROW(outcome_from_json(j), std::invalid_argument);
  j["v"] = 1;
  j.erase("job_id");
  EXPECT_THROW(outcome_from_json(j), std::invalid_argument);
  EXPECT_THROW(outcome_from_json(nlohmann::json::array()), std::invalid_argument);
}

TEST(HistoryWindowDecision, TheOldestGoesWhenTooOldOrOneTooMany) {
  const HistoryWindow w{30, 3};
  EXPECT_FALSE(history_drops_oldest(kNow - 29 * kDay, 3, kNow, w));
  EXPECT_TRUE(history_drops_oldest(kNow - 31 * kDay, 1, kNow, w)) << "too old";
  EXPECT_TRUE(history_drops_oldest(kNow, 4, kNow, w)) << "one too many";
  EXPECT_FALSE(history_drops_oldest(0, 0, kNow, w)) << "nothing to drop";
}

TEST(HistoryWindowDecision, TheFileIsRewrittenOnlyOnceManyLinesAreDead) {
  EXPECT_FALSE(history_needs_rewrite(10, 10));
  EXPECT_FALSE(history_needs_rewrite(70, 10)) << "a small file is left alone";
  EXPECT_TRUE(history_needs_rewrite(75, 10));
  EXPECT_FALSE(history_needs_rewrite(12'000, 10'000));
  EXPECT_TRUE(history_needs_rewrite(12'501, 10'000));
}

class History : public ::testing::Test {
 protected:
  OutcomeHistory make(HistoryWindow w = {}) { return OutcomeHistory({dir.path() + "/history", w}); }
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir.path() + "/history"))
      names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  TempDir dir{"history"};
};

TEST_F(History, BoundedByCountTheOldestGo) {
  OutcomeHistory h = make({30, 5});
  h.open(kNow);
  for (uint64_t job = 1; job <= 8; ++job)
    ASSERT_TRUE(h.add(outcome(job, kNow - 100 + static_cast<int64_t>(job)), kNow));
  EXPECT_EQ(job_ids(h), (std::vector<uint64_t>{4, 5, 6, 7, 8}));
  EXPECT_EQ(h.counts().dropped, 3u);
}

TEST_F(History, BoundedByDaysOldOutcomesLeaveAtMaintenance) {
  OutcomeHistory h = make({30, 10000});
  h.open(kNow);
  ASSERT_TRUE(h.add(outcome(1, kNow - 29 * kDay), kNow));
  ASSERT_TRUE(h.add(outcome(2, kNow - kDay), kNow));
  EXPECT_EQ(h.records().size(), 2u);
  h.maintain(kNow + 2 * kDay);
  EXPECT_EQ(job_ids(h), (std::vector<uint64_t>{2}));
  EXPECT_TRUE(h.add(outcome(3, kNow - 40 * kDay), kNow));
  EXPECT_EQ(job_ids(h), (std::vector<uint64_t>{2})) << "a record already outside the window";
}

TEST_F(History, ARestartFindsEveryOutcomeAndAReplacedOneOnce) {
  {
    OutcomeHistory h = make();
    h.open(kNow);
    ASSERT_TRUE(h.add(outcome(2, kNow - 10), kNow));
    ASSERT_TRUE(h.add(outcome(1, kNow - 20), kNow));
    OutcomeRecord again = outcome(2, kNow - 10);
    again.blame = "user-code";
    ASSERT_TRUE(h.add(again, kNow));
  }
  OutcomeHistory h = make();
  h.open(kNow);
  EXPECT_EQ(job_ids(h), (std::vector<uint64_t>{1, 2})) << "ordered by end time";
  EXPECT_EQ(h.records()[1].blame, "user-code");
  EXPECT_EQ(h.counts().set_aside, 0u);
  EXPECT_EQ(files(), (std::vector<std::string>{"outcomes.jsonl"}));
}

TEST_F(History, ACorruptFileIsSetAsideAndReportedItsGoodRecordsKept) {
  {
    OutcomeHistory h = make();
    h.open(kNow);
    ASSERT_TRUE(h.add(outcome(1, kNow - 20), kNow));
    ASSERT_TRUE(h.add(outcome(2, kNow - 10), kNow));
  }
  const std::string file = dir.path() + "/history/outcomes.jsonl";
  write_file(file, read_file(file) + "\x01garbage{\n{\"v\":1,\"job_id\":\"x\"}\n{\"v\":1,\"jo",
             0600);

  OutcomeHistory h = make();
  h.open(kNow);
  EXPECT_EQ(job_ids(h), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(h.counts().set_aside, 1u);
  EXPECT_EQ(h.counts().unreadable, 2u);
  EXPECT_EQ(h.counts().torn, 1u);
  const std::vector<std::string> names = files();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0], "outcomes.jsonl");
  EXPECT_EQ(names[1].rfind("outcomes.jsonl.set-aside-", 0), 0u) << names[1];
  EXPECT_NE(read_file(dir.path() + "/history/" + names[1]).find("garbage"), std::string::npos)
      << "the original is kept beside, whole";

  const nlohmann::json answer = nlohmann::json::parse(h.answer("gpu-a001", 0));
  EXPECT_EQ(answer["set_aside"], 1);
  EXPECT_EQ(answer["unreadable"], 2);
  ASSERT_EQ(answer["set_aside_files"].size(), 1u);
  EXPECT_NE(answer["set_aside_files"][0].get<std::string>().find("\"job_id\" has the wrong type"),
            std::string::npos);

  OutcomeHistory again = make();
  again.open(kNow);
  EXPECT_EQ(again.counts().set_aside, 0u) << "the rewritten file reads cleanly";
  EXPECT_EQ(job_ids(again), (std::vector<uint64_t>{1, 2}));
}

TEST_F(History, AFileOfAnotherVersionIsSetAsideNotRead) {
  testing::make_dirs(dir.path() + "/history", 0700);
  write_file(dir.path() + "/history/outcomes.jsonl",
             "{\"r\":\"outcome-history\",\"v\":2}\n{\"v\":2,\"job_id\":5,\"whatever\":true}\n",
             0600);
  OutcomeHistory h = make();
  h.open(kNow);
  EXPECT_TRUE(h.records().empty());
  EXPECT_EQ(h.counts().set_aside, 1u);
  EXPECT_EQ(h.counts().unreadable, 2u);
  EXPECT_NE(h.counts().set_aside_files[0].find("version 2"), std::string::npos);
  ASSERT_TRUE(h.add(outcome(9, kNow), kNow)) << "and the history goes on";
  EXPECT_EQ(files().size(), 2u);
}

TEST_F(History, TheAnswerFiltersBySinceAndStatesTheWindow) {
  OutcomeHistory h = make({7, 100});
  h.open(kNow);
  ASSERT_TRUE(h.add(outcome(1, kNow - 300), kNow));
  ASSERT_TRUE(h.add(outcome(2, kNow - 100), kNow));
  const nlohmann::json all = nlohmann::json::parse(h.answer("gpu-a001", 0));
  EXPECT_EQ(all["host"], "gpu-a001");
  EXPECT_EQ(all["records"].size(), 2u);
  EXPECT_EQ(all["kept"], 2);
  EXPECT_EQ(all["dropped"], 0);
  EXPECT_EQ(all["window"], (nlohmann::json{{"days", 7}, {"max_jobs", 100}}));
  const nlohmann::json recent = nlohmann::json::parse(h.answer("gpu-a001", kNow - 200));
  ASSERT_EQ(recent["records"].size(), 1u);
  EXPECT_EQ(recent["records"][0]["job_id"], 2);
  EXPECT_EQ(recent["kept"], 2) << "kept counts the whole history";
}

// Measured: 10,000 realistic records (a failed 8-node job, nodes as a hostlist, one implicated
// node with a verdict reason, a class, a blame and GPU-hours) read back from the spool, in memory
// and as served. (Written as one file: 10,000 fdatasynced appends take a minute under ASan.)
TEST_F(History, AFullWindowOfTenThousandJobsStaysUnderEightMebibytes) {
  std::string file = "{\"r\":\"outcome-history\",\"v\":1}\n";
  for (uint64_t job = 1; job <= 10000; ++job) {
    OutcomeRecord r = outcome(
        1'000'000 + job, kNow - 10000 + static_cast<int64_t>(job),
        "gpu-a[" + std::to_string(100 + job % 800) + "-" + std::to_string(107 + job % 800) + "]");
    r.user = "user" + std::to_string(job % 97);
    file += outcome_to_compact_json(r).dump() + "\n";
  }
  testing::make_dirs(dir.path() + "/history", 0700);
  write_file(dir.path() + "/history/outcomes.jsonl", file, 0600);
  OutcomeHistory h = make({30, 10000});
  h.open(kNow);
  ASSERT_EQ(h.records().size(), 10000u);
  ASSERT_TRUE(h.add(outcome(1, kNow), kNow));
  EXPECT_EQ(h.records().size(), 10000u) << "one in, the oldest out";
  const size_t memory = h.memory_bytes();
  const size_t served = h.answer("gpu-a001", 0).size();
  std::printf("history of 10000 jobs: %zu bytes in memory, %zu served, %zu on disk\n", memory,
              served, file.size());
  EXPECT_LT(memory, size_t{8} << 20);
  EXPECT_LT(file.size(), size_t{8} << 20);
}

class HistoryEndpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(munge.ok()) << "munged did not start";
    h.config.munge_socket = munge.socket();
    h.start();
  }
  PeerResponse post(const std::string& carried, int port) const {
    PeerFetchOptions o;
    o.munge_socket = munge.socket();
    o.timeout_ms = 5000;
    return fetch_from_peers(
        {{"peer", "http://127.0.0.1:" + std::to_string(port), "/v1/history", carried}}, o)[0];
  }
  TempDir munge_dir{"munge"};
  MungeDaemon munge{munge_dir.path()};
  AgentHarness h{"history-http", "gpu-a001"};
};

TEST_F(HistoryEndpoint, APeersRecordIsKeptAndServedToAMungeAuthenticatedCaller) {
  const std::string record = outcome_to_compact_json(outcome(4242, kNow)).dump();
  const PeerResponse pushed = post(record, h.port());
  ASSERT_TRUE(pushed.ok) << pushed.error;
  EXPECT_EQ(nlohmann::json::parse(pushed.body)["recorded"], 4242);

  EXPECT_EQ(testing::http_get(h.port(), "/v1/history").status, 401);
  const auto got = http_get_munged(h.port(), "/v1/history?since=0", munge.socket());
  ASSERT_EQ(got.status, 200) << got.body;
  const nlohmann::json answer = nlohmann::json::parse(got.body);
  EXPECT_EQ(answer["host"], "gpu-a001");
  ASSERT_EQ(answer["records"].size(), 1u);
  EXPECT_EQ(answer["records"][0], outcome_to_json(outcome(4242, kNow)));
  const auto later =
      http_get_munged(h.port(), "/v1/history?since=" + std::to_string(kNow + 1), munge.socket());
  EXPECT_EQ(nlohmann::json::parse(later.body)["records"].size(), 0u);

  // It survives the agent's restart.
  h.stop();
  h.start();
  const auto after = http_get_munged(h.port(), "/v1/history", munge.socket());
  EXPECT_EQ(nlohmann::json::parse(after.body)["records"].size(), 1u);
}

TEST_F(HistoryEndpoint, WhatIsNotARecordIsRefusedAndADownPeerIsAnError) {
  const PeerResponse bad = post("{\"v\":1,\"job_id\":1}", h.port());
  EXPECT_FALSE(bad.ok);
  EXPECT_EQ(bad.status, 400) << bad.error;
  const PeerResponse old = post("{\"v\":0}", h.port());
  EXPECT_EQ(old.status, 400) << old.error;

  const PeerResponse down = post(outcome_to_compact_json(outcome(1, kNow)).dump(), 1);
  EXPECT_FALSE(down.ok);
  EXPECT_FALSE(down.error.empty());
  const auto got = http_get_munged(h.port(), "/v1/history", munge.socket());
  EXPECT_EQ(nlohmann::json::parse(got.body)["kept"], 0);
}

}  // namespace
}  // namespace triage::agent
