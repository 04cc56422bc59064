// One ordinary user flooding the agent (issue 29), shared by the FairShares tests and
// bench/agent_flood: a child process dropped to the user's uid that holds many connections open
// (idle, half-sent, never reading its answers) or reconnects as fast as it can, and the pieces
// that build those connections.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

namespace triage::agent::testing {

// A TCP connection from `source` (a loopback address such as 127.0.0.2) to 127.0.0.1:port, or -1.
int connect_tcp_from(const std::string& source, int port);
// A connection to the Unix socket at `path`, or -1.
int connect_unix(const std::string& path);

// Drops the calling process (a forked child) to `uid` and its group (nogroup for nobody); exits
// with 99 when it cannot.
void drop_to(uid_t uid);

// Sends what fits without waiting and ignores the rest: a flooder does not care.
void send_some(int fd, const std::string& data);

// What `fd` sends until EOF, or up to its first newline with `stop_at_newline`; each wait for more
// at most 10 s.
std::string read_answer(int fd, bool stop_at_newline);

// A child process, dropped to `uid`, that keeps `connections` connections open until end(): every
// connection the agent closes (refused at once, cut off as idle or slow) is opened again, about a
// thousand a second. `open_one(i)` connects and sends what connection i sends (-1: failed).
class HoldingFlood {
 public:
  HoldingFlood(uid_t uid, int connections, const std::function<int(int)>& open_one);
  ~HoldingFlood() { end(); }
  HoldingFlood(const HoldingFlood&) = delete;
  HoldingFlood& operator=(const HoldingFlood&) = delete;

  // Whether the child held its first `connections` attempts within 30 s.
  bool started() const { return started_; }
  void end();

 private:
  pid_t pid_ = -1;
  int stop_ = -1;
  bool started_ = false;
};

// A child process, dropped to `uid`, that connects to the socket at `path` as fast as it can, sends
// nothing or a junk line, closes, and connects again, until this goes away.
class ReconnectFlood {
 public:
  ReconnectFlood(uid_t uid, const std::string& path);
  ~ReconnectFlood() { end(); }
  ReconnectFlood(const ReconnectFlood&) = delete;
  ReconnectFlood& operator=(const ReconnectFlood&) = delete;
  void end();

 private:
  pid_t pid_ = -1;
  int stop_ = -1;
};

// One of a socket flooder's connections to `path`: idle (i % 3 == 0), half a line (1), or a
// pipeline of 2,000 requests whose answers are never read (2).
int socket_flood_connection(const std::string& path, int i);

// The HTTP flood's address: another loopback address than the 127.0.0.1 peers use by default.
inline constexpr const char* kFloodAddress = "127.0.0.2";

// One of an HTTP flooder's connections from `source` to 127.0.0.1:port with a one-byte receive
// buffer: idle (i % 3 == 0), half a /metrics request (1), or a whole one whose answer is never
// read (2).
int http_flood_connection(const std::string& source, int port, int i);

}  // namespace triage::agent::testing
