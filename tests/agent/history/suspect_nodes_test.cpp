// Suspect nodes: the statistic, the history records it reads, and the ranking on a recorded-looking
// cluster history (tests/agent/history_fixture.h).
#include "agent/history/suspect_nodes.h"

#include <gtest/gtest.h>

#include "tests/agent/history_fixture.h"

namespace triage::agent {
namespace {

using testing::generate_history;
using testing::HistorySpec;

std::vector<JobOutcome> parse_all(const std::vector<nlohmann::json>& records) {
  std::vector<JobOutcome> out;
  std::string why;
  for (const nlohmann::json& r : records) {
    auto j = parse_job_outcome(r, why);
    EXPECT_TRUE(j.has_value()) << why << ": " << r.dump();
    if (j) out.push_back(std::move(*j));
  }
  return out;
}

// A job on `nodes`; a failure with platform blame comes with its first node implicated by that
// node's own agent (trusted evidence: a kernel line there), the way a record of one reads.
JobOutcome job(uint64_t id, std::vector<std::string> nodes, const char* blame,
               const char* status = "failed") {
  JobOutcome j;
  j.job_id = id;
  j.end_time = static_cast<int64_t>(id);
  j.status = status;
  j.nodes = std::move(nodes);
  if (blame != nullptr) j.blame = blame;
  if (j.blame == "platform") j.implicated.push_back({j.nodes.front(), "Xid 79", true});
  return j;
}

// The same job with its evidence taken from the job's own log alone: nothing trusted.
JobOutcome log_only(JobOutcome j) {
  for (OutcomeImplication& i : j.implicated)
    i.trusted = false;
  return j;
}

std::string names(const SuspectRanking& r) {
  std::string out;
  for (const SuspectNode& s : r.suspects)
    out += s.node + ": " + s.reasons[0] + "\n";
  return out;
}

const SuspectNode* find_suspect(const SuspectRanking& r, const std::string& node) {
  for (const SuspectNode& s : r.suspects) {
    if (s.node == node) return &s;
  }
  return nullptr;
}

TEST(BinomialUpperTail, MatchesExactSums) {
  EXPECT_NEAR(binomial_upper_tail(20, 15, 0.5), 0.020694732666015625, 1e-15);
  EXPECT_NEAR(binomial_upper_tail(60, 9, 0.05), 0.0028486058021657025, 1e-15);
  EXPECT_EQ(binomial_upper_tail(10, 0, 0.3), 1.0);
  EXPECT_EQ(binomial_upper_tail(10, 11, 0.3), 0.0);
  EXPECT_EQ(binomial_upper_tail(10, 1, 0.0), 0.0);
  EXPECT_NEAR(binomial_upper_tail(10, 1, 0.3), 1 - std::pow(0.7, 10), 1e-15);
}

TEST(BinomialUpperTail, StaysAccurateFarIntoTheTail) {
  // Exact: 2.12603908795804134e-55 (rational arithmetic); a linear-space sum of the lower
  // tail would return 0 here.
  EXPECT_NEAR(binomial_upper_tail(2000, 250, 0.04) / 2.12603908795804134e-55, 1.0, 1e-9);
  const double far = binomial_upper_tail(10000, 2000, 0.04);
  EXPECT_GE(far, 0.0);
  EXPECT_LT(far, 1e-300);
  EXPECT_GT(binomial_upper_tail(10000, 300, 0.04), 0.9999999) << "far below the mean of 400";
}

TEST(JobOutcomeRecord, AWellFormedRecordReadsBack) {
  std::string why;
  const auto j = parse_job_outcome(nlohmann::json::parse(R"({"v": 1, "job_id": 1234,
      "user": "alice", "end_time": 1790000000, "status": "failed", "class": "nccl-timeout",
      "blame": "unknown", "nodes": ["gpu-a017", "gpu-a018", "gpu-a017"],
      "implicated": [{"node": "gpu-a017", "why": "ranks stopped first", "trusted": false}],
      "gpu_hours_lost": 12.5})"),
                                   why);
  ASSERT_TRUE(j) << why;
  EXPECT_EQ(j->job_id, 1234u);
  EXPECT_EQ(j->nodes, (std::vector<std::string>{"gpu-a017", "gpu-a018"}));
  ASSERT_EQ(j->implicated.size(), 1u);
  EXPECT_FALSE(j->implicated[0].trusted);
  EXPECT_EQ(j->cls, "nccl-timeout");
  EXPECT_FALSE(counts_against_nodes(*j)) << "unknown blame, untrusted evidence";
}

TEST(JobOutcomeRecord, BadRecordsAreRefusedWithTheReason) {
  const nlohmann::json good = {{"v", 1},
                               {"job_id", 7},
                               {"user", "bob"},
                               {"end_time", 1},
                               {"status", "failed"},
                               {"class", nullptr},
                               {"blame", nullptr},
                               {"nodes", {"n1", "n2"}},
                               {"implicated", nlohmann::json::array()},
                               {"gpu_hours_lost", nullptr}};
  std::string why;
  ASSERT_TRUE(parse_job_outcome(good, why)) << why;
  auto without = [&](const char* key) {
    nlohmann::json j = good;
    j.erase(key);
    return j;
  };
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = good;
    j[key] = std::move(v);
    return j;
  };
  const std::vector<std::pair<nlohmann::json, const char*>> cases = {
      {nlohmann::json::array(), "object"},
      {without("job_id"), "job_id"},
      {without("nodes"), "nodes"},
      {without("implicated"), "implicated"},
      {with("job_id", "7"), "job_id"},
      {with("job_id", -7), "job_id"},
      {with("end_time", 1.5), "end_time"},
      {with("nodes", "n1,n2"), "nodes"},
      {with("nodes", nlohmann::json::array()), "nodes"},
      {with("nodes", {"n1", 3}), "nodes[1]"},
      {with("implicated", {{{"node", "n1"}}}), "trusted"},
      {with("blame", "aliens"), "blame"},
      {with("v", 2), "version 2"},
      {with("gpu_hours_lost", "lots"), "gpu_hours_lost"},
  };
  for (const auto& [record, mention] : cases) {
    why.clear();
    EXPECT_FALSE(parse_job_outcome(record, why)) << record.dump();
    EXPECT_NE(why.find(mention), std::string::npos) << why;
  }
}

