// A recorded-looking job outcome history (GET /v1/history records, version 1), generated from a
// fixed seed so that every run sees the same cluster: nodes gpu-a001..., jobs of 1-16 nodes, a base
// platform/unknown failure rate (platform ones with a kernel line on one of the job's nodes) that
// grows with the job's size (about 4% on average), user-code, scheduler and completed jobs, one
// lemon node whose jobs fail far more often (uncorrectable ECC errors its own kernel log shows:
// trusted platform evidence on it), one busy healthy node that runs three times as many jobs, and
// one node whose jobs often die of user code. Shared by the tests and bench/suspects.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace triage::agent::testing {

struct HistorySpec {
  size_t nodes = 40;
  size_t jobs = 400;
  uint32_t seed = 14;
  size_t max_size = 16;
  std::string lemon = "gpu-a017";
  double lemon_failure = 0.3;  // extra failure chance of a job with the lemon in it
  std::string busy = "gpu-a002";
  double busy_weight = 3;             // how much likelier the busy node is to be picked
  std::string careless = "gpu-a029";  // its jobs die of user code half the time
  uint64_t first_job_id = 1000;
  int64_t first_end_time = 1790000000;
};

std::string fixture_node_name(size_t index);  // gpu-a001 for 0

// The jobs in the order they ended.
std::vector<nlohmann::json> generate_history(const HistorySpec& spec);

// Each node's history as its agent would keep it: the records of the jobs it ran on, the newest
// `max_jobs` of them.
std::map<std::string, std::vector<nlohmann::json>> histories_by_node(
    const std::vector<nlohmann::json>& records, size_t max_jobs);

// A GET /v1/history answer body.
std::string history_answer(const std::string& host, const std::vector<nlohmann::json>& records);

}  // namespace triage::agent::testing
