// One ended job's outcome as every node it ran on remembers it: who ran it, how it ended, whose
// fault, which nodes the evidence points at and what it cost. Built on the analysis leader from
// the analyzer's triage.json and the job's facts; kept by each node's OutcomeHistory and served
// at GET /v1/history (docs/protocol.md has the JSON).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/model.h"

namespace triage::agent {

inline constexpr int kOutcomeRecordVersion = 1;

struct ImplicatedNode {
  std::string node;
  std::string why;
  bool trusted = false;  // the node's own agent (kernel, Slurm) said so, not only the log
};

struct OutcomeRecord {
  uint64_t job_id = 0;
  std::string user;
  int64_t end_time = 0;  // epoch seconds
  std::string status;    // triage.json status: failed, completed, cancelled, ...
  std::optional<std::string> cls;
  std::optional<std::string> blame;
  // The job's nodes as a Slurm hostlist ("gpu-a[001-064]"): a 64-node job costs a few bytes, not
  // 64 strings, which keeps 10,000 records well under the history's memory budget.
  std::string nodelist;
  std::vector<ImplicatedNode> implicated;
  std::optional<double> gpu_hours_lost;
  // Which attempt this was (Slurm's restart count when it ran) and how far it got: the last step
  // its log showed and the checkpoint a restart resumes from (triage.json progress.last_step and
  // progress.resume_step). The crashloop stop (agent/requeue/crashloop.h) compares them between
  // attempts. A record from an agent before these fields has `progress_known` false.
  std::optional<int> attempt;
  bool progress_known = false;
  std::optional<int64_t> last_step;
  std::optional<int64_t> last_checkpoint;

  std::vector<std::string> nodes() const;
};

// The record of a job from its triage.json and its facts. `gpus` is the job's GPU count when the
// allocation is known; without it (or without a progress projection) gpu_hours_lost stays null.
// `now_sec` stands in for an end time the facts do not know. Never throws: a field of the wrong
// type counts as absent.
OutcomeRecord build_outcome_record(const nlohmann::json& triage, const JobFacts& facts,
                                   std::optional<int64_t> gpus, int64_t now_sec);

// The job's GPU count from Slurm's allocated TRES ("cpu=8,mem=64G,node=2,gres/gpu=16"): the
// untyped gres/gpu total; empty when the string names none.
std::optional<int64_t> gpus_from_tres(const std::string& tres);

// The served form (docs/protocol.md): "nodes" as an array of host names.
nlohmann::json outcome_to_json(const OutcomeRecord& r);
// The stored and pushed form: the same, but "nodes" as one hostlist string (bounded size).
nlohmann::json outcome_to_compact_json(const OutcomeRecord& r);
// Either form back. Throws std::invalid_argument naming what is wrong (a missing field, another
// version "v"). "attempt", "last_step" and "last_checkpoint" may be absent (older records): the
// attempt is then unknown and `progress_known` false.
OutcomeRecord outcome_from_json(const nlohmann::json& j);

}  // namespace triage::agent
