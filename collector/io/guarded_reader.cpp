#include "collector/io/guarded_reader.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::collector {

// State shared by the reader and all of its workers, including the abandoned ones, which outlive
// any particular call and possibly the reader itself.
struct GuardShared {
  std::mutex mu;
  std::map<std::string, int64_t> stuck;  // key -> wall clock when the stuck read began
  size_t abandoned_alive = 0;
};

// Lock order: GuardWorker::mu before GuardShared::mu.
struct GuardWorker {
  std::mutex mu;
  std::condition_variable cv;
  std::function<void()> job;
  bool has_job = false;
  bool job_done = false;
  bool abandoned = false;
  bool quit = false;
  std::string current_key;
  int64_t current_start_mono = 0;  // 0 while not inside a read
  int64_t current_start_wall = 0;
  std::thread thread;
};

bool GuardedReader::Reads::abandoned() const {
  std::lock_guard<std::mutex> l(worker_->mu);
  return worker_->abandoned;
}

GuardedReader::Reads::Result GuardedReader::Reads::guarded(
    const std::string& key, const std::function<int(std::string&)>& op) {
  Result res;
  {
    std::lock_guard<std::mutex> l(shared_->mu);
    if (shared_->stuck.count(key) != 0) {
      res.status = Status::kSkipped;
      return res;
    }
  }
  {
    std::lock_guard<std::mutex> l(worker_->mu);
    if (worker_->abandoned) {
      res.status = Status::kAbandoned;
      return res;
    }
    worker_->current_key = key;
    worker_->current_start_mono = monotonic_usec();
    worker_->current_start_wall = now_usec();
  }
  // This may never return; nothing is held while it runs.
  const int err = op(res.data);
  {
    std::lock_guard<std::mutex> l(worker_->mu);
    worker_->current_start_mono = 0;
    if (worker_->abandoned) {
      std::lock_guard<std::mutex> s(shared_->mu);
      shared_->stuck.erase(key);
      --shared_->abandoned_alive;
      res.status = Status::kAbandoned;
      res.data.clear();
      return res;
    }
  }
  res.error = err;
  res.status = err == 0 ? Status::kOk : Status::kError;
  return res;
}

