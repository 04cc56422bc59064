#include "agent/job_end/peer_evidence.h"

#include <map>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/text.h"

namespace triage::agent {

PeerFetchOptions peer_fetch_options(const AgentConfig& cfg) {
  PeerFetchOptions o;
  o.munge_socket = cfg.munge_socket;
  o.timeout_ms = cfg.peer_fetch_timeout_ms;
  return o;
}

std::vector<PeerRequest> peer_requests(SharedSlurm& slurm, uint64_t job_id,
                                       const std::vector<std::string>& nodes,
                                       const EvidenceWindow& window, const std::string& self,
                                       const PeerUrl& peer_url) {
  std::string target = "/v1/jobs/" + std::to_string(job_id) + "/events";
  if (window.start_s != 0 || window.end_s != 0) {
    target += "?start=" + std::to_string(window.start_s) + "&end=" + std::to_string(window.end_s);
  }
  // Slurm reaches a node at its NodeAddr, which need not be a name DNS knows (several slurmd per
  // host, private fabrics); the peer agent listens there too.
  std::map<std::string, std::string> addresses;
  if (slurm.present() && nodes.size() > 1) {
    slurm.with([&](SlurmClient* c) {
      std::string error;
      addresses = c->node_addresses(nodes, error);
      if (!error.empty()) {
        spdlog::info("job {}: node addresses unavailable ({}); reaching peers by name", job_id,
                     log_text(error));
      }
    });
  }
  std::vector<PeerRequest> requests;
  for (const std::string& node : nodes) {
    if (node == self) continue;
    const auto addr = addresses.find(node);
    requests.push_back({node, peer_url(addr != addresses.end() ? addr->second : node), target});
  }
  return requests;
}

NodeEvidence peer_evidence(const PeerResponse& r) {
  NodeEvidence n;
  n.host = r.host;
  if (!r.ok) {
    n.reachable = false;
    n.error = r.error;
    return n;
  }
  try {
    n = node_evidence_from_json(nlohmann::json::parse(r.body), r.host);
    n.host = r.host;
    n.reachable = true;
  } catch (const std::exception& e) {
    n.reachable = false;
    n.error = std::string("unusable answer: ") + e.what();
  }
  return n;
}

std::vector<NodeEvidence> fetch_peer_evidence(SharedSlurm& slurm, uint64_t job_id,
                                              const std::vector<std::string>& nodes,
                                              const EvidenceWindow& window, const std::string& self,
                                              const PeerUrl& peer_url,
                                              const PeerFetchOptions& options) {
  std::vector<NodeEvidence> peers;
  for (const PeerResponse& r :
       fetch_from_peers(peer_requests(slurm, job_id, nodes, window, self, peer_url), options))
    peers.push_back(peer_evidence(r));
  return peers;
}

}  // namespace triage::agent
