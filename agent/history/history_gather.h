// The cluster's job outcome history, gathered from the agents' GET /v1/history: `slurm-triage
// nodes --suspects` ranks what this returns (agent/history/suspect_nodes.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/history/outcome_record.h"
#include "agent/history/suspect_nodes.h"
#include "agent/net/peer_client.h"

namespace triage::agent {

struct UnreachableAgent {
  std::string host;
  std::string error;
};

struct GatheredHistory {
  std::vector<JobOutcome> jobs;  // each job once (from any one agent that has it), by job_id
  uint64_t records = 0;          // records received, duplicates included
  uint64_t skipped = 0;          // records set aside as unusable
  std::vector<std::string> skipped_reasons;  // the first few, "gpu007: job_id: missing"
  std::vector<std::string> reached;          // the agents' own host names
  std::vector<UnreachableAgent> unreachable;
};

// The merged history of the agents' answers (in the order given): an answer that is not a
// history makes its agent unreachable; a record that is not a usable job is skipped and counted.
GatheredHistory merge_history_answers(const std::vector<PeerResponse>& answers);

// Asks every node's agent for its history (munge-authenticated, in parallel) and merges.
GatheredHistory gather_history(const std::vector<std::string>& nodes, int port,
                               const PeerFetchOptions& options);

// The records of job `job_id` in the agents' answers (GET /v1/history), every attempt each agent
// holds (the same attempt from two agents once); an answer that is not a history, or a record that
// does not read, is left out. For the crashloop stop (agent/requeue/crashloop.h): a requeued job's
// earlier attempt ran on nodes the next attempt may not share.
std::vector<OutcomeRecord> job_records_in_answers(const std::vector<PeerResponse>& answers,
                                                  uint64_t job_id);

}  // namespace triage::agent
