// Accepting and serving many stream connections on the event loop without a thread per client:
// non-blocking sockets, bounded input and output buffers, fair shares of the connections per peer
// (agent/server/connection_shares.h) and two deadlines per connection: one for sending a complete
// request, one for reading the answer. The local JSON-lines socket and the HTTP endpoint are both
// built on it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "agent/base/event_loop.h"
#include "agent/server/connection_shares.h"
#include "common/safe_io.h"

namespace triage::agent {

class StreamServer {
 public:
  struct Options {
    std::string name;  // for log lines: "socket", "http"
    ShareLimits shares;
    // The metric label of a refusal because the peer holds its share: "per-uid", "per-address".
    std::string per_peer_reason = "per-peer";
    // A client must send a complete request within this time: from accept, and (idle_timeout)
    // again after each answer. Partial input never restarts it.
    int64_t request_timeout_ms = 10000;
    bool idle_timeout = true;
    // A client whose answer waits in the agent must take some of it within this time.
    int64_t write_timeout_ms = 10000;
    size_t max_output = 64u << 20;  // a client that does not read its answers is dropped
    // The kernel's send buffer of each connection (0: its own, which TCP grows up to tcp_wmem's
    // 4 MiB): an answer nobody reads then waits here, where the write timeout and the HTTP
    // scrape count see it, not in kernel memory.
    int send_buffer = 0;
    // Whether a connection still waiting for its request gives way to a new one that would be
    // refused: the same peer's oldest when the peer holds its share, the oldest of the peer
    // holding the most when the server is full. For a server that learns who a client is only
    // from its request (HTTP: the munge credential), so that idle connections from an address
    // cannot keep an authenticated peer at the same address out (docs/security.md).
    bool displace_waiting = false;
  };

  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string in;
    std::string out;
    bool close_after_flush = false;
    bool ignore_input = false;
    bool peer_done = false;  // the client closed its side; what it sent is still answered
    int64_t request_deadline_usec = 0;  // monotonic; applies while nothing waits in `out`
    int64_t write_deadline_usec = 0;    // monotonic; applies while something waits in `out`
    // The peer: SO_PEERCRED for Unix sockets, the address for TCP.
    bool has_cred = false;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string remote;   // "10.0.0.7:41234", "[::1]:5000", "local"
    std::string address;  // the remote without its port ("local" for Unix sockets)
    SharePeer peer;       // whose share the connection counts against
    int tag = 0;          // the handler's own mark (HTTP: what the connection asked for)
  };

  // Called on the loop thread with new bytes in conn.in; consumes what it handled and appends
  // answers with send(). True when complete requests are left in conn.in (it handles one at a
  // time so that one client's pipelined requests cannot hold the loop): it is called again on a
  // later turn of the loop, after the other clients.
  using OnInput = std::function<bool(Conn&)>;

  // How the server treats its peers; every member may be empty.
  struct Policy {
    // Whose share a new connection counts against. Empty: its address, none privileged.
    std::function<SharePeer(const Conn&)> classify;
    // What a refused client reads before the server hangs up (reason: the refusal's label).
    std::function<std::string(const Conn&, const std::string& reason)> refusal;
    std::function<void(Conn&)> on_close;
  };

  StreamServer(EventLoop& loop, Options options, OnInput on_input, Policy policy = {});
  ~StreamServer();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  // Takes over a bound, listening, non-blocking socket.
  void serve(UniqueFd listening);
  void stop();

  void send(Conn& conn, std::string_view data);
  // Marks the request deadline as restarted (a request was handled on an idle-timeout connection).
  void touch(Conn& conn);

  size_t connections() const { return conns_.size(); }
  // Connections refused at accept or cut off later, by reason: the per-peer label, "full",
  // "idle" (no complete request in time), "slow" (the answer not read in time), "displaced" (gave
  // way to a newer connection, Options::displace_waiting).
  const std::map<std::string, uint64_t>& refused() const { return refused_; }
  uint64_t accepted() const { return accepted_; }

 private:
  void on_accept();
  void refuse(Conn& conn, const std::string& reason);
  // The connection that gives way to a new one `peer` opens, refused as `verdict`; 0: none may.
  uint64_t displaceable(const SharePeer& peer, ShareRefusal verdict) const;
  bool waiting_for_request(const Conn& conn) const;
  void on_event(uint64_t id, uint32_t events);
  void handle_input(uint64_t id);
  void schedule_input(Conn& conn);
  void flush(Conn& conn);
  void watch(Conn& conn);
  void close_conn(uint64_t id);
  void sweep();

  EventLoop& loop_;
  Options options_;
  OnInput on_input_;
  Policy policy_;
  ConnectionShares shares_;
  UniqueFd listen_;
  // Held open to be given up when accept() meets the descriptor limit: with it the agent can
  // still accept and close the waiting connection instead of leaving the listener readable (and
  // the loop spinning on it).
  UniqueFd spare_fd_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  // Connections with requests left, served round-robin a request each per turn of the loop.
  std::deque<uint64_t> input_queue_;
  std::set<uint64_t> input_pending_;  // what input_queue_ holds
  uint64_t input_timer_ = 0;
  uint64_t next_id_ = 1;
  std::map<std::string, uint64_t> refused_;
  uint64_t accepted_ = 0;
  uint64_t sweep_timer_ = 0;
  bool stopped_ = false;
};

}  // namespace triage::agent
