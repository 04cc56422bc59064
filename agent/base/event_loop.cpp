#include "agent/base/event_loop.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

EventLoop::EventLoop() {
  epoll_.reset(::epoll_create1(EPOLL_CLOEXEC));
  if (!epoll_) throw_errno("epoll_create1", errno);
  wake_.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake_) throw_errno("eventfd", errno);
  add(wake_.get(), EPOLLIN, [this](uint32_t) {
    uint64_t v = 0;
    while (::read(wake_.get(), &v, sizeof v) > 0) {
    }
    drain_posted();
  });
}

void EventLoop::add(int fd, uint32_t events, FdHandler handler) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl add", errno);
  handlers_[fd] = std::make_shared<FdHandler>(std::move(handler));
}

void EventLoop::modify(int fd, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = fd;
  if (::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, fd, &ev) != 0) throw_errno("epoll_ctl mod", errno);
}

void EventLoop::remove(int fd) {
  (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  handlers_.erase(fd);
}

uint64_t EventLoop::after(int64_t delay_ms, Task task) {
  const uint64_t id = next_timer_++;
  const int64_t deadline = monotonic_usec() + delay_ms * 1000;
  timers_[id] = {deadline, std::move(task)};
  timer_order_.emplace(deadline, id);
  return id;
}

void EventLoop::cancel(uint64_t timer_id) {
  auto it = timers_.find(timer_id);
  if (it == timers_.end()) return;
  auto range = timer_order_.equal_range(it->second.first);
  for (auto o = range.first; o != range.second; ++o) {
    if (o->second == timer_id) {
      timer_order_.erase(o);
      break;
    }
  }
  timers_.erase(it);
}

bool EventLoop::post(Task task) {
  {
    std::lock_guard<std::mutex> l(posted_mu_);
    if (stopping_) return false;
    posted_.push_back(std::move(task));
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
  return true;
}

void EventLoop::drain_posted() {
  std::deque<Task> batch;
  {
    std::lock_guard<std::mutex> l(posted_mu_);
    batch.swap(posted_);
  }
  for (Task& t : batch) {
    try {
      t();
    } catch (const std::exception& e) {
      spdlog::error("event loop: posted task failed: {}", log_text(e.what()));
    }
  }
}

int EventLoop::next_timeout_ms() const {
  if (timer_order_.empty()) return 1000;
  const int64_t wait = (timer_order_.begin()->first - monotonic_usec() + 999) / 1000;
  return static_cast<int>(std::clamp<int64_t>(wait, 0, 1000));
}

void EventLoop::fire_timers() {
  const int64_t now = monotonic_usec();
  while (!timer_order_.empty() && timer_order_.begin()->first <= now) {
    const uint64_t id = timer_order_.begin()->second;
    timer_order_.erase(timer_order_.begin());
    auto it = timers_.find(id);
    if (it == timers_.end()) continue;
    Task t = std::move(it->second.second);
    timers_.erase(it);
    t();
  }
}

void EventLoop::run() {
  loop_thread_ = std::this_thread::get_id();
  epoll_event events[64];
  for (;;) {
    {
      std::lock_guard<std::mutex> l(posted_mu_);
      if (stopping_) break;
    }
    const int n = ::epoll_wait(epoll_.get(), events, 64, next_timeout_ms());
    if (n < 0 && errno != EINTR) throw_errno("epoll_wait", errno);
    for (int i = 0; i < n; ++i) {
      auto it = handlers_.find(events[i].data.fd);
      if (it == handlers_.end()) continue;  // removed by an earlier handler in this batch
      std::shared_ptr<FdHandler> h = it->second;
      try {
        (*h)(events[i].events);
      } catch (const std::exception& e) {
        spdlog::error("event loop: handler for fd {} failed: {}",
                      static_cast<int>(events[i].data.fd), e.what());
      }
    }
    try {
      fire_timers();
    } catch (const std::exception& e) {
      spdlog::error("event loop: timer failed: {}", log_text(e.what()));
    }
  }
  drain_posted();
}

void EventLoop::stop() {
  {
    std::lock_guard<std::mutex> l(posted_mu_);
    stopping_ = true;
  }
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof one);
}

bool EventLoop::on_loop_thread() const {
  return std::this_thread::get_id() == loop_thread_.load();
}

}  // namespace triage::agent
