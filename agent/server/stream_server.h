// Accepting and serving many stream connections on the event loop without a thread per client:
// non-blocking sockets, bounded input and output buffers, a cap on connections and a deadline per
// connection. The local JSON-lines socket and the HTTP endpoint are both built on it.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "agent/base/event_loop.h"
#include "common/safe_io.h"

namespace triage::agent {

class StreamServer {
 public:
  struct Options {
    std::string name;  // for log lines: "socket", "http"
    size_t max_connections = 128;
    int64_t timeout_ms = 10000;
    // true: the deadline restarts whenever a request was handled (an idle timeout, for the local
    // socket); false: the whole exchange must fit in timeout_ms from accept (HTTP, slowloris).
    bool idle_timeout = true;
    size_t max_output = 64u << 20;  // a client that does not read its answers is dropped
  };

  struct Conn {
    uint64_t id = 0;
    int fd = -1;
    std::string in;
    std::string out;
    bool close_after_flush = false;
    bool ignore_input = false;
    int64_t deadline_usec = 0;  // monotonic
    // The peer: SO_PEERCRED for Unix sockets, the address for TCP.
    bool has_cred = false;
    pid_t pid = 0;
    uid_t uid = 0;
    gid_t gid = 0;
    std::string remote;
  };

  // Called on the loop thread with new bytes in conn.in; consumes what it handled and appends
  // answers with send().
  using OnInput = std::function<void(Conn&)>;

  StreamServer(EventLoop& loop, Options options, OnInput on_input);
  ~StreamServer();
  StreamServer(const StreamServer&) = delete;
  StreamServer& operator=(const StreamServer&) = delete;

  // Takes over a bound, listening, non-blocking socket.
  void serve(UniqueFd listening);
  void stop();

  void send(Conn& conn, std::string_view data);
  // Marks the deadline as restarted (a request was handled on an idle-timeout connection).
  void touch(Conn& conn);

  size_t connections() const { return conns_.size(); }
  uint64_t refused() const { return refused_; }
  uint64_t timed_out() const { return timed_out_; }
  uint64_t accepted() const { return accepted_; }

 private:
  void on_accept();
  void on_event(uint64_t id, uint32_t events);
  void flush(Conn& conn);
  void close_conn(uint64_t id);
  void sweep();

  EventLoop& loop_;
  Options options_;
  OnInput on_input_;
  UniqueFd listen_;
  std::map<uint64_t, std::unique_ptr<Conn>> conns_;
  uint64_t next_id_ = 1;
  uint64_t refused_ = 0;
  uint64_t timed_out_ = 0;
  uint64_t accepted_ = 0;
  uint64_t sweep_timer_ = 0;
  bool stopped_ = false;
};

}  // namespace triage::agent