TEST(DistinctJobs, EachJobOnceWhateverTheNumberOfNodesThatRecordedIt) {
  std::vector<JobOutcome> recs = {job(3, {"a", "b"}, "unknown"), job(1, {"a", "b"}, nullptr),
                                  job(3, {"a", "b"}, "unknown"), job(2, {"c", "d"}, nullptr)};
  const auto d = distinct_jobs(recs);
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].job_id, 1u);
  EXPECT_EQ(d[2].job_id, 3u);
}

TEST(SizeBucket, GroupsJobsBySize) {
  EXPECT_EQ(size_bucket(2), 0u);
  EXPECT_EQ(size_bucket(3), 0u);
  EXPECT_EQ(size_bucket(4), 1u);
  EXPECT_EQ(size_bucket(15), 2u);
  EXPECT_EQ(size_bucket(16), 3u);
  EXPECT_EQ(size_bucket(512), 3u);
}

TEST(RankSuspects, TheLemonIsNamedAndTheBusyHealthyNodeIsNot) {
  const HistorySpec spec;
  const auto ranking = rank_suspects(distinct_jobs(parse_all(generate_history(spec))), {});
  EXPECT_EQ(ranking.jobs, 400u);
  EXPECT_EQ(ranking.nodes_tested, 40u);
  ASSERT_EQ(ranking.suspects.size(), 1u) << names(ranking);
  const SuspectNode& lemon = ranking.suspects[0];
  EXPECT_EQ(lemon.node, spec.lemon);
  EXPECT_LT(lemon.p_value, ranking.threshold);
  EXPECT_GE(lemon.failures, 3u);
  EXPECT_EQ(lemon.failed_jobs.size(), lemon.failures);
  EXPECT_GT(lemon.failed_jobs.front(), lemon.failed_jobs.back()) << "newest first";
  EXPECT_NE(lemon.reasons[0].find(std::to_string(lemon.failures) + " of its " +
                                  std::to_string(lemon.jobs) + " multi-node jobs failed"),
            std::string::npos)
      << lemon.reasons[0];
  EXPECT_NE(lemon.reasons[1].find(" of them were gpu-ecc-uncorrectable (uncorrectable ECC error "
                                  "(Xid 48) in its kernel log)"),
            std::string::npos)
      << lemon.reasons[1];
  EXPECT_EQ(find_suspect(ranking, spec.busy), nullptr);
  EXPECT_EQ(find_suspect(ranking, spec.careless), nullptr);
  EXPECT_NE(ranking.test.find("p < 0.01/40"), std::string::npos) << ranking.test;
}

