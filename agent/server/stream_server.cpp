#include "agent/server/stream_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>
#include <vector>

#include <spdlog/spdlog.h>

#include "common/time_util.h"

namespace triage::agent {

namespace {

// Reading stops while this much of a client's answers waits unread: a client that sends requests
// but does not read the answers is held back by its own backlog and then cut off as slow.
constexpr size_t kPauseReadingAt = size_t{256} * 1024;
// Bytes read from one client per readiness event, and connections accepted per event on the
// listener: enough for any request, small enough that one busy peer leaves the loop to the others.
constexpr size_t kReadPerEvent = size_t{64} * 1024;
constexpr int kAcceptsPerEvent = 64;
// The time one turn of the loop spends on pipelined requests waiting for their turn.
constexpr int64_t kInputTurnUsec = 5000;

// The remote address with and without its port.
std::pair<std::string, std::string> describe_peer(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    sockaddr_in sin{};
    std::memcpy(&sin, &ss, sizeof sin);
    ::inet_ntop(AF_INET, &sin.sin_addr, buf, sizeof buf);
    return {std::string(buf) + ":" + std::to_string(ntohs(sin.sin_port)), buf};
  }
  if (ss.ss_family == AF_INET6) {
    sockaddr_in6 sin6{};
    std::memcpy(&sin6, &ss, sizeof sin6);
    ::inet_ntop(AF_INET6, &sin6.sin6_addr, buf, sizeof buf);
    return {std::string("[").append(buf).append("]:").append(std::to_string(ntohs(sin6.sin6_port))),
            buf};
  }
  return {"local", "local"};
}

UniqueFd open_spare() {
  return UniqueFd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
}

}  // namespace

StreamServer::StreamServer(EventLoop& loop, Options options, OnInput on_input, Policy policy)
    : loop_(loop),
      options_(std::move(options)),
      on_input_(std::move(on_input)),
      policy_(std::move(policy)),
      shares_(options_.shares) {}

StreamServer::~StreamServer() {
  stop();
}

void StreamServer::serve(UniqueFd listening) {
  listen_ = std::move(listening);
  spare_fd_ = open_spare();
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
  if (input_timer_ != 0) loop_.cancel(input_timer_);
  input_timer_ = 0;
  std::vector<uint64_t> ids;
  for (const auto& [id, c] : conns_)
    ids.push_back(id);
  for (uint64_t id : ids)
    close_conn(id);
}

void StreamServer::on_accept() {
  for (int round = 0; round < kAcceptsPerEvent; ++round) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    const int fd = ::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&ss), &len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_) {
        // Out of descriptors: take the waiting connection with the spare one and close it, so the
        // client hears "no" at once and the listener does not stay readable. accept() fails so
        // whether or not anyone waits: only a connection actually taken is a refusal.
        spare_fd_.reset();
        socklen_t victim_len = sizeof ss;
        const int victim =
            ::accept4(listen_.get(), reinterpret_cast<sockaddr*>(&ss), &victim_len, SOCK_CLOEXEC);
        spare_fd_ = open_spare();
        if (victim < 0) return;
        ::close(victim);
        spdlog::warn("{}: out of file descriptors; refused a connection", options_.name);
        ++refused_["full"];
        continue;
      }
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        spdlog::warn("{}: accept: {}", options_.name, std::strerror(errno));
      }
      return;
    }
    if (options_.send_buffer > 0) {
      (void)::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &options_.send_buffer,
                         sizeof options_.send_buffer);
    }
    auto conn = std::make_unique<Conn>();
    conn->id = next_id_++;
    conn->fd = fd;
    std::tie(conn->remote, conn->address) = describe_peer(ss);
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
    conn->peer = policy_.classify ? policy_.classify(*conn) : SharePeer{conn->address, false};
    ShareRefusal verdict = shares_.admit(conn->peer);
    if (verdict != ShareRefusal::kNone && options_.displace_waiting) {
      if (const uint64_t victim = displaceable(conn->peer, verdict); victim != 0) {
        Conn& v = *conns_.at(victim);
        ++refused_["displaced"];
        if (policy_.refusal) {
          const std::string text = policy_.refusal(v, "displaced");
          (void)!::send(v.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        }
        close_conn(victim);
        verdict = shares_.admit(conn->peer);
      }
    }
    if (verdict != ShareRefusal::kNone) {
      refuse(*conn, verdict == ShareRefusal::kPerPeer ? options_.per_peer_reason : "full");
      continue;
    }
    ++accepted_;
    conn->request_deadline_usec = monotonic_usec() + options_.request_timeout_ms * 1000;
    const uint64_t id = conn->id;
    conns_[id] = std::move(conn);
    loop_.add(fd, EPOLLIN | EPOLLRDHUP, [this, id](uint32_t ev) { on_event(id, ev); });
    // A client that sent its request with its connect (the plugin, a peer agent, a CLI call) is
    // answered now, not one turn of the loop later behind whatever else became ready: under a
    // flood that turn is the whole flood's.
    on_event(id, EPOLLIN);
  }
}

