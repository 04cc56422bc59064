#include "agent/server/stream_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/time_util.h"

namespace triage::agent {

namespace {

std::string describe_peer(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    sockaddr_in sin{};
    std::memcpy(&sin, &ss, sizeof sin);
    ::inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof buf);
    return std::string(buf) + ":" + std::to_string(ntohs(sin.sin_port));
  }
  if (ss.ss_family == AF_INET6) {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, &ss, sizeof sin6);
    ::inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof buf);
    return std::string("[").append(buf).append("]:").append(std::to_string(ntohs(sin6.sin6_port)));
  }
  return "local";
}

}  // namespace

StreamServer::StreamServer(EventLoop& loop, Options options, OnInput on_input)
    : loop_(loop), options_(std::move(options)), on_input_(std::move(on_input)) {}

StreamServer::~StreamServer() {
  stop();
}

void StreamServer::serve(UniqueFd listening) {
  listen_ = std::move(listening);
  loop_.add(listen_.get(), EPOLLIN, [this](uint32_t) { on_accept(); });
  sweep_timer_ = loop_.after(200, [this] { sweep(); });
}

void StreamServer::stop() {
  if (stopped_) return;
  stopped_ = true;
  if (listen_) {
    loop_.remove(listen_.get());
    listen_.reset();
  }
  if (sweep_timer_ != 0) loop_.cancel(sweep_timer_);
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_)
    ids.push_back(id);
  for (uint64_t id : ids)
    close_conn(id);
}

void StreamServer::on_accept() {
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = ::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        spdlog::warn("{}: accept: {}", options_.name, std::strerror(errno));
      }
      return;
    }
    if (conns_.size() >= options_.max_connections) {
      ++refused_;
      ::close(fd);
      continue;
    }
    ++accepted_;
    auto conn = std::make_unique<Conn>();
    conn->id = next_id_++;
    conn->fd = fd;
    conn->deadline_usec = monotonic_usec() + options_.timeout_ms * 1000;
    conn->remote = describe_peer(ss);
    if (ss.ss_family == AF_UNIX) {
      ucred cred{};
      socklen_t cl = sizeof cred;
      if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &cl) == 0) {
        conn->has_cred = true;
        conn->pid = cred.pid;
        conn->uid = cred.uid;
        conn->gid = cred.gid;
      }
    }
    const uint64_t id = conn->id;
    conns_[id] = std::move(conn);
    loop_.add(fd, EPOLLIN | EPOLLRDHUP, [this, id](uint32_t ev) { on_event(id, ev); });
  }
}

void StreamServer::on_event(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if ((events & EPOLLOUT) != 0) {
    flush(c);
    if (conns_.count(id) == 0) return;
  }
  if ((events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0) {
    char buf[16384];
    bool eof = false;
    for (;;) {
      const ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n > 0) {
        if (!c.ignore_input) c.in.append(buf, static_cast<size_t>(n));
        // Never buffer more than one read's worth beyond what the protocol lets through; the
        // handler rejects oversized requests as soon as it sees them.
        if (c.in.size() > (4u << 20)) break;
        continue;
      }
      if (n == 0) eof = true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
      break;
    }
    if (!c.in.empty() && !c.ignore_input) on_input_(c);
    if (conns_.count(id) == 0) return;
    if (eof) {
      // The client is done sending; finish writing what it asked for, then close.
      c.close_after_flush = true;
      c.ignore_input = true;
    }
  }
  flush(c);
}

void StreamServer::send(Conn& conn, std::string_view data) {
  conn.out.append(data);
  if (conn.out.size() > options_.max_output) {
    spdlog::warn("{}: dropping a client that does not read its answers", options_.name);
    conn.out.clear();
    conn.close_after_flush = true;
  }
}

void StreamServer::touch(Conn& conn) {
  if (options_.idle_timeout) conn.deadline_usec = monotonic_usec() + options_.timeout_ms * 1000;
}

void StreamServer::flush(Conn& c) {
  while (!c.out.empty()) {
    const ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
    if (n > 0) {
      c.out.erase(0, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    close_conn(c.id);
    return;
  }
  if (c.out.empty() && c.close_after_flush) {
    close_conn(c.id);
    return;
  }
  loop_.modify(c.fd, EPOLLIN | EPOLLRDHUP | (c.out.empty() ? 0u : static_cast<uint32_t>(EPOLLOUT)));
}

void StreamServer::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  loop_.remove(it->second->fd);
  ::close(it->second->fd);
  conns_.erase(it);
}

void StreamServer::sweep() {
  const int64_t now = monotonic_usec();
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c->deadline_usec <= now) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    ++timed_out_;
    close_conn(id);
  }
  sweep_timer_ = loop_.after(200, [this] { sweep(); });
}

}  // namespace triage::agent
