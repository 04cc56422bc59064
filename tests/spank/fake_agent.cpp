#include "tests/spank/fake_agent.h"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>
#include <stdexcept>
#include <system_error>

namespace triage::testing {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// No exceptions and no allocation: also used in a forked child.
int listen_on_raw(const char* path, int backlog) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const size_t len = std::strlen(path);
  if (len >= sizeof(addr.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  std::memcpy(addr.sun_path, path, len + 1);
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  unlink(path);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  if (bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(fd, backlog) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

int listen_on(const std::string& path, int backlog) {
  const int fd = listen_on_raw(path.c_str(), backlog);
  if (fd < 0) fail("listen on " + path);
  return fd;
}

void write_all(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    const ssize_t n = send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

FakeAgent::FakeAgent(std::string socket_path, Behaviour behaviour,
                     std::chrono::microseconds ack_delay)
    : path_(std::move(socket_path)), behaviour_(behaviour), ack_delay_(ack_delay) {
  listen_fd_ = listen_on(path_, behaviour_ == Behaviour::kBacklogFull ? 0 : 64);
  if (behaviour_ == Behaviour::kBacklogFull) {
    // Fill the queue with connections nobody accepts; the next connect gets EAGAIN.
    for (int i = 0; i < 4096; ++i) {
      const int c = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::memcpy(addr.sun_path, path_.c_str(), path_.size() + 1);
      // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
      if (connect(c, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
        close(c);
        if (errno == EAGAIN) return;
        fail("filling the backlog");
      }
      backlog_fillers_.push_back(c);
    }
    throw std::runtime_error("the backlog never filled up");
  }
  if (pipe2(wake_, O_CLOEXEC) != 0) fail("pipe");
  thread_ = std::thread([this] { serve(); });
}

void FakeAgent::set_answer(const std::string& line) {
  answer_ = line + "\n";
}

void FakeAgent::set_journal(const std::string& path) {
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0) fail("open " + path);
  journal_fd_.store(fd);
}

FakeAgent::~FakeAgent() {
  if (thread_.joinable()) {
    const char c = 'x';
    (void)!write(wake_[1], &c, 1);
    thread_.join();
  }
  for (const int fd : backlog_fillers_)
    close(fd);
  if (journal_fd_.load() >= 0) close(journal_fd_.load());
  for (const int fd : wake_) {
    if (fd >= 0) close(fd);
  }
  if (listen_fd_ >= 0) close(listen_fd_);
  unlink(path_.c_str());
}

void FakeAgent::serve() {
  std::map<int, std::string> clients;  // fd -> bytes not yet forming a line
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& [fd, _] : clients)
      fds.push_back({fd, POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if ((fds[1].revents & POLLIN) != 0) {
      // cppcheck-suppress nullPointer ; accept4 takes a null address (accept(2)); gnu.cfg is wrong
      const int c = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) clients[c] = "";
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      const int fd = fds[i].fd;
      char buf[4096];
      const ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) {
        close(fd);
        clients.erase(fd);
        continue;
      }
      std::string& pending = clients[fd];
      pending.append(buf, static_cast<size_t>(n));
      size_t nl = 0;
      bool hang_up = false;
      while ((nl = pending.find('\n')) != std::string::npos) {
        const std::string line = pending.substr(0, nl);
        {
          const std::lock_guard<std::mutex> lock(mu_);
          lines_.push_back(line);
        }
        cv_.notify_all();
        pending.erase(0, nl + 1);
        switch (behaviour_) {
          case Behaviour::kAck:
            if (const int jfd = journal_fd_.load(); jfd >= 0) {
              const std::string rec = line + "\n";
              if (::write(jfd, rec.data(), rec.size()) > 0) fdatasync(jfd);
            }
            if (ack_delay_.count() > 0) std::this_thread::sleep_for(ack_delay_);
            write_all(fd, answer_);
            break;
          case Behaviour::kRefuse:
            write_all(fd, "{\"ok\":false,\"error\":\"refused by test\"}\n");
            break;
          case Behaviour::kHangUp:
            hang_up = true;
            break;
          case Behaviour::kSilent:
          case Behaviour::kBacklogFull:
            break;
        }
      }
      if (hang_up) {
        close(fd);
        clients.erase(fd);
      }
    }
  }
  for (const auto& [fd, _] : clients)
    close(fd);
}

std::vector<std::string> FakeAgent::lines() const {
  const std::lock_guard<std::mutex> lock(mu_);
  return lines_;
}

bool FakeAgent::wait_for_lines(size_t n, std::chrono::milliseconds timeout) const {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return lines_.size() >= n; });
}

pid_t start_foreign_agent(const std::string& socket_path, uid_t uid) {
  int ready[2];
  if (pipe2(ready, O_CLOEXEC) != 0) fail("pipe");
  const pid_t pid = fork();
  if (pid < 0) fail("fork");
  if (pid == 0) {
    close(ready[0]);
    if (setgroups(0, nullptr) != 0 || setresgid(uid, uid, uid) != 0 ||
        setresuid(uid, uid, uid) != 0) {
      _exit(2);
    }
    const int fd = listen_on_raw(socket_path.c_str(), 16);
    if (fd < 0) _exit(3);
    (void)!write(ready[1], "r", 1);
    close(ready[1]);
    for (;;) {
      const int c = accept(fd, nullptr, nullptr);
      if (c < 0) continue;
      char buf[4096];
      ssize_t n = 0;
      while ((n = recv(c, buf, sizeof(buf), 0)) > 0) {
        if (std::memchr(buf, '\n', static_cast<size_t>(n)) != nullptr) break;
      }
      write_all(c, "{\"ok\":true}\n");
      close(c);
    }
  }
  close(ready[1]);
  char c = 0;
  const ssize_t n = read(ready[0], &c, 1);
  close(ready[0]);
  if (n != 1) {
    stop_foreign_agent(pid);
    throw std::runtime_error("the foreign agent did not start");
  }
  return pid;
}

void stop_foreign_agent(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
}

}  // namespace triage::testing
