// The accounting behind the socket's and HTTP port's fair shares: one ordinary peer cannot hold
// more than its share, ordinary peers together cannot reach the privileged peers' reserved slots,
// and released connections give their slots back.
#include "agent/server/connection_shares.h"

#include <gtest/gtest.h>

namespace triage::agent {
namespace {

const SharePeer kAlice{"uid 1000", false};
const SharePeer kBob{"uid 1001", false};
const SharePeer kRoot{"uid 0", true};

TEST(ConnectionShares, AnOrdinaryPeerHoldsAtMostItsShare) {
  ConnectionShares s({.total = 100, .reserved = 10, .per_peer = 3});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(s.admit(kAlice), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kPerPeer);
  EXPECT_EQ(s.held("uid 1000"), 3u);
  EXPECT_EQ(s.admit(kBob), ShareRefusal::kNone) << "another user still gets in";
  s.release(kAlice);
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kNone) << "a closed connection frees its slot";
  EXPECT_EQ(s.total(), 4u);
}

TEST(ConnectionShares, OrdinaryPeersTogetherNeverTakeTheReservedSlots) {
  ConnectionShares s({.total = 6, .reserved = 2, .per_peer = 2});
  EXPECT_EQ(s.admit({"a", false}), ShareRefusal::kNone);
  EXPECT_EQ(s.admit({"a", false}), ShareRefusal::kNone);
  EXPECT_EQ(s.admit({"b", false}), ShareRefusal::kNone);
  EXPECT_EQ(s.admit({"b", false}), ShareRefusal::kNone);
  EXPECT_EQ(s.admit({"c", false}), ShareRefusal::kFull) << "only the reserved two are left";
  EXPECT_EQ(s.held("c"), 0u) << "a refused peer leaves no trace";
  EXPECT_EQ(s.admit(kRoot), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kRoot), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kRoot), ShareRefusal::kFull) << "the whole is the whole, even for root";
}

TEST(ConnectionShares, PrivilegedPeersMayUseOrdinarySlotsAndOrdinaryPeersThenWait) {
  ConnectionShares s({.total = 4, .reserved = 1, .per_peer = 4});
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(s.admit(kRoot), ShareRefusal::kNone);
  // Root holds its reserved slot and two ordinary ones: one ordinary slot is left.
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kBob), ShareRefusal::kFull);
  s.release(kRoot);
  s.release(kRoot);
  EXPECT_EQ(s.admit(kBob), ShareRefusal::kNone);
  EXPECT_EQ(s.total(), 3u);
}

TEST(ConnectionShares, AReservationAsLargeAsTheWholeStillLeavesOneOrdinarySlot) {
  ConnectionShares s({.total = 2, .reserved = 5, .per_peer = 8});
  EXPECT_EQ(s.limits().reserved, 1u);
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kBob), ShareRefusal::kFull);
}

TEST(ConnectionShares, ReleasingWhatWasNeverAdmittedChangesNothing) {
  ConnectionShares s({.total = 4, .reserved = 0, .per_peer = 1});
  s.release(kAlice);
  s.release(kRoot);
  EXPECT_EQ(s.total(), 0u);
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kNone);
  EXPECT_EQ(s.admit(kAlice), ShareRefusal::kPerPeer);
}

}  // namespace
}  // namespace triage::agent
