// Asking other nodes' agents over HTTP, in parallel and within one deadline: the job-end leader
// fetches each node's evidence and hands each an outcome record, `slurm-triage nodes` fetches each
// node's health. Every request carries a fresh munge credential bound to its request target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace triage::agent {

struct PeerRequest {
  std::string host;      // a name for reports
  std::string base_url;  // "http://node002:6829"
  std::string target;    // "/v1/jobs/4242/events?start=...&end=..."
  // Data handed over inside the credential, after the target and a newline; when set the request
  // is a POST without a body (POST /v1/history carries an outcome record this way: munge
  // authenticates and seals it, and no request body has to be parsed).
  std::string carried;
};

struct PeerResponse {
  std::string host;
  bool ok = false;  // a 200 answer arrived in full
  long status = 0;
  std::string body;
  std::string error;  // why not ok: "connection refused", "timed out after 5s", "HTTP 403: ..."
};

struct PeerFetchOptions {
  std::string munge_socket;
  int64_t timeout_ms = 10000;
  size_t max_body = 64u << 20;
};

// "http://node:port" for a node named as in `--nodes`: "host:port" picks its own port.
std::string peer_base_url(const std::string& node, int default_port);

// Results come back in the order of `requests`.
std::vector<PeerResponse> fetch_from_peers(const std::vector<PeerRequest>& requests,
                                           const PeerFetchOptions& options);

}  // namespace triage::agent
