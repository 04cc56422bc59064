// A single-threaded epoll loop. All of the agent's state lives on the loop thread; other threads
// (collectors, kernel reader, evidence gathering) hand work to it with post().
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "common/safe_io.h"

namespace triage::agent {

class EventLoop {
 public:
  using FdHandler = std::function<void(uint32_t events)>;
  using Task = std::function<void()>;

  EventLoop();
  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Watches `fd` for `events` (EPOLLIN, EPOLLOUT, ...). The handler may remove or modify any fd.
  void add(int fd, uint32_t events, FdHandler handler);
  void modify(int fd, uint32_t events);
  void remove(int fd);

  // Runs `task` on the loop thread after `delay_ms`; returns an id for cancel().
  uint64_t after(int64_t delay_ms, Task task);
  void cancel(uint64_t timer_id);

  // Thread-safe: runs `task` on the loop thread soon. False (and the task is dropped) once the
  // loop is stopping.
  bool post(Task task);

  // Runs until stop(); stop() is thread-safe.
  void run();
  void stop();
  bool on_loop_thread() const;

 private:
  void drain_posted();
  int next_timeout_ms() const;
  void fire_timers();

  UniqueFd epoll_;
  UniqueFd wake_;  // eventfd
  std::unordered_map<int, std::shared_ptr<FdHandler>> handlers_;
  std::multimap<int64_t, uint64_t> timer_order_;  // deadline (monotonic usec) -> id
  std::unordered_map<uint64_t, std::pair<int64_t, Task>> timers_;
  uint64_t next_timer_ = 1;
  std::mutex posted_mu_;
  std::deque<Task> posted_;
  bool stopping_ = false;  // guarded by posted_mu_
  // Set by run() on the loop thread, read by any thread that asks on_loop_thread().
  std::atomic<std::thread::id> loop_thread_;
};

}  // namespace triage::agent