TEST(RankSuspects, WithoutALemonNobodyIsNamed) {
  HistorySpec spec;
  spec.lemon_failure = 0;
  const auto ranking = rank_suspects(distinct_jobs(parse_all(generate_history(spec))), {});
  EXPECT_TRUE(ranking.suspects.empty()) << names(ranking);
}

TEST(RankSuspects, UserFailuresNeverCountAgainstANode) {
  std::vector<JobOutcome> jobs;
  uint64_t id = 1;
  // bad-user's node: every job dies, but of user code, config or input, or the scheduler.
  for (const char* blame : {"user-code", "user-config", "input-data", "scheduler"}) {
    for (int i = 0; i < 10; ++i)
      jobs.push_back(job(id++, {"gpu-x", "gpu-" + std::to_string(i)}, blame));
  }
  for (int i = 0; i < 200; ++i) {
    jobs.push_back(job(id++, {"gpu-" + std::to_string(i % 10), "gpu-" + std::to_string(10 + i % 7)},
                       i % 41 == 0 ? "platform" : nullptr, i % 41 == 0 ? "failed" : "completed"));
  }
  const auto ranking = rank_suspects(jobs, {});
  EXPECT_TRUE(ranking.suspects.empty());

  // The same node with platform failures its own kernel logged instead is named.
  for (JobOutcome& j : jobs) {
    if (j.nodes[0] != "gpu-x") continue;
    j.blame = "platform";
    j.implicated = {{"gpu-x", "Xid 79", true}};
  }
  const auto named = rank_suspects(jobs, {});
  ASSERT_EQ(named.suspects.size(), 1u);
  EXPECT_EQ(named.suspects[0].node, "gpu-x");
  EXPECT_EQ(named.suspects[0].failures, 40u);
}

// The jobs of a cluster where nothing is wrong: 2-node jobs on a0..a49 x b0..b48, rare platform
// failures with a kernel line on one node.
std::vector<JobOutcome> quiet_cluster() {
  std::vector<JobOutcome> jobs;
  for (uint64_t i = 1; i <= 2000; ++i) {
    jobs.push_back(job(i, {"a" + std::to_string(i % 50), "b" + std::to_string(i % 49)},
                       i % 97 == 0 ? "platform" : nullptr, i % 97 == 0 ? "failed" : "completed"));
  }
  return jobs;
}

TEST(RankSuspects, OneUsersFailingJobsWithUnknownBlameAllOnOneNodeNeverMakeItASuspect) {
  // One user's 20 two-node jobs, every one placed on gpu-x, every one failing with blame unknown:
  // a user who wants gpu-x out of the pool (or whose code hangs) writes such logs at will.
  std::vector<JobOutcome> jobs = quiet_cluster();
  for (uint64_t i = 0; i < 20; ++i) {
    JobOutcome j = job(10000 + i, {"gpu-x", "a" + std::to_string(i)}, "unknown");
    j.user = "mallory";
    jobs.push_back(j);
  }
  EXPECT_TRUE(rank_suspects(jobs, {}).suspects.empty()) << names(rank_suspects(jobs, {}));
  JobOutcome only = jobs.back();
  only.implicated.push_back({"gpu-x", "its ranks stopped first in the log", false});
  EXPECT_FALSE(counts_against_node(only, "gpu-x"));

  // Platform blame the job's log claimed ("NVRM: Xid 79" printed by the job itself) with nothing
  // from gpu-x's agent behind it counts no more.
  for (JobOutcome& j : jobs) {
    if (j.user == "mallory") {
      j.blame = "platform";
      j.implicated = {{"gpu-x", "Xid 79 in the job's log", false}};
    }
  }
  EXPECT_TRUE(rank_suspects(jobs, {}).suspects.empty()) << names(rank_suspects(jobs, {}));

  // The same failures with gpu-x's own kernel behind them make it the suspect.
  for (JobOutcome& j : jobs) {
    if (j.user == "mallory") j.implicated = {{"gpu-x", "Xid 79 in its kernel log", true}};
  }
  const auto named = rank_suspects(jobs, {});
  ASSERT_EQ(named.suspects.size(), 1u) << names(named);
  EXPECT_EQ(named.suspects[0].node, "gpu-x");
  EXPECT_EQ(named.suspects[0].failures, 20u);
  EXPECT_NE(named.suspects[0].reasons[1].find("(Xid 79 in its kernel log)"), std::string::npos)
      << named.suspects[0].reasons[1];
}

