#include "agent/history/suspect_nodes.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <unordered_map>

#include "common/hostlist.h"
#include "common/json_read.h"
#include "common/text.h"

namespace triage::agent {

namespace {

constexpr size_t kBuckets = 4;

bool known_blame(const std::string& b) {
  static const std::array<const char*, 6> kKnown = {"user-code", "user-config", "input-data",
                                                    "platform",  "scheduler",   "unknown"};
  return std::any_of(kKnown.begin(), kKnown.end(), [&](const char* k) { return b == k; });
}

std::vector<std::string> distinct_node_names(const JsonObjectReader& r) {
  const nlohmann::json* nodes = r.array("nodes");
  if (nodes == nullptr || nodes->empty()) r.fail("nodes", "expected a non-empty array");
  std::vector<std::string> out;
  for (size_t i = 0; i < nodes->size(); ++i) {
    const nlohmann::json& n = (*nodes)[i];
    if (!n.is_string() || n.get_ref<const std::string&>().empty()) {
      throw InputError(r.origin(), 0, r.item_path("nodes", i) + ": expected a host name");
    }
    const std::string& name = n.get_ref<const std::string&>();
    if (std::find(out.begin(), out.end(), name) == out.end()) out.push_back(name);
  }
  return out;
}

std::vector<OutcomeImplication> implications(const JsonObjectReader& r) {
  const nlohmann::json* list = r.array("implicated");
  if (list == nullptr) r.fail("implicated", "missing");
  std::vector<OutcomeImplication> out;
  for (size_t i = 0; i < list->size(); ++i) {
    const JsonObjectReader item((*list)[i], r.origin(), r.item_path("implicated", i));
    const auto node = item.str("node");
    const auto trusted = item.boolean("trusted");
    if (!node || !trusted) item.fail(node ? "trusted" : "node", "missing");
    out.push_back({*node, item.str("why").value_or(""), *trusted});
  }
  return out;
}

JobOutcome read_job_outcome(const nlohmann::json& record) {
  const JsonObjectReader r(record, "history record", "");
  const auto v = r.i64("v");
  if (!v) r.fail("v", "missing");
  if (*v != 1) r.fail("v", "version " + std::to_string(*v) + ", expected 1");
  JobOutcome j;
  const auto job_id = r.u64("job_id");
  const auto user = r.str("user");
  const auto end_time = r.i64("end_time");
  const auto status = r.str("status");
  if (!job_id) r.fail("job_id", "missing");
  if (!user) r.fail("user", "missing");
  if (!end_time) r.fail("end_time", "missing");
  if (!status) r.fail("status", "missing");
  j.job_id = *job_id;
  j.user = *user;
  j.end_time = *end_time;
  j.status = *status;
  j.cls = r.str("class");
  j.blame = r.str("blame");
  if (j.blame && !known_blame(*j.blame)) r.fail("blame", "unknown blame '" + *j.blame + "'");
  j.nodes = distinct_node_names(r);
  j.implicated = implications(r);
  j.gpu_hours_lost = r.num("gpu_hours_lost");
  return j;
}

std::string percent(double rate) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, rate < 0.1 ? "%.1f%%" : "%.0f%%", rate * 100);
  return buf;
}

std::string short_number(double x) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.2g", x);
  return buf;
}

struct NodeTally {
  std::array<uint64_t, kBuckets> jobs{};
  std::array<uint64_t, kBuckets> failures{};         // counted against this node
  std::array<uint64_t, kBuckets> failed_anywhere{};  // counted against any node of the job
  std::vector<const JobOutcome*> failed;
  std::vector<std::string> failing_nodes;  // the nodes the failures were pinned on
};

struct BucketTotals {
  std::array<uint64_t, kBuckets> jobs{};
  std::array<uint64_t, kBuckets> failures{};
};

// The expected failures of a node's jobs at the cluster's rate for their sizes, the node's own
// jobs left out of the rate. The rate is that of a job failing against any of its nodes, at least
// the chance of failing against one given node: the test stays conservative.
double expected_failures(const NodeTally& t, const BucketTotals& all) {
  double mu = 0;
  for (size_t b = 0; b < kBuckets; ++b) {
    if (t.jobs[b] == 0) continue;
    const auto others_failed = static_cast<double>(all.failures[b] - t.failed_anywhere[b]);
    const auto others = static_cast<double>(all.jobs[b] - t.jobs[b]);
    mu += static_cast<double>(t.jobs[b]) * (others_failed + 0.5) / (others + 1);
  }
  return mu;
}

