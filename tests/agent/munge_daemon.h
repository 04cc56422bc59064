// munged on a private socket and key, for the agent's tests and bench/agent_flood: what a peer's
// munge-authenticated request needs, without the machine's own munged.
#pragma once

#include <sys/types.h>

#include <string>

namespace triage::agent::testing {

// munged started in `dir` (its key, socket, pid, log and seed files there) and answering within
// 10 s, killed (by pid) when this goes away.
class MungeDaemon {
 public:
  explicit MungeDaemon(const std::string& dir);
  ~MungeDaemon();
  MungeDaemon(const MungeDaemon&) = delete;
  MungeDaemon& operator=(const MungeDaemon&) = delete;
  const std::string& socket() const { return socket_; }
  bool ok() const { return pid_ > 0; }

 private:
  std::string socket_;
  pid_t pid_ = -1;
};

}  // namespace triage::agent::testing
