// A fixed set of threads for the agent's blocking work (libslurm calls, peer fetches), so that
// the event loop never waits on the network or on slurmctld.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace triage::agent {

class WorkerPool {
 public:
  explicit WorkerPool(size_t threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  // False once the pool is stopping.
  bool submit(std::function<void()> task);
  // Finishes the running tasks, drops queued ones, joins.
  void stop();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace triage::agent
