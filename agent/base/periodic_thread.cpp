#include "agent/base/periodic_thread.h"

#include <spdlog/spdlog.h>

#include "common/text.h"

namespace triage::agent {

PeriodicThread::PeriodicThread(std::string name, int64_t interval_ms, std::function<void()> fn)
    : name_(std::move(name)), interval_ms_(interval_ms), fn_(std::move(fn)) {}

PeriodicThread::~PeriodicThread() {
  stop();
}

void PeriodicThread::start() {
  thread_ = std::thread([this] {
    std::unique_lock<std::mutex> l(mu_);
    while (!stopping_) {
      l.unlock();
      try {
        fn_();
      } catch (const std::exception& e) {
        spdlog::error("{}: {}", name_, log_text(e.what()));
      }
      l.lock();
      cv_.wait_for(l, std::chrono::milliseconds(interval_ms_), [this] { return stopping_; });
    }
  });
}

void PeriodicThread::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace triage::agent
