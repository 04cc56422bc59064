#include "agent/node/kernel_ingest.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// Saved positions say which source wrote them: journal cursors start with "s=", kmsg positions
// with "kmsg:", text line numbers with "text:". A position of another source (KernelSource was
// changed, or the journal fallback kicked in) cannot be resumed from.
bool position_fits(const std::string& source, const std::string& position) {
  if (source == "journal") return starts_with(position, "s=");
  if (source == "kmsg") return starts_with(position, "kmsg:");
  return starts_with(position, "text:");
}

}  // namespace

void to_json(nlohmann::json& j, const KernelIngestStatus& s) {
  j = nlohmann::json{{"source", s.source},
                     {"state", s.state},
                     {"source_errors", s.source_errors},
                     {"records", s.records},
                     {"lost_records", s.lost_records},
                     {"loss_gaps", s.loss_gaps},
                     {"events", s.events},
                     {"undelivered", s.undelivered},
                     {"fallback", s.fallback}};
  if (!s.last_error.empty()) j["last_error"] = s.last_error;
}

struct KernelIngest::Opened {
  std::string kind;  // journal | kmsg | file: what is actually read
  UniqueFd file;     // the text file, for `file`
  std::unique_ptr<collector::KernelSource> source;
  uint64_t skip_through = 0;  // text lines already delivered before the resume position
};

KernelIngest::KernelIngest(KernelIngestOptions options, Deliver deliver, Position position)
    : opts_(std::move(options)), deliver_(std::move(deliver)), position_(std::move(position)) {
  stop_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!stop_fd_) throw_errno("eventfd", errno);
  wake_fd_.reset(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake_fd_) throw_errno("eventfd", errno);
  status_.state = "starting";
  status_.source = opts_.source + (opts_.path.empty() ? "" : " " + opts_.path);
}

KernelIngest::~KernelIngest() {
  stop();
  join();
}

void KernelIngest::start() {
  thread_ = std::thread([this] { run(); });
}

void KernelIngest::stop() {
  stopping_ = true;
  const uint64_t one = 1;
  (void)!::write(stop_fd_.get(), &one, sizeof one);
}

void KernelIngest::look_again() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

void KernelIngest::join() {
  if (thread_.joinable()) thread_.join();
}

KernelIngestStatus KernelIngest::status() const {
  std::lock_guard<std::mutex> l(mu_);
  return status_;
}

void KernelIngest::set_state(const std::string& state) {
  std::lock_guard<std::mutex> l(mu_);
  status_.state = state;
}

void KernelIngest::caught_up(int64_t look_usec) {
  std::lock_guard<std::mutex> l(mu_);
  status_.caught_up_usec = look_usec;
}

void KernelIngest::fail(const std::string& error) {
  {
    std::lock_guard<std::mutex> l(mu_);
    ++status_.source_errors;
    status_.last_error = error;
    status_.state = "retrying";
  }
  // Once per distinct error: a node without /dev/kmsg access would otherwise log every retry.
  if (error != logged_error_) {
    spdlog::error("kernel log: {}; retrying with backoff (up to every {} s)", log_text(error),
                  opts_.retry_max_ms / 1000);
    logged_error_ = error;
  }
}

bool KernelIngest::wait(int fd, int64_t ms) {
  pollfd p[3] = {{stop_fd_.get(), POLLIN, 0}, {wake_fd_.get(), POLLIN, 0}, {fd, POLLIN, 0}};
  const int timeout = static_cast<int>(std::clamp<int64_t>(ms, 0, 3'600'000));
  // EINTR, a timeout or readiness: the caller looks again either way.
  (void)::poll(p, fd >= 0 ? 3 : 2, timeout);
  if ((p[1].revents & POLLIN) != 0) {
    uint64_t n = 0;
    (void)!::read(wake_fd_.get(), &n, sizeof n);
  }
  return !stopping_;
}

void KernelIngest::run() {
  int64_t backoff = opts_.retry_min_ms;
  while (!stopping_) {
    try {
      if (!read_source()) break;
      backoff = opts_.retry_min_ms;
      // A file read to its end: look for appended records a little later.
      set_state("waiting");
      while (wait(-1, opts_.reopen_ms)) {
        const int64_t look = monotonic_usec();
        if (file_changed()) break;
        caught_up(look);
      }
    } catch (const std::exception& e) {
      fail(e.what());
      if (!wait(-1, backoff)) break;
      backoff = std::min(backoff * 2, opts_.retry_max_ms);
    }
  }
  set_state("stopped");
}

bool KernelIngest::file_changed() const {
  struct stat st {};
  if (::stat(file_state_.path.c_str(), &st) != 0) return true;  // let the reopen say what is wrong
  return static_cast<uint64_t>(st.st_dev) != file_state_.dev ||
         static_cast<uint64_t>(st.st_ino) != file_state_.ino ||
         static_cast<int64_t>(st.st_size) != file_state_.size;
}

