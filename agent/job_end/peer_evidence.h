// Asking a job's other nodes for their evidence: one request per node, at the address Slurm
// reaches it by, for the kernel events, task exits and D-state tasks they attribute to the job in
// a window. The job-end leader asks once the job has ended; the batch host's live loop asks while
// a stalled job still runs, for the facts that corroborate the stall.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "agent/base/config.h"
#include "agent/net/peer_client.h"
#include "agent/slurm/shared_slurm.h"
#include "common/model.h"

namespace triage::agent {

// The agent's settings for asking its peers: its munge socket and PeerFetchTimeout.
PeerFetchOptions peer_fetch_options(const AgentConfig& cfg);

// Base URL of a peer's HTTP endpoint from its address (Slurm's NodeAddr, else its name).
using PeerUrl = std::function<std::string(const std::string& node)>;

// The window a peer is asked about, in seconds since the epoch (0: the peer's own idea of it).
struct EvidenceWindow {
  int64_t start_s = 0;
  int64_t end_s = 0;
};

// Contract: one request per node of `nodes` other than `self`, for job `job_id`'s evidence in
// `window`, addressed at the node's NodeAddr when slurmctld knows it, else at its name.
std::vector<PeerRequest> peer_requests(SharedSlurm& slurm, uint64_t job_id,
                                       const std::vector<std::string>& nodes,
                                       const EvidenceWindow& window, const std::string& self,
                                       const PeerUrl& peer_url);

// Contract: a peer's answer as its evidence; a failed or unusable answer is an unreachable node
// carrying the reason.
NodeEvidence peer_evidence(const PeerResponse& r);

// The two together: every other node's evidence, in the order of `nodes` (blocking; on a worker).
std::vector<NodeEvidence> fetch_peer_evidence(SharedSlurm& slurm, uint64_t job_id,
                                              const std::vector<std::string>& nodes,
                                              const EvidenceWindow& window, const std::string& self,
                                              const PeerUrl& peer_url,
                                              const PeerFetchOptions& options);

}  // namespace triage::agent
