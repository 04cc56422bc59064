// A stand-in for slurm-triage-agent's local socket: it listens on a path, records every line it
// receives and answers the way a test wants (acknowledge, refuse, say nothing, hang up, or never
// accept because its backlog is full).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace triage::testing {

class FakeAgent {
 public:
  enum class Behaviour {
    kAck,          // {"ok":true} after `ack_delay`
    kRefuse,       // {"ok":false,"error":"refused by test"}
    kSilent,       // reads the line, never answers, keeps the connection open
    kHangUp,       // reads the line and closes without answering
    kBacklogFull,  // listens with a full backlog and never accepts
  };

  FakeAgent(std::string socket_path, Behaviour behaviour,
            std::chrono::microseconds ack_delay = std::chrono::microseconds(0));

  // Like the real agent, make each line durable before acknowledging it: append it to `path`
  // and fdatasync (benchmarks use this for a realistic acknowledgement latency).
  void set_journal(const std::string& path);
  // What kAck answers instead of {"ok":true} (one line, '\n' added); call before any client.
  void set_answer(const std::string& line);
  ~FakeAgent();
  FakeAgent(const FakeAgent&) = delete;
  FakeAgent& operator=(const FakeAgent&) = delete;

  std::vector<std::string> lines() const;  // every complete line received, without '\n'
  bool wait_for_lines(size_t n, std::chrono::milliseconds timeout) const;
  const std::string& path() const { return path_; }

 private:
  void serve();

  std::string path_;
  Behaviour behaviour_;
  std::chrono::microseconds ack_delay_;
  int listen_fd_ = -1;
  std::atomic<int> journal_fd_{-1};
  std::string answer_ = "{\"ok\":true}\n";
  int wake_[2] = {-1, -1};
  std::vector<int> backlog_fillers_;
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<std::string> lines_;
  std::thread thread_;
};

// Runs an acknowledging agent in a child process that has dropped to `uid` (for testing that the
// plugin refuses a socket served by someone other than root). Returns the child's pid once the
// socket is listening; kill and reap it with stop_foreign_agent.
pid_t start_foreign_agent(const std::string& socket_path, uid_t uid);
void stop_foreign_agent(pid_t pid);

}  // namespace triage::testing