KernelIngest::Opened KernelIngest::open_source(const std::string& resume) {
  Opened o;
  o.kind = opts_.source;
  std::string path = opts_.path;
  const bool fallback = o.kind == "journal" && path.empty() && !opts_.journal_available;
  if (fallback) {
    o.kind = "kmsg";
    path = opts_.kmsg_fallback;
  }
  {
    std::lock_guard<std::mutex> l(mu_);
    if (fallback && !status_.fallback) {
      spdlog::warn(
          "kernel log: KernelSource=journal, but this machine has no systemd journal (systemd is "
          "not PID 1); reading {} instead",
          path);
    }
    status_.fallback = fallback;
  }

  // Before opening, so that anything appended while this session reads makes the next look
  // differ (reading it twice is harmless; missing it is not).
  file_state_ = FileState{path, 0, 0, -1};
  if (struct stat st{}; !path.empty() && ::stat(path.c_str(), &st) == 0) {
    file_state_.dev = static_cast<uint64_t>(st.st_dev);
    file_state_.ino = static_cast<uint64_t>(st.st_ino);
    file_state_.size = static_cast<int64_t>(st.st_size);
  }

  std::string from = resume;
  if (!from.empty() && !position_fits(o.kind, from)) {
    spdlog::warn(
        "kernel log: the saved position '{}' belongs to another kernel source; reading {} "
        "from its start (events already in the spool are not added twice when their ids "
        "match)",
        from, o.kind);
    from.clear();
  }
  if (o.kind == "journal") {
    collector::JournalOptions jo;
    jo.directory = path;
    jo.resume_after = from;
    o.source = collector::open_journal_source(jo);
  } else if (o.kind == "kmsg") {
    collector::KmsgOptions ko;
    if (!path.empty()) ko.path = path;
    ko.resume_after = from;
    ko.boot_id_path = opts_.boot_id_path;
    ko.follow = true;
    o.source = collector::open_kmsg_source(ko);
  } else if (o.kind == "file") {
    if (path.empty()) throw std::runtime_error("KernelSource=file needs KernelPath");
    o.file = open_regular_file(path, false);
    o.source = collector::open_text_source(o.file.get(), path, true);
    if (!from.empty()) o.skip_through = parse_uint(from.substr(5)).value_or(0);
  } else {
    throw std::runtime_error("unknown KernelSource '" + o.kind + "'");
  }
  return o;
}

bool KernelIngest::deliver(std::vector<KernelEvent>& events, const std::string& position) {
  if (events.empty() && (position.empty() || position == delivered_position_)) return true;
  const size_t n = events.size();
  // The agent keeps what it could not make durable and writes it later itself; the position
  // only advances with it, so nothing here needs to be held back.
  const bool durable = deliver_(std::move(events), position);
  events.clear();
  std::lock_guard<std::mutex> l(mu_);
  status_.events += n;
  if (durable) {
    delivered_position_ = position;
  } else {
    ++status_.undelivered;
  }
  return durable;
}

bool KernelIngest::read_source() {
  // Rules are loaded here rather than once, so that a broken site rule file is retried like a
  // missing source and picked up once an admin fixes it.
  if (!rules_) {
    collector::KernelRulesLoad load = collector::load_kernel_rules(opts_.rule_layers);
    if (!load.rules) {
      std::string msg = "the kernel rules have errors";
      for (const auto& e : load.errors)
        msg += std::string("; ") + e.what();
      throw std::runtime_error(msg);
    }
    rules_ = std::move(load.rules);
  }
  const std::string resume = position_();
  Opened o = open_source(resume);
  collector::KernelClassifier classifier(rules_, opts_.host, opts_.classifier);
  classifier.set_initial_position(resume);
  delivered_position_ = resume;
  {
    std::lock_guard<std::mutex> l(mu_);
    status_.source = o.source->describe();
    status_.last_error.clear();
    status_.state = "reading";
  }
  // Once per source, and again after a failure; not every time a followed file grows.
  if (!logged_error_.empty() || announced_ != o.source->describe()) {
    spdlog::info("kernel log: reading {}{}{}", o.source->describe(),
                 resume.empty() ? "" : " after " + resume, logged_error_.empty() ? "" : " again");
    announced_ = o.source->describe();
    logged_error_.clear();
  }

  std::vector<collector::KernelRecord> batch;
  std::vector<KernelEvent> events;
  uint64_t lost_before = classifier.stats().lost;
  while (!stopping_) {
    batch.clear();
    const int64_t look = monotonic_usec();
    const bool more = o.source->read(batch, 0);
    uint64_t gaps = 0;
    size_t fed = 0;
    for (const auto& r : batch) {
      if (o.skip_through > 0 && r.seq <= o.skip_through) continue;
      if (r.lost_before < 0) ++gaps;
      classifier.feed(r, events);
      ++fed;
    }
    if (!more) {
      classifier.flush(events);
    } else if (batch.empty()) {
      classifier.flush(events, opts_.flush_idle_usec);
    }
    const uint64_t lost_now = classifier.stats().lost;
    {
      std::lock_guard<std::mutex> l(mu_);
      status_.records += fed;
      status_.lost_records += lost_now - lost_before;
      status_.loss_gaps += gaps;
    }
    lost_before = lost_now;
    deliver(events, classifier.safe_resume_position());
    if (!more || batch.empty()) caught_up(look);
    if (!more) return true;
    if (batch.empty() && !wait(o.source->wait_fd(), opts_.poll_ms)) return false;
  }
  return false;
}

}  // namespace triage::agent