TEST(RankSuspects, APlatformFailureCountsOnlyAgainstTheNodeItsEvidencePinnedItOn) {
  std::vector<JobOutcome> jobs = quiet_cluster();
  // gpu-y shares 20 failed jobs with gpu-z, whose own kernel logged the fault every time.
  for (uint64_t i = 0; i < 20; ++i)
    jobs.push_back(job(20000 + i, {"gpu-z", "gpu-y"}, "platform"));
  const auto r = rank_suspects(jobs, {});
  ASSERT_EQ(r.suspects.size(), 1u) << names(r);
  EXPECT_EQ(r.suspects[0].node, "gpu-z");
  EXPECT_FALSE(counts_against_node(jobs.back(), "gpu-y"));
  EXPECT_TRUE(counts_against_node(jobs.back(), "gpu-z"));
  EXPECT_FALSE(counts_against_node(log_only(jobs.back()), "gpu-z"));
}

TEST(RankSuspects, TooFewFailuresAreNotEnoughWhateverTheirOdds) {
  std::vector<JobOutcome> jobs;
  for (uint64_t i = 1; i <= 2000; ++i)
    jobs.push_back(
        job(i, {"a" + std::to_string(i % 50), "b" + std::to_string(i % 49)}, nullptr, "completed"));
  jobs.push_back(job(5000, {"lonely", "a1"}, "platform"));
  jobs.push_back(job(5001, {"lonely", "a2"}, "platform"));
  EXPECT_TRUE(rank_suspects(jobs, {}).suspects.empty()) << "2 failures, min 3";
  jobs.push_back(job(5002, {"lonely", "a3"}, "unknown"));
  EXPECT_TRUE(rank_suspects(jobs, {}).suspects.empty()) << "an unknown blame is no third";
  jobs.push_back(job(5003, {"lonely", "a3"}, "platform"));
  const auto r = rank_suspects(jobs, {});
  ASSERT_EQ(r.suspects.size(), 1u);
  EXPECT_EQ(r.suspects[0].node, "lonely");
  EXPECT_EQ(r.suspects[0].failed_jobs, (std::vector<uint64_t>{5003, 5001, 5000}));
}

TEST(RankSuspects, SingleNodeJobsAndCompletedJobsDoNotCount) {
  std::vector<JobOutcome> jobs;
  for (uint64_t i = 1; i <= 20; ++i)
    jobs.push_back(job(i, {"solo"}, "platform"));
  jobs.push_back(job(21, {"solo", "other"}, "unknown", "completed"));
  const auto r = rank_suspects(jobs, {});
  EXPECT_EQ(r.multi_node_jobs, 1u);
  EXPECT_TRUE(r.suspects.empty());
}

TEST(SuspectDrain, TheRecommendationNamesTheJobsWhenThePolicyAllowsIt) {
  SuspectNode s;
  s.node = "gpu-a017";
  s.failed_jobs = {1240, 1234};
  EXPECT_EQ(suspect_drain_recommendation(s, "recommend"), "drain recommended: jobs 1240, 1234");
  EXPECT_EQ(suspect_drain_recommendation(s, "auto"), "drain recommended: jobs 1240, 1234");
  EXPECT_FALSE(suspect_drain_recommendation(s, "off"));
  s.failed_jobs.clear();
  for (uint64_t id = 100; id > 75; --id)
    s.failed_jobs.push_back(id);
  const auto many = suspect_drain_recommendation(s, "recommend");
  ASSERT_TRUE(many);
  EXPECT_NE(many->find(", 81 (+5 more)"), std::string::npos) << *many;
}

}  // namespace
}  // namespace triage::agent
