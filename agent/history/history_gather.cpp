#include "agent/history/history_gather.h"

#include <algorithm>
#include <future>
#include <mutex>
#include <thread>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "agent/history/history_split.h"

namespace triage::agent {

namespace {

constexpr size_t kReasonsKept = 5;

struct AgentHistory {
  std::string host;
  std::string error;  // set when the answer is not a history
  std::vector<JobOutcome> jobs;
  uint64_t records = 0;
  uint64_t skipped = 0;
  std::vector<std::string> skipped_reasons;
};

// The jobs already read from some agent: each job is in the history of every node it ran on, and
// reading it once keeps a large cluster's merge small.
class SeenJobs {
 public:
  bool contains(uint64_t id) {
    const std::lock_guard lock(mu_);
    return ids_.count(id) != 0;
  }
  bool insert(uint64_t id) {
    const std::lock_guard lock(mu_);
    return ids_.insert(id).second;
  }

 private:
  std::mutex mu_;
  std::unordered_set<uint64_t> ids_;
};

AgentHistory read_answer(const PeerResponse& answer, SeenJobs& seen) {
  AgentHistory h;
  h.host = answer.host;
  if (!answer.ok) {
    h.error = answer.error;
    return h;
  }
  const auto split = split_history_answer(answer.body);
  if (!split) {
    h.error = "the agent's answer is not a history";
    return h;
  }
  if (!split->host.empty()) h.host = split->host;
  h.records = split->records.size();
  std::string why;
  for (const HistoryRecordText& r : split->records) {
    if (r.job_id && seen.contains(*r.job_id)) continue;
    auto job = parse_job_outcome(nlohmann::json::parse(r.text, nullptr, false), why);
    if (job) {
      if (seen.insert(job->job_id)) h.jobs.push_back(std::move(*job));
      continue;
    }
    ++h.skipped;
    if (h.skipped_reasons.size() < kReasonsKept) h.skipped_reasons.push_back(h.host + ": " + why);
  }
  return h;
}

// Reading many large histories is CPU-bound; it spreads over the cores.
std::vector<AgentHistory> read_answers(const std::vector<PeerResponse>& answers) {
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1,
                                            std::max<size_t>(1, answers.size()));
  std::vector<AgentHistory> out(answers.size());
  SeenJobs seen;
  std::vector<std::future<void>> running;
  for (size_t w = 0; w < workers; ++w) {
    running.push_back(std::async(std::launch::async, [&, w] {
      for (size_t i = w; i < answers.size(); i += workers)
        out[i] = read_answer(answers[i], seen);
    }));
  }
  for (auto& r : running)
    r.get();
  return out;
}

}  // namespace

GatheredHistory merge_history_answers(const std::vector<PeerResponse>& answers) {
  GatheredHistory g;
  std::vector<JobOutcome> all;
  for (AgentHistory& h : read_answers(answers)) {
    if (!h.error.empty()) {
      g.unreachable.push_back({h.host, h.error});
      continue;
    }
    g.reached.push_back(h.host);
    g.records += h.records;
    g.skipped += h.skipped;
    for (std::string& why : h.skipped_reasons) {
      if (g.skipped_reasons.size() < kReasonsKept) g.skipped_reasons.push_back(std::move(why));
    }
    std::move(h.jobs.begin(), h.jobs.end(), std::back_inserter(all));
  }
  g.jobs = distinct_jobs(std::move(all));
  return g;
}

GatheredHistory gather_history(const std::vector<std::string>& nodes, int port,
                               const PeerFetchOptions& options) {
  std::vector<PeerRequest> requests;
  requests.reserve(nodes.size());
  for (const std::string& n : nodes)
    requests.push_back({n, peer_base_url(n, port), "/v1/history"});
  return merge_history_answers(fetch_from_peers(requests, options));
}

std::vector<OutcomeRecord> job_records_in_answers(const std::vector<PeerResponse>& answers,
                                                  uint64_t job_id) {
  std::vector<OutcomeRecord> out;
  for (const PeerResponse& a : answers) {
    if (!a.ok) continue;
    const auto split = split_history_answer(a.body);
    if (!split) continue;
    for (const HistoryRecordText& t : split->records) {
      if (t.job_id != job_id) continue;
      OutcomeRecord r;
      try {
        r = outcome_from_json(nlohmann::json::parse(t.text));
      } catch (const std::exception&) {
        continue;  // one agent's unreadable copy; another may hold a good one
      }
      const bool seen = std::any_of(out.begin(), out.end(), [&r](const OutcomeRecord& o) {
        return o.end_time == r.end_time && o.attempt == r.attempt;
      });
      if (!seen) out.push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace triage::agent