// "4 of them were gpu-fallen-off-bus (Xid 79 on this node)", one line per class, most first, with
// what the newest of them pinned on this node.
std::vector<std::string> class_reasons(const std::vector<std::string>& members,
                                       const std::vector<const JobOutcome*>& failed) {
  std::map<std::string, std::pair<uint64_t, std::string>> by_class;  // class -> (count, why)
  for (const JobOutcome* j : failed) {
    auto& [count, why] = by_class[j->cls.value_or("unclassified")];
    ++count;
    for (const OutcomeImplication& i : j->implicated) {
      const bool member = std::find(members.begin(), members.end(), i.node) != members.end();
      if (member && i.trusted && !i.why.empty()) why = i.why;
    }
  }
  std::vector<std::pair<std::string, std::pair<uint64_t, std::string>>> rows(by_class.begin(),
                                                                             by_class.end());
  std::stable_sort(rows.begin(), rows.end(),
                   [](const auto& a, const auto& b) { return a.second.first > b.second.first; });
  std::vector<std::string> out;
  for (const auto& [cls, entry] : rows) {
    const auto& [count, why] = entry;
    std::string line = std::to_string(count);
    line += count == 1 ? " of them was " : " of them were ";
    line += cls;
    if (!why.empty()) line += " (" + printable(why) + ")";
    out.push_back(std::move(line));
  }
  return out;
}

SuspectNode describe_suspect(const std::string& unit, bool group, NodeTally tally, uint64_t n,
                             uint64_t k, double mu, double p_value) {
  SuspectNode s;
  s.node = unit;
  s.failing_nodes = std::move(tally.failing_nodes);
  s.failures = k;
  s.jobs = n;
  s.expected = mu;
  s.cluster_rate = mu / static_cast<double>(n);
  s.p_value = p_value;
  std::sort(tally.failed.begin(), tally.failed.end(), [](const auto* a, const auto* b) {
    return a->end_time != b->end_time ? a->end_time > b->end_time : a->job_id > b->job_id;
  });
  for (const JobOutcome* j : tally.failed)
    s.failed_jobs.push_back(j->job_id);
  const std::string on =
      group ? "on a node under it (" + compress_hostlist(s.failing_nodes) + ")" : "on this node";
  s.reasons.push_back(std::to_string(k) + " of its " + std::to_string(n) +
                      " multi-node jobs failed on platform evidence trusted " + on +
                      "; cluster rate " + percent(s.cluster_rate) + " for jobs of their sizes (" +
                      short_number(mu) + " expected); p = " + short_number(p_value));
  for (std::string& line : class_reasons(s.failing_nodes, tally.failed))
    s.reasons.push_back(std::move(line));
  return s;
}

}  // namespace

std::optional<JobOutcome> parse_job_outcome(const nlohmann::json& record, std::string& why) {
  try {
    return read_job_outcome(record);
  } catch (const InputError& e) {
    why = e.message();
    return std::nullopt;
  }
}

std::vector<JobOutcome> distinct_jobs(std::vector<JobOutcome> records) {
  std::stable_sort(records.begin(), records.end(),
                   [](const JobOutcome& a, const JobOutcome& b) { return a.job_id < b.job_id; });
  records.erase(
      std::unique(records.begin(), records.end(),
                  [](const JobOutcome& a, const JobOutcome& b) { return a.job_id == b.job_id; }),
      records.end());
  return records;
}

bool counts_against_node(const JobOutcome& job, const std::string& node) {
  if (to_lower(job.status) == "completed" || job.blame != "platform") return false;
  return std::any_of(job.implicated.begin(), job.implicated.end(),
                     [&](const OutcomeImplication& i) { return i.trusted && i.node == node; });
}

bool counts_against_nodes(const JobOutcome& job) {
  return std::any_of(job.nodes.begin(), job.nodes.end(),
                     [&](const std::string& node) { return counts_against_node(job, node); });
}

size_t size_bucket(size_t nodes) {
  if (nodes < 4) return 0;
  if (nodes < 8) return 1;
  if (nodes < 16) return 2;
  return 3;
}

double binomial_upper_tail(uint64_t n, uint64_t k, double p) {
  if (k == 0) return 1;
  if (k > n || p <= 0) return 0;
  if (p >= 1) return 1;
  const auto nd = static_cast<double>(n);
  const auto kd = static_cast<double>(k);
  const double logit = std::log(p) - std::log1p(-p);
  double term = std::lgamma(nd + 1) - std::lgamma(kd + 1) - std::lgamma(nd - kd + 1) +
                kd * std::log(p) + (nd - kd) * std::log1p(-p);
  double sum = term;  // log of the sum so far
  const double mode = (nd + 1) * p;
  for (uint64_t i = k + 1; i <= n; ++i) {
    const auto id = static_cast<double>(i);
    term += std::log(nd - id + 1) - std::log(id) + logit;
    const double hi = std::max(sum, term);
    sum = hi + std::log1p(std::exp(std::min(sum, term) - hi));
    // Past the mode the terms only shrink; e^-45 of the sum cannot change a double.
    if (id > mode && term < sum - 45) break;
  }
  return std::min(1.0, std::exp(sum));
}

