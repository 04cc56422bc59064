// Suspect ("lemon") nodes: the nodes whose multi-node jobs fail on trusted platform evidence
// against them improbably often, against the cluster's rate for jobs of the same size.
//
// The test, for each node x that ran at least one multi-node job in the merged history:
//   n = x's multi-node (2+ nodes) jobs that ended; k = those that failed (status other than
//   completed) with blame platform AND a trusted implication of x in the record (x's own agent
//   said so: its kernel lines, its verdict, a task death it saw). Every other failure is a job but
//   never a failure against x: user-code, user-config, input-data and scheduler blame, blame
//   unknown, and platform blame drawn from the job's own log alone, which the job's user writes
//   (one user's failing jobs with made-up or unknown causes must not make a node a suspect).
//   The cluster's rate is that of a job counting against any of its nodes (at least the chance of
//   counting against one given node, so the test stays conservative).
//   The null hypothesis: x's jobs fail at the cluster's rate for their size. Sizes are bucketed
//   (2-3, 4-7, 8-15, 16+ nodes) because a bigger job has more ways to fail. The rate of bucket b,
//   leaving x's own jobs out so that a lemon does not raise its own yardstick, is
//   p_b = (failures_b + 1/2) / (jobs_b + 1) (the half-count keeps an empty bucket from claiming a
//   rate of exactly 0). x's expected failures are mu = sum over its jobs of p_size(job).
//   Under the null X is Poisson-binomial; its tail is bounded by the binomial's with the same mean
//   (Hoeffding 1956: P(X >= k) <= P(Bin(n, mu/n) >= k) for k >= mu + 1), so
//   p_value = P(Bin(n, mu/n) >= k), summed in log space. The p-value is conservative.
//   x is a suspect when k >= min_failures (3) and p_value < family_alpha / m (Bonferroni over the
//   m nodes tested; family_alpha 0.01). A node that ran more jobs has a larger mu, so volume alone
//   never makes a suspect.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace triage::agent {

// A node the job's evidence points at (history record "implicated").
struct OutcomeImplication {
  std::string node;
  std::string why;
  bool trusted = false;
};

// One ended job as the outcome history (GET /v1/history, record version 1) tells it.
struct JobOutcome {
  uint64_t job_id = 0;
  std::string user;
  int64_t end_time = 0;
  std::string status;
  std::optional<std::string> cls;
  std::optional<std::string> blame;
  std::vector<std::string> nodes;  // distinct, in record order
  std::vector<OutcomeImplication> implicated;
  std::optional<double> gpu_hours_lost;
};

// The job of a history record, or nullopt with `why` set when a field is missing, of the wrong
// type, the version is not 1 or the blame is not one of the known six.
std::optional<JobOutcome> parse_job_outcome(const nlohmann::json& record, std::string& why);

// Each job once (the first record of a job_id wins: every node a job ran on records it), ordered
// by job_id.
std::vector<JobOutcome> distinct_jobs(std::vector<JobOutcome> records);

// Whether the job's failure counts against `node`: not completed, blame platform, and `node`
// implicated on trusted evidence (the record's "implicated" with trusted true).
bool counts_against_node(const JobOutcome& job, const std::string& node);
// Whether it counts against any node it ran on.
bool counts_against_nodes(const JobOutcome& job);

// The size bucket of a job on `nodes` nodes: 0 for 2-3, 1 for 4-7, 2 for 8-15, 3 for 16+.
size_t size_bucket(size_t nodes);

// P(X >= k) for X ~ Binomial(n, p), accurate down to the smallest doubles (log-space sum).
double binomial_upper_tail(uint64_t n, uint64_t k, double p);

struct SuspectPolicy {
  double family_alpha = 0.01;  // Bonferroni: a node is tested at family_alpha / nodes tested
  uint64_t min_failures = 3;
};

struct SuspectNode {
  std::string node;
  uint64_t failures = 0;    // k
  uint64_t jobs = 0;        // n
  double expected = 0;      // mu
  double cluster_rate = 0;  // mu / n: the cluster's rate for jobs of this node's jobs' sizes
  double p_value = 1;
  std::vector<uint64_t> failed_jobs;  // the k jobs, newest first
  std::vector<std::string> reasons;
  std::vector<std::string> failing_nodes;  // the nodes the k failures were pinned on
};

struct SuspectRanking {
  std::vector<SuspectNode> suspects;  // most improbable first
  uint64_t jobs = 0;                  // distinct jobs seen
  uint64_t multi_node_jobs = 0;
  uint64_t nodes_tested = 0;  // m
  double threshold = 0;       // family_alpha / m
  std::string test;           // one line naming the test and thresholds
};

// The suspects among the nodes of `jobs` (distinct jobs), by the test above.
SuspectRanking rank_suspects(const std::vector<JobOutcome>& jobs, const SuspectPolicy& policy);

// The same test over groups of nodes (a leaf switch's): `group_of` names each node's group (a
// node not in it is in none); a multi-node job counts for each group one of its nodes is in, and
// against a group when it counts against one of the group's nodes; the rate a group is measured
// against leaves out the jobs that touched it. `what` names a group in the test line ("switch").
SuspectRanking rank_node_groups(const std::vector<JobOutcome>& jobs, const SuspectPolicy& policy,
                                const std::map<std::string, std::string>& group_of,
                                const std::string& what);

// The drain recommendation for a suspect under the cluster's DrainPolicy, naming its failed jobs
// (the newest 20), or nullopt when the policy does not allow one. Both recommend and auto allow
// it; the command never drains by itself.
std::optional<std::string> suspect_drain_recommendation(const SuspectNode& suspect,
                                                        const std::string& drain_policy);

}  // namespace triage::agent