// What the request deadline applies to: nothing answered or being answered yet (half a request
// is still waiting).
bool StreamServer::waiting_for_request(const Conn& c) const {
  return c.out.empty() && !c.close_after_flush && !c.ignore_input &&
         input_pending_.count(c.id) == 0;
}

uint64_t StreamServer::displaceable(const SharePeer& peer, ShareRefusal verdict) const {
  // Oldest first (ids grow with accept order); never a privileged peer's connection.
  uint64_t best = 0;
  size_t best_held = 0;
  for (const auto& [id, c] : conns_) {
    if (c->peer.privileged || !waiting_for_request(*c)) continue;
    if (verdict == ShareRefusal::kPerPeer) {
      if (c->peer.key == peer.key) return id;
      continue;
    }
    const size_t held = shares_.held(c->peer.key);
    if (best == 0 || held > best_held) {
      best = id;
      best_held = held;
    }
  }
  return best;
}

void StreamServer::refuse(Conn& conn, const std::string& reason) {
  ++refused_[reason];
  if (policy_.refusal) {
    // A fresh socket's send buffer takes one short answer whole; what does not fit is not sent.
    const std::string text = policy_.refusal(conn, reason);
    (void)!::send(conn.fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  }
  // What the client already sent (a request line fits) is read away first: closing over unread
  // input would reset the connection, and the client might lose the answer before reading it.
  char buf[4096];
  (void)!::recv(conn.fd, buf, sizeof buf, MSG_DONTWAIT);
  ::shutdown(conn.fd, SHUT_WR);
  ::close(conn.fd);
}

void StreamServer::on_event(uint64_t id, uint32_t events) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if ((events & EPOLLOUT) != 0) {
    flush(c);
    if (conns_.count(id) == 0) return;
  }
  const bool readable = (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) != 0;
  if (readable && !c.ignore_input && !c.peer_done && c.out.size() < kPauseReadingAt &&
      input_pending_.count(id) == 0) {
    char buf[16384];
    bool eof = false;
    size_t got = 0;
    while (got < kReadPerEvent) {
      const ssize_t n = ::read(c.fd, buf, sizeof buf);
      if (n > 0) {
        c.in.append(buf, static_cast<size_t>(n));
        got += static_cast<size_t>(n);
        continue;
      }
      if (n == 0) eof = true;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) eof = true;
      break;
    }
    if (!c.in.empty()) {
      handle_input(id);
      if (conns_.count(id) == 0) return;
    }
    if (eof) {
      // The client is done sending; finish what it asked for (requests waiting for their turn
      // included), then close.
      c.peer_done = true;
      if (input_pending_.count(id) == 0) {
        c.close_after_flush = true;
        c.ignore_input = true;
      }
    }
  } else if (readable && (c.ignore_input || c.peer_done) && (events & (EPOLLHUP | EPOLLERR)) != 0) {
    close_conn(id);  // gone entirely: nobody is left to write to
    return;
  }
  flush(c);
}

void StreamServer::handle_input(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (c.ignore_input || c.in.empty()) return;
  // Answers pile up unread: wait for the client to take them (flush() resumes).
  if (c.out.size() >= kPauseReadingAt) return;
  const bool more = on_input_(c);
  if (conns_.count(id) == 0) return;
  if (more) {
    schedule_input(c);
  } else if (c.peer_done) {
    c.close_after_flush = true;
    c.ignore_input = true;
  }
}

