// Cutting a GET /v1/history answer into records, reading only each record's job_id.
#include "agent/history/history_split.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace triage::agent {
namespace {

TEST(HistorySplit, EachRecordWithItsJobIdAsSentCompactOrPretty) {
  const nlohmann::json answer = {
      {"host", "gpu-a001"},
      {"kept", 3},
      {"window", {{"days", 30}, {"max_jobs", 10000}}},
      {"records",
       {{{"v", 1}, {"job_id", 42}, {"user", "a{b}\"c[\\"}, {"nodes", {"n1", "n2"}}},
        {{"implicated", {{{"job_id", 7}, {"node", "n1"}}}}, {"job_id", 43}},
        {{"job_id", "44"}},
        {{"job_id", 45.5}},
        17}}};
  for (const int indent : {-1, 2}) {
    const std::string body = answer.dump(indent);
    const auto split = split_history_answer(body);
    ASSERT_TRUE(split) << body;
    EXPECT_EQ(split->host, "gpu-a001");
    ASSERT_EQ(split->records.size(), 5u);
    EXPECT_EQ(split->records[0].job_id, 42u);
    EXPECT_EQ(nlohmann::json::parse(split->records[0].text), answer["records"][0]);
    EXPECT_EQ(split->records[1].job_id, 43u) << "not the implicated object's";
    EXPECT_FALSE(split->records[2].job_id) << "a string is not a job id";
    EXPECT_FALSE(split->records[3].job_id);
    EXPECT_EQ(split->records[4].text, "17");
  }
}

TEST(HistorySplit, AnEmptyHistoryHasNoRecords) {
  const auto split = split_history_answer(R"({"host": "n1", "records": [], "kept": 0})");
  ASSERT_TRUE(split);
  EXPECT_TRUE(split->records.empty());
}

TEST(HistorySplit, WhatIsNotAHistoryIsRefused) {
  for (const char* body :
       {"", "[]", "{}", R"({"host": "n1"})", R"({"records": {}})", R"({"records": [{"job_id": 1})",
        R"({"records": [{"job_id": 1}]} trailing)", R"({"records": [{"user": "unterminated]})",
        R"({"records": [{"job_id": 1}}]})", R"({"records": [1,]})"}) {
    EXPECT_FALSE(split_history_answer(body)) << body;
  }
}

}  // namespace
}  // namespace triage::agent