GuardedReader::Reads::Result GuardedReader::Reads::read_at(int dirfd, const std::string& path,
                                                           const std::string& key,
                                                           size_t max_bytes) {
  return guarded(key, [dirfd, &path, max_bytes](std::string& data) {
    const int fd = ::openat(dirfd, path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return errno;
    int err = 0;
    data.resize(max_bytes);
    size_t got = 0;
    while (got < max_bytes) {
      const ssize_t n = ::read(fd, data.data() + got, max_bytes - got);
      if (n < 0) {
        if (errno == EINTR) continue;
        err = errno;
        break;
      }
      if (n == 0) break;
      got += static_cast<size_t>(n);
    }
    data.resize(got);
    ::close(fd);
    return err;
  });
}

GuardedReader::Reads::Result GuardedReader::Reads::read_links_at(int dirfd, const std::string& dir,
                                                                 const std::string& key,
                                                                 size_t max_entries) {
  return guarded(key, [dirfd, &dir, max_entries](std::string& data) {
    const int fd = ::openat(dirfd, dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return errno;
    const UniqueFd d(fd);
    std::vector<DirEntry> entries;
    try {
      entries = list_dir_at(d.get(), max_entries);
    } catch (const std::system_error& e) {
      return e.code().value();
    }
    char buf[4096];
    for (const DirEntry& e : entries) {
      const ssize_t n = ::readlinkat(d.get(), e.name.c_str(), buf, sizeof buf);
      if (n <= 0) continue;  // closed since the listing, or not a link
      data.append(buf, static_cast<size_t>(n));
      data.push_back('\0');
    }
    return 0;
  });
}

GuardedReader::GuardedReader(Options options)
    : options_(options), shared_(std::make_shared<GuardShared>()) {}

GuardedReader::~GuardedReader() {
  if (!active_) return;
  {
    std::lock_guard<std::mutex> l(active_->mu);
    active_->quit = true;
  }
  active_->cv.notify_all();
  if (active_->thread.joinable()) active_->thread.join();
}

std::shared_ptr<GuardWorker> GuardedReader::start_worker() {
  auto w = std::make_shared<GuardWorker>();
  w->thread = std::thread([w] {
    std::unique_lock<std::mutex> l(w->mu);
    for (;;) {
      w->cv.wait(l, [&] { return w->has_job || w->quit || w->abandoned; });
      if (w->quit || (w->abandoned && !w->has_job)) return;
      std::function<void()> job = std::move(w->job);
      w->has_job = false;
      l.unlock();
      job();
      job = nullptr;
      l.lock();
      w->job_done = true;
      w->cv.notify_all();
      if (w->abandoned) return;
    }
  });
  return w;
}

GuardedReader::EachReport GuardedReader::run_each(size_t count,
                                                  const std::function<void(Reads&, size_t)>& fn) {
  EachReport report;
  const int64_t timeout_usec = static_cast<int64_t>(options_.read_timeout.count()) * 1000;
  const auto poll =
      std::chrono::milliseconds(std::clamp<int64_t>(options_.read_timeout.count() / 10, 5, 100));
  size_t start = 0;
  while (start < count) {
    {
      std::lock_guard<std::mutex> l(shared_->mu);
      if (shared_->abandoned_alive >= options_.max_stuck) {
        for (size_t i = start; i < count; ++i)
          report.not_reached.push_back(i);
        return report;
      }
    }
    if (!active_) active_ = start_worker();
    std::shared_ptr<GuardWorker> w = active_;
    auto progress = std::make_shared<std::atomic<size_t>>(start);
    auto shared = shared_;
    std::function<void()> job = [fn, w, shared, progress, count] {
      Reads reads;
      reads.worker_ = w.get();
      reads.shared_ = shared;
      for (size_t i = progress->load(); i < count; ++i) {
        progress->store(i);
        if (reads.abandoned()) return;
        fn(reads, i);
      }
      progress->store(count);
    };
    std::unique_lock<std::mutex> l(w->mu);
    w->job = std::move(job);
    w->has_job = true;
    w->job_done = false;
    w->cv.notify_all();
    bool abandoned = false;
    while (!w->job_done) {
      w->cv.wait_for(l, poll);
      if (w->job_done) break;
      if (w->current_start_mono != 0 && monotonic_usec() - w->current_start_mono > timeout_usec) {
        w->abandoned = true;
        std::lock_guard<std::mutex> s(shared_->mu);
        shared_->stuck[w->current_key] = w->current_start_wall;
        ++shared_->abandoned_alive;
        abandoned = true;
        break;
      }
    }
    l.unlock();
    if (!abandoned) {
      report.completed += count - start;
      break;
    }
    const size_t at = progress->load();
    report.completed += at - start;
    report.stuck.push_back(at);
    w->thread.detach();
    active_.reset();
    start = at + 1;
  }
  return report;
}

std::vector<StuckRead> GuardedReader::stuck_reads() const {
  std::lock_guard<std::mutex> l(shared_->mu);
  std::vector<StuckRead> out;
  out.reserve(shared_->stuck.size());
  for (const auto& [path, since] : shared_->stuck)
    out.push_back({path, since});
  return out;
}

size_t GuardedReader::stuck_workers() const {
  std::lock_guard<std::mutex> l(shared_->mu);
  return shared_->abandoned_alive;
}

GuardedReader::FileReads GuardedReader::read_files(std::vector<std::string> paths,
                                                   size_t max_bytes) {
  // Shared with the workers: one abandoned on a stuck read may still publish after this returns.
  struct Shared {
    std::mutex mu;
    std::vector<std::string> paths;
    FileReads out;
  };
  auto shared = std::make_shared<Shared>();
  shared->paths = std::move(paths);
  shared->out.data.resize(shared->paths.size());
  const EachReport report =
      run_each(shared->paths.size(), [shared, max_bytes](Reads& reads, size_t i) {
        const std::string& path = shared->paths[i];
        const Reads::Result r = reads.read(path, max_bytes);
        if (r.status == Reads::Status::kAbandoned) return;
        std::lock_guard<std::mutex> l(shared->mu);
        if (r.status == Reads::Status::kSkipped) {
          shared->out.skipped.push_back(path);
        } else if (r.status == Reads::Status::kError) {
          shared->out.errors.push_back(path + ": " + std::strerror(r.error));
        } else {
          shared->out.data[i] = r.data;
        }
      });
  std::lock_guard<std::mutex> l(shared->mu);
  FileReads out = shared->out;
  for (size_t i : report.not_reached)
    out.skipped.push_back(shared->paths[i]);
  return out;
}

}  // namespace triage::collector
