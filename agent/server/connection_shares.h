// Who may hold how many of a server's connections at once, so that one peer cannot take a server
// away from everybody else: every ordinary peer (a uid on the local socket, an address on the HTTP
// port) holds at most `per_peer`, all ordinary peers together at most `total - reserved`, and the
// `reserved` slots are kept for privileged peers (root and SlurmUser on the socket), who may use
// any free slot. Pure accounting: the servers ask admit() at accept and release() at close.
#pragma once

#include <cstddef>
#include <map>
#include <string>

namespace triage::agent {

struct ShareLimits {
  size_t total = 256;   // connections at once, everybody together
  size_t reserved = 0;  // of `total`, kept for privileged peers
  size_t per_peer = 8;  // one ordinary peer's connections at once
};

// Why a connection was not admitted.
enum class ShareRefusal {
  kNone,     // admitted
  kPerPeer,  // the peer already holds its share
  kFull,     // no slot left for this kind of peer
};

struct SharePeer {
  std::string key;  // "uid 1000", "10.0.0.7": connections with the same key share one share
  bool privileged = false;
};

class ConnectionShares {
 public:
  explicit ConnectionShares(const ShareLimits& limits);

  // Whether `peer` may open one more connection; when it may, the connection is counted.
  ShareRefusal admit(const SharePeer& peer);
  // A connection admitted for `peer` closed.
  void release(const SharePeer& peer);

  size_t held(const std::string& key) const;
  size_t total() const { return privileged_ + ordinary_; }
  const ShareLimits& limits() const { return limits_; }

 private:
  ShareLimits limits_;
  std::map<std::string, size_t> per_peer_;  // ordinary peers only; a key leaves at zero
  size_t ordinary_ = 0;
  size_t privileged_ = 0;
};

}  // namespace triage::agent
