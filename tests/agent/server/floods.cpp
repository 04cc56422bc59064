#include "tests/agent/server/floods.h"

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <vector>

namespace triage::agent::testing {

int connect_tcp_from(const std::string& source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in from{};
  from.sin_family = AF_INET;
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::inet_pton(AF_INET, source.c_str(), &from.sin_addr) != 1 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0 ||
      ::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

void drop_to(uid_t uid) {
  const gid_t gid = uid == 65534 ? 65534 : static_cast<gid_t>(uid);  // nobody's group: nogroup
  if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    ::_exit(99);
  }
}

std::string read_answer(int fd, bool stop_at_newline) {
  std::string out;
  char buf[65536];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 10000) <= 0) break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (stop_at_newline && out.find('\n') != std::string::npos) break;
  }
  return out;
}

void send_some(int fd, const std::string& data) {
  (void)!::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

namespace {

void hold(int connections, const std::function<int(int)>& open_one, int ready, int stop) {
  std::vector<int> fds(static_cast<size_t>(connections), -1);
  for (int i = 0; i < connections; ++i)
    fds[static_cast<size_t>(i)] = open_one(i);
  (void)!::write(ready, "r", 1);
  ::close(ready);
  for (;;) {
    pollfd s{stop, POLLIN, 0};
    if (::poll(&s, 1, 0) != 0) return;  // the parent is done (its end closed)
    // Whatever the agent closed is opened again, about a thousand a second: the pressure never
    // lets up. (Faster than the agent refuses, a flooder would queue in the listener's backlog
    // ahead of everybody else; docs/security.md, "Fair shares", and ReconnectFlood.)
    for (int i = 0; i < connections; ++i) {
      int& fd = fds[static_cast<size_t>(i)];
      if (fd >= 0) {
        pollfd p{fd, POLLRDHUP, 0};
        if (::poll(&p, 1, 0) == 0) continue;
        ::close(fd);
      }
      fd = open_one(i);
      ::usleep(1000);
    }
    ::usleep(1000);
  }
}

}  // namespace

HoldingFlood::HoldingFlood(uid_t uid, int connections, const std::function<int(int)>& open_one) {
  int ready[2];
  int stop[2];
  if (::pipe(ready) != 0) return;
  if (::pipe(stop) != 0) {
    ::close(ready[0]);
    ::close(ready[1]);
    return;
  }
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(ready[0]);
    ::close(stop[1]);
    drop_to(uid);
    hold(connections, open_one, ready[1], stop[0]);
    ::_exit(0);
  }
  ::close(ready[1]);
  ::close(stop[0]);
  stop_ = stop[1];
  // The child says it holds its first `connections` attempts.
  char c = 0;
  pollfd p{ready[0], POLLIN, 0};
  started_ = ::poll(&p, 1, 30000) == 1 && ::read(ready[0], &c, 1) == 1;
  ::close(ready[0]);
}

void HoldingFlood::end() {
  if (pid_ <= 0) return;
  ::close(stop_);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

ReconnectFlood::ReconnectFlood(uid_t uid, const std::string& path) {
  int stop[2];
  if (::pipe(stop) != 0) return;
  pid_ = ::fork();
  if (pid_ == 0) {
    ::close(stop[1]);
    drop_to(uid);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    for (uint64_t i = 0;; ++i) {
      if (i % 64 == 0) {
        pollfd s{stop[0], POLLIN, 0};
        if (::poll(&s, 1, 0) != 0) ::_exit(0);
      }
      const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 && i % 2 == 1)
        send_some(fd, "junk\n");
      ::close(fd);
    }
  }
  ::close(stop[0]);
  stop_ = stop[1];
}

void ReconnectFlood::end() {
  if (pid_ <= 0) return;
  ::close(stop_);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

int socket_flood_connection(const std::string& path, int i) {
  const int fd = connect_unix(path);
  if (fd < 0) return -1;
  if (i % 3 == 1) send_some(fd, R"({"op":"health","pad":")");
  if (i % 3 == 2) {
    std::string pipeline;
    for (int k = 0; k < 2000; ++k)
      pipeline += "{\"op\":\"health\"}\n";
    send_some(fd, pipeline);
  }
  return fd;
}

int http_flood_connection(const std::string& source, int port, int i) {
  const int fd = connect_tcp_from(source, port);
  if (fd < 0) return -1;
  // A tiny receive buffer, so that an unread answer stays waiting in the agent.
  const int small = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  if (i % 3 == 1) send_some(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  if (i % 3 == 2) send_some(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  return fd;
}

}  // namespace triage::agent::testing
