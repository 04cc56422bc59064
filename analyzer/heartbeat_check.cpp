#include "analyzer/heartbeat_check.h"

#include <algorithm>
#include <string>

namespace triage {

namespace {

std::string task_list(const std::vector<int64_t>& tasks) {
  std::string s;
  for (size_t i = 0; i < tasks.size() && i < 32; ++i) {
    if (!s.empty()) s += ", ";
    s += std::to_string(tasks[i]);
  }
  if (tasks.size() > 32) s += ", ... (" + std::to_string(tasks.size()) + " in all)";
  return s;
}

}  // namespace

HeartbeatCheck check_heartbeat(
    const LogFacts& facts,
    const std::map<int64_t, std::pair<int64_t, uint32_t>>& first_error_by_rank,
    const SignatureCatalog& catalog) {
  HeartbeatCheck h;
  h.timeout_s = facts.config.heartbeat_timeout_s;
  if (facts.heartbeat.line == 0) return h;
  h.present = true;
  h.line = facts.heartbeat.line;
  h.accused = facts.heartbeat.accused;
  for (const int64_t task : h.accused) {
    if (facts.self_reported_death.count(task) != 0) h.self_reported.push_back(task);
    const auto it = first_error_by_rank.find(task);
    if (it != first_error_by_rank.end() && it->second.first < h.line) {
      const auto& cls = catalog.classes()[it->second.second];
      h.prior_errors.emplace_back(task, cls.id + " at line " + std::to_string(it->second.first));
      continue;
    }
    // Slurm reporting the task dead ("srun: error: host: task 2: Out Of Memory") before the
    // accusation is just as real, and carries no task label of its own.
    for (const auto& st : facts.srun_tasks) {
      if (st.line >= h.line || std::find(st.ranks.begin(), st.ranks.end(), task) == st.ranks.end())
        continue;
      if (st.outcome.find("exit code 143") != std::string::npos) continue;
      h.prior_errors.emplace_back(
          task, "srun: " + st.outcome + " on " + st.host + " at line " + std::to_string(st.line));
      break;
    }
  }
  if (!h.prior_errors.empty()) {
    h.verdict = "true-positive";
    h.explanation =
        "Accused task(s) printed a real error before the heartbeat timeout, so at least one really "
        "died "
        "(the rare case): the earlier error is the root cause.";
  } else if (!h.self_reported.empty()) {
    h.verdict = "false-positive";
    h.explanation = "Accused task(s) " + task_list(h.self_reported) +
                    " logged their own termination after the accusation: they were alive when "
                    "declared dead. This is "
                    "the known heartbeat false positive.";
  } else {
    h.verdict = "undetermined";
    h.explanation =
        "No accused task printed an error before the timeout, and none confirmed it was alive; "
        "with no "
        "evidence of a real crash, treat it as the known false positive.";
  }
  if (h.accused.empty()) {
    h.explanation += " (The log did not list which tasks were accused.)";
  } else {
    h.explanation += " Accused tasks: " + task_list(h.accused) + ".";
  }
  return h;
}

}  // namespace triage
