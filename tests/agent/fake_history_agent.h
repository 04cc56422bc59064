// A stand-in for an agent's HTTP API that serves one GET /v1/history answer (to requests that carry
// a munge credential) from its own thread on 127.0.0.1, for `nodes --suspects` tests and benches.
#pragma once

#include <atomic>
#include <string>
#include <thread>

namespace triage::agent::testing {

class FakeHistoryAgent {
 public:
  explicit FakeHistoryAgent(std::string body);
  ~FakeHistoryAgent();
  FakeHistoryAgent(const FakeHistoryAgent&) = delete;
  FakeHistoryAgent& operator=(const FakeHistoryAgent&) = delete;

  int port() const { return port_; }
  int requests() const { return requests_.load(); }

 private:
  void serve();
  void answer(int fd);

  std::string body_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> requests_{0};
  std::thread thread_;
};

}  // namespace triage::agent::testing
