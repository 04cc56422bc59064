#include "tests/agent/history_fixture.h"

#include <algorithm>
#include <cstdio>
#include <random>

namespace triage::agent::testing {

namespace {

// Draws from the raw generator: std::*_distribution differ between standard libraries.
class Draw {
 public:
  explicit Draw(uint32_t seed) : gen_(seed) {}
  double unit() { return static_cast<double>(gen_()) / 4294967296.0; }
  size_t below(size_t n) { return static_cast<size_t>(unit() * static_cast<double>(n)); }

 private:
  std::mt19937 gen_;
};

std::vector<std::string> pick_nodes(Draw& d, const HistorySpec& spec, size_t size) {
  std::vector<double> weight(spec.nodes, 1.0);
  for (size_t i = 0; i < spec.nodes; ++i) {
    if (fixture_node_name(i) == spec.busy) weight[i] = spec.busy_weight;
  }
  std::vector<std::string> out;
  while (out.size() < size) {
    double total = 0;
    for (const double w : weight)
      total += w;
    double x = d.unit() * total;
    size_t i = 0;
    while (i + 1 < spec.nodes && x >= weight[i]) {
      x -= weight[i];
      ++i;
    }
    if (weight[i] == 0) continue;
    weight[i] = 0;
    out.push_back(fixture_node_name(i));
  }
  std::sort(out.begin(), out.end());
  return out;
}

bool has(const std::vector<std::string>& nodes, const std::string& n) {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}

void set_outcome(nlohmann::json& r, const char* status, const char* cls, const char* blame) {
  r["status"] = status;
  r["class"] = cls != nullptr ? nlohmann::json(cls) : nlohmann::json(nullptr);
  r["blame"] = blame != nullptr ? nlohmann::json(blame) : nlohmann::json(nullptr);
}

void decide_outcome(Draw& d, const HistorySpec& spec, nlohmann::json& r,
                    const std::vector<std::string>& nodes) {
  const double base = nodes.size() < 2 ? 0.01 : 0.015 + 0.003 * static_cast<double>(nodes.size());
  const double user_code = has(nodes, spec.careless) ? 0.5 : 0.1;
  const double u = d.unit();
  if (has(nodes, spec.lemon) && d.unit() < spec.lemon_failure) {
    set_outcome(r, "failed", "gpu-ecc-uncorrectable", "platform");
    r["implicated"].push_back({{"node", spec.lemon},
                               {"why", "uncorrectable ECC error (Xid 48) in its kernel log"},
                               {"trusted", true}});
  } else if (u < base / 2) {
    set_outcome(r, "failed", "gpu-xid-79", "platform");
    const std::string& culprit = nodes[d.below(nodes.size())];
    r["implicated"].push_back(
        {{"node", culprit}, {"why", "Xid 79 (GPU fell off the bus)"}, {"trusted", true}});
  } else if (u < base) {
    set_outcome(r, "failed", "nccl-timeout", "unknown");
  } else if (u < base + user_code) {
    set_outcome(r, "failed", "python-exception", "user-code");
  } else if (u < base + user_code + 0.02) {
    set_outcome(r, "preempted", "preempted", "scheduler");
  } else {
    set_outcome(r, "completed", nullptr, nullptr);
  }
}

}  // namespace

std::string fixture_node_name(size_t index) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "gpu-a%03zu", index + 1);
  return buf;
}

std::vector<nlohmann::json> generate_history(const HistorySpec& spec) {
  Draw d(spec.seed);
  std::vector<nlohmann::json> out;
  for (size_t i = 0; i < spec.jobs; ++i) {
    const size_t size = d.unit() < 0.2 ? 1 : 2 + d.below(spec.max_size - 1);
    const std::vector<std::string> nodes = pick_nodes(d, spec, size);
    nlohmann::json r = {{"v", 1},
                        {"job_id", spec.first_job_id + i},
                        {"user", "user" + std::to_string(d.below(12))},
                        {"end_time", spec.first_end_time + static_cast<int64_t>(i) * 600},
                        {"nodes", nodes},
                        {"implicated", nlohmann::json::array()},
                        {"gpu_hours_lost", nullptr}};
    decide_outcome(d, spec, r, nodes);
    if (r["status"] == "failed") r["gpu_hours_lost"] = 0.5 * static_cast<double>(size);
    out.push_back(std::move(r));
  }
  return out;
}

std::map<std::string, std::vector<nlohmann::json>> histories_by_node(
    const std::vector<nlohmann::json>& records, size_t max_jobs) {
  std::map<std::string, std::vector<nlohmann::json>> out;
  for (const nlohmann::json& r : records) {
    for (const nlohmann::json& n : r["nodes"])
      out[n.get<std::string>()].push_back(r);
  }
  for (auto& [node, list] : out) {
    if (list.size() > max_jobs)
      list.erase(list.begin(), list.end() - static_cast<std::ptrdiff_t>(max_jobs));
  }
  return out;
}

std::string history_answer(const std::string& host, const std::vector<nlohmann::json>& records) {
  const nlohmann::json answer = {{"host", host},
                                 {"records", records},
                                 {"kept", records.size()},
                                 {"dropped", 0},
                                 {"window", {{"days", 30}, {"max_jobs", 10000}}}};
  return answer.dump();
}

}  // namespace triage::agent::testing