void StreamServer::schedule_input(Conn& conn) {
  if (input_pending_.insert(conn.id).second) input_queue_.push_back(conn.id);
  if (input_timer_ != 0) return;
  input_timer_ = loop_.after(0, [this] {
    input_timer_ = 0;
    // One request for each waiting connection, within a few milliseconds; whoever is left goes
    // first next turn, after the loop has looked at its descriptors again.
    const int64_t until = monotonic_usec() + kInputTurnUsec;
    for (size_t n = input_queue_.size(); n > 0 && !input_queue_.empty() && monotonic_usec() < until;
         --n) {
      const uint64_t id = input_queue_.front();
      input_queue_.pop_front();
      input_pending_.erase(id);
      handle_input(id);
      auto it = conns_.find(id);
      if (it != conns_.end()) flush(*it->second);
    }
    if (!input_queue_.empty() && input_timer_ == 0) {
      input_timer_ = loop_.after(0, [this] {
        input_timer_ = 0;
        if (!input_queue_.empty()) schedule_input(*conns_.at(input_queue_.front()));
      });
    }
  });
}

void StreamServer::send(Conn& conn, std::string_view data) {
  conn.out.append(data);
  if (conn.out.size() > options_.max_output) {
    spdlog::warn("{}: dropping a client that does not read its answers", options_.name);
    ++refused_["slow"];
    conn.out.clear();
    conn.ignore_input = true;
    conn.close_after_flush = true;
  }
}

void StreamServer::touch(Conn& conn) {
  if (options_.idle_timeout)
    conn.request_deadline_usec = monotonic_usec() + options_.request_timeout_ms * 1000;
}

void StreamServer::flush(Conn& c) {
  const size_t before = c.out.size();
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
  // The write deadline runs from the last time the client took something.
  if (c.out.empty()) {
    c.write_deadline_usec = 0;
  } else if (c.write_deadline_usec == 0 || c.out.size() < before) {
    c.write_deadline_usec = monotonic_usec() + options_.write_timeout_ms * 1000;
  }
  // Requests that waited for the backlog to drain.
  if (c.out.size() < kPauseReadingAt && !c.ignore_input && !c.in.empty() &&
      before >= kPauseReadingAt)
    schedule_input(c);
  watch(c);
}

void StreamServer::watch(Conn& c) {
  uint32_t events = 0;
  // No interest in input once it is ignored or while answers pile up: a half-closed or
  // non-reading client would otherwise keep the loop busy with readiness it will not act on.
  // Nor while requests already read wait for their turn: the client's pipeline stays in its own
  // socket buffer, not in the agent's memory.
  if (!c.ignore_input && !c.peer_done && c.out.size() < kPauseReadingAt &&
      input_pending_.count(c.id) == 0)
    events |= EPOLLIN | EPOLLRDHUP;
  if (!c.out.empty()) events |= EPOLLOUT;
  loop_.modify(c.fd, events);
}

void StreamServer::close_conn(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Conn& c = *it->second;
  if (policy_.on_close) policy_.on_close(c);
  shares_.release(c.peer);
  loop_.remove(c.fd);
  ::close(c.fd);
  if (input_pending_.erase(id) != 0)
    input_queue_.erase(std::find(input_queue_.begin(), input_queue_.end(), id));
  conns_.erase(it);
}

void StreamServer::sweep() {
  const int64_t now = monotonic_usec();
  std::vector<std::pair<uint64_t, const char*>> expired;
  for (const auto& [id, c] : conns_) {
    if (!c->out.empty()) {
      if (c->write_deadline_usec != 0 && c->write_deadline_usec <= now)
        expired.emplace_back(id, "slow");
    } else if (!c->close_after_flush && c->request_deadline_usec <= now) {
      expired.emplace_back(id, "idle");
    }
  }
  for (const auto& [id, why] : expired) {
    ++refused_[why];
    close_conn(id);
  }
  sweep_timer_ = loop_.after(200, [this] { sweep(); });
}

}  // namespace triage::agent
