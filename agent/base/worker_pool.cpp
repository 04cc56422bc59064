#include "agent/base/worker_pool.h"

#include <spdlog/spdlog.h>

#include "common/text.h"

namespace triage::agent {

WorkerPool::WorkerPool(size_t threads) {
  for (size_t i = 0; i < threads; ++i) {
    threads_.emplace_back([this] {
      for (;;) {
        std::function<void()> task;
        {
          std::unique_lock<std::mutex> l(mu_);
          cv_.wait(l, [this] { return stopping_ || !queue_.empty(); });
          if (stopping_) return;
          task = std::move(queue_.front());
          queue_.pop_front();
        }
        try {
          task();
        } catch (const std::exception& e) {
          spdlog::error("worker: task failed: {}", log_text(e.what()));
        }
      }
    });
  }
}

WorkerPool::~WorkerPool() {
  stop();
}

bool WorkerPool::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_) return false;
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
    queue_.clear();
  }
  cv_.notify_all();
  for (auto& t : threads_) {
    if (t.joinable()) t.join();
  }
  threads_.clear();
}

}  // namespace triage::agent
