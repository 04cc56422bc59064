// A loopback HTTP server for tests: answers each connection with the next canned response (or
// with a generator), records the requests, and can be told to never answer (timeouts).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace triage::tsdb::testing {

class FakeHttp {
 public:
  using Handler = std::function<std::string(const std::string& request)>;

  explicit FakeHttp(Handler handler) : handler_(std::move(handler)) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::listen(fd_, 16) != 0) {
      throw std::runtime_error("fake http: cannot listen");
    }
    socklen_t len = sizeof a;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { loop(); });
  }
  FakeHttp(const FakeHttp&) = delete;
  FakeHttp& operator=(const FakeHttp&) = delete;
  ~FakeHttp() {
    stop_ = true;
    thread_.join();
    ::close(fd_);
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> l(mu_);
    return requests_;
  }

  // A complete HTTP/1.1 response.
  static std::string response(int status, const std::string& body,
                              const std::string& type = "application/json") {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: " + type +
           "\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n" +
           body;
  }
  // Returned by a handler: keep the connection open and never answer.
  static std::string silence() { return "\x01silence"; }

 private:
  void loop() {
    while (!stop_) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      // cppcheck-suppress nullPointer ; accept4 takes a null address (accept(2)); gnu.cfg is wrong
      const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      std::string req;
      char buf[65536];
      size_t need = std::string::npos;
      while (!stop_) {
        pollfd q{c, POLLIN, 0};
        if (::poll(&q, 1, 100) <= 0) continue;
        const ssize_t n = ::read(c, buf, sizeof buf);
        if (n <= 0) break;
        req.append(buf, static_cast<size_t>(n));
        const auto hdr_end = req.find("\r\n\r\n");
        if (hdr_end == std::string::npos) continue;
        if (need == std::string::npos) {
          need = hdr_end + 4;
          const auto cl = req.find("Content-Length: ");
          if (cl != std::string::npos && cl < hdr_end) need += std::stoul(req.substr(cl + 16));
        }
        if (req.size() >= need) break;
      }
      {
        std::lock_guard<std::mutex> l(mu_);
        requests_.push_back(req);
      }
      const std::string out = handler_(req);
      if (out == silence()) {
        while (!stop_) {
          pollfd q{c, POLLIN, 0};
          if (::poll(&q, 1, 50) > 0 && ::read(c, buf, sizeof buf) <= 0) break;
        }
      } else {
        size_t off = 0;
        while (off < out.size()) {
          const ssize_t n = ::send(c, out.data() + off, out.size() - off, MSG_NOSIGNAL);
          if (n <= 0) break;
          off += static_cast<size_t>(n);
        }
      }
      ::close(c);
    }
  }

  Handler handler_;
  int fd_ = -1;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::string> requests_;
};

}  // namespace triage::tsdb::testing