namespace {

// The test of rank_suspects over units of nodes: `unit_of` names a node's unit (nullptr: in none).
// A job counts for each unit one of its nodes is in, and against a unit when it counts against one
// of that unit's nodes.
SuspectRanking rank_units(const std::vector<JobOutcome>& jobs, const SuspectPolicy& policy,
                          const std::function<const std::string*(const std::string&)>& unit_of,
                          bool group, const std::string& what, const std::string& whats) {
  SuspectRanking out;
  out.jobs = jobs.size();
  BucketTotals all;
  std::unordered_map<std::string, NodeTally> tallies;
  for (const JobOutcome& j : jobs) {
    if (j.nodes.size() < 2) continue;
    ++out.multi_node_jobs;
    const size_t b = size_bucket(j.nodes.size());
    const bool failed = counts_against_nodes(j);
    ++all.jobs[b];
    if (failed) ++all.failures[b];
    std::map<std::string, std::vector<std::string>> units;  // unit -> its nodes failing this job
    for (const std::string& node : j.nodes) {
      const std::string* unit = unit_of(node);
      if (unit == nullptr) continue;
      std::vector<std::string>& pinned = units[*unit];
      if (failed && counts_against_node(j, node)) pinned.push_back(node);
    }
    for (auto& [unit, pinned] : units) {
      NodeTally& t = tallies[unit];
      ++t.jobs[b];
      if (!failed) continue;
      ++t.failed_anywhere[b];
      if (pinned.empty()) continue;
      ++t.failures[b];
      t.failed.push_back(&j);
      for (std::string& node : pinned) {
        if (std::find(t.failing_nodes.begin(), t.failing_nodes.end(), node) ==
            t.failing_nodes.end())
          t.failing_nodes.push_back(std::move(node));
      }
    }
  }
  out.nodes_tested = tallies.size();
  out.threshold = policy.family_alpha / static_cast<double>(std::max<uint64_t>(1, tallies.size()));
  out.test =
      "binomial tail P(X >= k) of a " + what +
      "'s failures with platform blame on evidence trusted on that " + what +
      " among its multi-node jobs, against the cluster's rate for jobs of the same "
      "size (2-3, 4-7, 8-15, 16+ "
      "nodes; the " +
      what + "'s own jobs left out); suspect when k >= " + std::to_string(policy.min_failures) +
      " and p < " + short_number(policy.family_alpha) + "/" + std::to_string(out.nodes_tested) +
      " = " + short_number(out.threshold) + " (Bonferroni over the " + whats + " tested)";
  for (auto& [unit, tally] : tallies) {
    uint64_t n = 0;
    uint64_t k = 0;
    for (size_t b = 0; b < kBuckets; ++b) {
      n += tally.jobs[b];
      k += tally.failures[b];
    }
    if (k < policy.min_failures) continue;
    const double mu = expected_failures(tally, all);
    const double p_value = binomial_upper_tail(n, k, mu / static_cast<double>(n));
    if (p_value >= out.threshold) continue;
    out.suspects.push_back(describe_suspect(unit, group, std::move(tally), n, k, mu, p_value));
  }
  std::sort(out.suspects.begin(), out.suspects.end(), [](const auto& a, const auto& b) {
    return a.p_value != b.p_value ? a.p_value < b.p_value : a.node < b.node;
  });
  return out;
}

}  // namespace

SuspectRanking rank_suspects(const std::vector<JobOutcome>& jobs, const SuspectPolicy& policy) {
  return rank_units(
      jobs, policy, [](const std::string& node) { return &node; }, false, "node", "nodes");
}

SuspectRanking rank_node_groups(const std::vector<JobOutcome>& jobs, const SuspectPolicy& policy,
                                const std::map<std::string, std::string>& group_of,
                                const std::string& what) {
  return rank_units(
      jobs, policy,
      [&](const std::string& node) -> const std::string* {
        const auto it = group_of.find(node);
        return it == group_of.end() ? nullptr : &it->second;
      },
      true, what, what.back() == 'h' || what.back() == 's' ? what + "es" : what + "s");
}

std::optional<std::string> suspect_drain_recommendation(const SuspectNode& suspect,
                                                        const std::string& drain_policy) {
  if (drain_policy != "recommend" && drain_policy != "auto") return std::nullopt;
  constexpr size_t kNamed = 20;  // the newest; the JSON's failed_jobs has them all
  std::string jobs;
  for (size_t i = 0; i < suspect.failed_jobs.size() && i < kNamed; ++i)
    jobs += (i == 0 ? "" : ", ") + std::to_string(suspect.failed_jobs[i]);
  if (suspect.failed_jobs.size() > kNamed)
    jobs += " (+" + std::to_string(suspect.failed_jobs.size() - kNamed) + " more)";
  return "drain recommended: jobs " + jobs;
}

}  // namespace triage::agent
