#include "spank/agent_link.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include "spank/slice.h"

namespace triage::spank {

namespace {

int64_t now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void set_why(char* why, size_t len, const char* what, int err) noexcept {
  if (why == nullptr || len == 0) return;
  if (err != 0) {
    (void)std::snprintf(why, len, "%s: %s", what, std::strerror(err));
  } else {
    (void)std::snprintf(why, len, "%s", what);
  }
}

class Fd {
 public:
  explicit Fd(int fd) noexcept : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const noexcept { return fd_; }

 private:
  int fd_;
};

// Waits for `events` on `fd` until `deadline` (monotonic ms). Returns false on timeout or error.
bool wait_for(int fd, short events, int64_t deadline, int* err) noexcept {
  for (;;) {
    const int64_t left = deadline - now_ms();
    if (left <= 0) {
      *err = ETIMEDOUT;
      return false;
    }
    pollfd p{fd, events, 0};
    const int r = poll(&p, 1, static_cast<int>(left));
    if (r > 0) return true;
    if (r == 0) {
      *err = ETIMEDOUT;
      return false;
    }
    if (errno != EINTR) {
      *err = errno;
      return false;
    }
  }
}

}  // namespace

// The acknowledgement is one JSON object; a plain look for "ok" followed by true is enough to
// tell {"ok":true,...} from {"ok":false,"error":...} without a JSON parser in slurmstepd.
bool reply_is_ok(std::string_view reply) noexcept {
  const size_t k = reply.find("\"ok\"");
  if (k == std::string_view::npos) return false;
  size_t i = k + 4;
  while (i < reply.size() && (reply[i] == ' ' || reply[i] == '\t'))
    ++i;
  if (i >= reply.size() || reply[i] != ':') return false;
  ++i;
  while (i < reply.size() && (reply[i] == ' ' || reply[i] == '\t'))
    ++i;
  return slice(reply, i, 4) == "true";
}

namespace {

// One exchange with whoever listens at `socket_path`, until `deadline`. `*reached` says whether
// the agent was reached (connected, the listener root or ourselves), whatever happened next.
bool exchange_at(const char* socket_path, int64_t deadline, std::string_view line, char* reply,
                 size_t reply_len, std::string_view* answer, char* why, size_t why_len,
                 bool* reached) noexcept {
  *reached = false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t plen = std::strlen(socket_path);
  if (plen >= sizeof(addr.sun_path)) {
    set_why(why, why_len, "agent socket path is too long", 0);
    return false;
  }
  std::memcpy(addr.sun_path, socket_path, plen + 1);

  Fd sock(socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (sock.get() < 0) {
    set_why(why, why_len, "socket", errno);
    return false;
  }
  // sockaddr_un is what connect() is declared to take a sockaddr view of.
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  if (connect(sock.get(), reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    // On a Unix socket EAGAIN means the agent's backlog is full: waiting would only delay the job.
    if (errno != EINPROGRESS) {
      set_why(why, why_len, "connect to agent", errno);
      return false;
    }
    int err = 0;
    if (!wait_for(sock.get(), POLLOUT, deadline, &err)) {
      set_why(why, why_len, "connect to agent", err);
      return false;
    }
    socklen_t elen = sizeof(err);
    if (getsockopt(sock.get(), SOL_SOCKET, SO_ERROR, &err, &elen) != 0 || err != 0) {
      set_why(why, why_len, "connect to agent", err != 0 ? err : errno);
      return false;
    }
  }

  // Whoever listens must be root (or whoever we run as): a socket left by anyone else is not the
  // agent, whatever its path says.
  ucred peer{};
  socklen_t clen = sizeof(peer);
  if (getsockopt(sock.get(), SOL_SOCKET, SO_PEERCRED, &peer, &clen) != 0) {
    set_why(why, why_len, "SO_PEERCRED", errno);
    return false;
  }
  if (peer.uid != 0 && peer.uid != geteuid()) {
    char msg[128];
    (void)std::snprintf(msg, sizeof(msg), "agent socket is owned by uid %u, not root",
                        static_cast<unsigned>(peer.uid));
    set_why(why, why_len, msg, 0);
    return false;
  }
  *reached = true;

  size_t sent = 0;
  while (sent < line.size()) {
    const ssize_t n = send(sock.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      int err = 0;
      if (!wait_for(sock.get(), POLLOUT, deadline, &err)) {
        set_why(why, why_len, "send to agent", err);
        return false;
      }
      continue;
    }
    set_why(why, why_len, "send to agent", n < 0 ? errno : EPIPE);
    return false;
  }

  size_t got = 0;
  for (;;) {
    int err = 0;
    if (!wait_for(sock.get(), POLLIN, deadline, &err)) {
      set_why(why, why_len, "waiting for the agent's answer", err);
      return false;
    }
    const ssize_t n = recv(sock.get(), reply + got, reply_len - got, 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)) continue;
    if (n <= 0) {
      set_why(why, why_len,
              n == 0 ? "the agent closed the connection without an answer"
                     : "reading the agent's answer",
              n == 0 ? 0 : errno);
      return false;
    }
    got += static_cast<size_t>(n);
    const std::string_view text(reply, got);
    const size_t nl = text.find('\n');
    if (nl != std::string_view::npos) {
      *answer = slice(text, 0, nl);
      return true;
    }
    if (got == reply_len) {
      set_why(why, why_len, "the agent's answer is too long", 0);
      return false;
    }
  }
}

}  // namespace

bool exchange_with_agent(const char* socket_path, int timeout_ms, std::string_view line,
                         char* reply, size_t reply_len, std::string_view* answer, char* why,
                         size_t why_len) noexcept {
  const int64_t deadline = now_ms() + timeout_ms;
  bool reached = false;
  // The root socket first (a user's connection flood cannot queue ahead of us there); when it
  // is not there or not the agent's (an older agent, a path too long for it), the shared one
  // with the time left. An agent reached there that did not answer is not asked twice.
  char root_path[kMaxPathBytes + kRootSocketSuffix.size()];
  const size_t plen = std::strlen(socket_path);
  if (plen + kRootSocketSuffix.size() < sizeof(root_path)) {
    std::memcpy(root_path, socket_path, plen);
    std::memcpy(root_path + plen, kRootSocketSuffix.data(), kRootSocketSuffix.size());
    root_path[plen + kRootSocketSuffix.size()] = '\0';
    if (exchange_at(root_path, deadline, line, reply, reply_len, answer, why, why_len, &reached))
      return true;
    if (reached) return false;
  }
  return exchange_at(socket_path, deadline, line, reply, reply_len, answer, why, why_len, &reached);
}

bool send_to_agent(const char* socket_path, int timeout_ms, std::string_view line, char* why,
                   size_t why_len) noexcept {
  char reply[1024];
  std::string_view answer;
  if (!exchange_with_agent(socket_path, timeout_ms, line, reply, sizeof(reply), &answer, why,
                           why_len)) {
    return false;
  }
  if (reply_is_ok(answer)) return true;
  char msg[200];
  (void)std::snprintf(msg, sizeof(msg), "the agent refused the message: %.*s",
                      static_cast<int>(answer.size() > 150 ? 150 : answer.size()), answer.data());
  set_why(why, why_len, msg, 0);
  return false;
}

bool write_to_inbox(const char* inbox_dir, std::string_view msg_id, std::string_view line,
                    char* why, size_t why_len) noexcept {
  int dfd = open(inbox_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0 && errno == ENOENT) {
    // Root-only from the start; the agent (or the package) normally made it already.
    if (mkdir(inbox_dir, 0700) == 0 || errno == EEXIST) {
      dfd = open(inbox_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
  }
  if (dfd < 0) {
    set_why(why, why_len, "open inbox", errno);
    return false;
  }
  Fd dir(dfd);
  struct stat st {};
  if (fstat(dir.get(), &st) != 0) {
    set_why(why, why_len, "stat inbox", errno);
    return false;
  }
  if (st.st_uid != geteuid() || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    set_why(why, why_len, "inbox is not private to root (owner or group/other write bits)", 0);
    return false;
  }

  char name[256];
  size_t n = 0;
  for (const char c : msg_id) {
    if (n + sizeof(".json") >= sizeof(name)) break;
    const bool safe = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '.' || c == '_' || c == '-';
    name[n++] = safe ? c : '_';
  }
  if (n == 0) name[n++] = '_';
  if (name[0] == '.') name[0] = '_';  // dot names are the temporaries the agent skips
  std::memcpy(name + n, ".json", sizeof(".json"));
  char tmp[sizeof(name) + 8];
  (void)std::snprintf(tmp, sizeof(tmp), ".%s.tmp", name);

  Fd file(openat(dir.get(), tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (file.get() < 0) {
    set_why(why, why_len, "create inbox file", errno);
    return false;
  }
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t w = write(file.get(), line.data() + done, line.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      set_why(why, why_len, "write inbox file", w < 0 ? errno : ENOSPC);
      unlinkat(dir.get(), tmp, 0);
      return false;
    }
    done += static_cast<size_t>(w);
  }
  // No fsync: it would cost the epilog milliseconds on every job the agent misses. The rename
  // makes the file appear whole or not at all; only a node crash within the file system's commit
  // interval could lose it, and the agent refuses a file it cannot parse.
  if (renameat(dir.get(), tmp, dir.get(), name) != 0) {
    set_why(why, why_len, "commit inbox file", errno);
    unlinkat(dir.get(), tmp, 0);
    return false;
  }
  return true;
}

DeliveryReport deliver(const PluginConfig& cfg, std::string_view msg_id,
                       std::string_view line) noexcept {
  DeliveryReport r;
  if (send_to_agent(cfg.socket_path, cfg.timeout_ms, line, r.why, sizeof(r.why))) {
    r.how = Delivery::kAcked;
    return r;
  }
  char inbox_why[256] = {};
  if (write_to_inbox(cfg.inbox_dir, msg_id, line, inbox_why, sizeof(inbox_why))) {
    r.how = Delivery::kInbox;
    return r;
  }
  const size_t used = std::strlen(r.why);
  (void)std::snprintf(r.why + used, sizeof(r.why) - used, "; inbox %s: %s", cfg.inbox_dir,
                      inbox_why);
  r.how = Delivery::kLost;
  return r;
}

}  // namespace triage::spank
