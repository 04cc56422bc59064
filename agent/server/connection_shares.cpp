#include "agent/server/connection_shares.h"

#include <algorithm>

namespace triage::agent {

ConnectionShares::ConnectionShares(const ShareLimits& limits) : limits_(limits) {
  // A reservation as large as the whole would lock ordinary peers out entirely; config.cpp refuses
  // such a file, this keeps a hand-made ShareLimits from doing it silently.
  limits_.reserved = std::min(limits_.reserved, limits_.total > 0 ? limits_.total - 1 : 0);
}

ShareRefusal ConnectionShares::admit(const SharePeer& peer) {
  if (total() >= limits_.total) return ShareRefusal::kFull;
  if (peer.privileged) {
    ++privileged_;
    return ShareRefusal::kNone;
  }
  size_t& mine = per_peer_[peer.key];
  if (mine >= limits_.per_peer) return ShareRefusal::kPerPeer;
  // Privileged peers beyond the reservation use ordinary slots too; ordinary peers never take the
  // reserved ones, whoever holds the rest.
  const size_t ordinary_room = limits_.total - limits_.reserved;
  const size_t privileged_overflow =
      privileged_ > limits_.reserved ? privileged_ - limits_.reserved : 0;
  if (ordinary_ + privileged_overflow >= ordinary_room) {
    if (mine == 0) per_peer_.erase(peer.key);
    return ShareRefusal::kFull;
  }
  ++mine;
  ++ordinary_;
  return ShareRefusal::kNone;
}

void ConnectionShares::release(const SharePeer& peer) {
  if (peer.privileged) {
    if (privileged_ > 0) --privileged_;
    return;
  }
  auto it = per_peer_.find(peer.key);
  if (it == per_peer_.end()) return;
  if (--it->second == 0) per_peer_.erase(it);
  if (ordinary_ > 0) --ordinary_;
}

size_t ConnectionShares::held(const std::string& key) const {
  auto it = per_peer_.find(key);
  return it == per_peer_.end() ? 0 : it->second;
}

}  // namespace triage::agent
