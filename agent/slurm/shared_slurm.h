// The one SlurmClient of the agent, shared by the job-end pipeline and the drain controller on the
// worker threads. libslurm calls go one at a time.
#pragma once

#include <memory>
#include <mutex>
#include <utility>

#include "agent/slurm/slurm_client.h"

namespace triage::agent {

class SharedSlurm {
 public:
  explicit SharedSlurm(std::unique_ptr<SlurmClient> client) : client_(std::move(client)) {}

  // Whether there is a client at all (fixed at construction, so no lock is needed).
  bool present() const { return client_ != nullptr; }

  // Runs fn(client) holding the lock; `client` is null when there is no client.
  template <typename Fn>
  auto with(Fn&& fn) {
    std::lock_guard<std::mutex> l(mu_);
    return std::forward<Fn>(fn)(client_.get());
  }

 private:
  std::unique_ptr<SlurmClient> client_;
  std::mutex mu_;  // libslurm calls, one at a time
};

}  // namespace triage::agent
