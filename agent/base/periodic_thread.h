// A thread that runs one collector every interval (the D-state sampler, the sysfs counters). Each
// collector has its own thread so that a stuck sysfs read (which costs its read timeout) does not
// delay D-state sampling, and neither ever touches the event loop's state directly.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace triage::agent {

class PeriodicThread {
 public:
  PeriodicThread(std::string name, int64_t interval_ms, std::function<void()> fn);
  ~PeriodicThread();
  PeriodicThread(const PeriodicThread&) = delete;
  PeriodicThread& operator=(const PeriodicThread&) = delete;

  void start();  // runs fn at once, then every interval
  void stop();   // waits for a run in progress to end

 private:
  std::string name_;
  int64_t interval_ms_;
  std::function<void()> fn_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace triage::agent
