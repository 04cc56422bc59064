#include "agent/agent.h"

#include <pwd.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <netdb.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <future>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "agent/attribution.h"
#include "collector/boot_id.h"
#include "collector/health/node_health.h"
#include "collector/kernel_pipeline.h"
#include "common/rules_file.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxJobsInMemory = 4096;
constexpr size_t kMaxPendingEvents = 50000;
constexpr int64_t kPileupRefreshUsec = 600LL * 1000000;

// The boot id file the agent (and the kmsg reader, whose positions carry the boot) reads: the
// fixture tree's when it has one, else the real one.
std::string boot_id_path(const std::string& proc_root) {
  const std::string p = proc_root + "/sys/kernel/random/boot_id";
  return ::access(p.c_str(), R_OK) == 0 ? p : "/proc/sys/kernel/random/boot_id";
}

// In the journal's spelling (32 hex digits, no dashes), the one kernel events carry, so that the
// health check can tell this boot's events from history.
std::string spelled_like_events(const std::string& id) {
  const std::string n = collector::normalize_boot_id(id);
  return n.empty() ? id : n;
}

std::string read_boot_id(const std::string& proc_root) {
  try {
    return collector::read_boot_id(boot_id_path(proc_root));
  } catch (const std::exception&) {
    return "unknown-boot";
  }
}

std::optional<uid_t> lookup_user(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (auto n = parse_uint(name); n && *n <= UINT32_MAX) return static_cast<uid_t>(*n);
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &res) != 0 || res == nullptr)
    return std::nullopt;
  return pw.pw_uid;
}

UniqueFd listen_unix(const std::string& path) {
  const auto [dir, base] = split_dir_base(path);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::system_error(ec, "create socket directory " + dir);
    ::chmod(dir.c_str(), 0755);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      throw std::runtime_error("socket path " + path + " exists and is not a socket");
    }
    ::unlink(path.c_str());  // a stale socket from an earlier run
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw_errno("bind " + path, errno);
  }
  // Anyone may connect; what a peer may do is decided per request from SO_PEERCRED.
  if (::chmod(path.c_str(), 0666) != 0) throw_errno("chmod " + path, errno);
  if (::listen(fd.get(), 256) != 0) throw_errno("listen " + path, errno);
  return fd;
}

UniqueFd listen_tcp(const std::string& address, int port, int& bound_port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  const int rc = ::getaddrinfo(address.c_str(), port_s.c_str(), &hints, &res);
  if (rc != 0) throw std::runtime_error("HttpAddress " + address + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(res, &::freeaddrinfo);
  UniqueFd fd(::socket(res->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket", errno);
  const int one = 1;
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    throw_errno("bind " + address + ":" + port_s, errno);
  }
  if (::listen(fd.get(), 256) != 0) throw_errno("listen", errno);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&ss), &len);
  bound_port = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
  return fd;
}

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 1469598103934665603ULL;
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// Events the agent made from its own observations (sysfs counters, stuck reads, D-state) rather
// than from kernel log lines: they do not count as "dmesg" errors.
bool from_kernel_log(const KernelEvent& e) {
  return e.rule != "sysfs-counter" && e.rule != "sysfs-reader" && e.rule != "dstate-sampler";
}

}  // namespace

Agent::Agent(AgentConfig config, std::unique_ptr<SlurmClient> slurm, AgentOptions options)
    : cfg_(std::move(config)),
      opts_(std::move(options)),
      slurm_(std::move(slurm)),
      spool_(Spool::Options{cfg_.spool_dir}),
      events_(cfg_.max_node_events),
      analyses_(loop_) {}

Agent::~Agent() {
  stop();
  if (loop_thread_.joinable()) loop_thread_.join();
  // After the loop: a hand-over still waiting on it has been answered (or refused) by now.
  kernel_ingest_.reset();
  if (dstate_thread_) dstate_thread_->stop();
  if (sysfs_thread_) sysfs_thread_->stop();
  if (workers_) workers_->stop();
  analyses_.kill_all();
}

void Agent::start() {
  // A client that goes away mid-answer must not kill the agent.
  (void)::signal(SIGPIPE, SIG_IGN);  // cannot fail for a valid signal number
  stats_.started_usec = now_usec();
  boot_id_ =
      opts_.boot_id.empty() ? spelled_like_events(read_boot_id(cfg_.proc_root)) : opts_.boot_id;
  slurm_uid_ = lookup_user(cfg_.slurm_user);
  if (!slurm_uid_)
    spdlog::warn("SlurmUser '{}' does not exist; only root may post lifecycle messages",
                 cfg_.slurm_user);

  SpoolReplay replay = spool_.open();
  for (KernelEvent& e : replay.events)
    events_.restore(std::move(e));
  for (const KernelEvent& e : events_.events())
    count_event(e, nullptr);
  kernel_position_ = replay.kernel_position;
  {
    std::lock_guard<std::mutex> l(position_mu_);
    durable_position_copy_ = kernel_position_;
  }
  stats_.spool_torn_lines += replay.torn_lines;
  stats_.spool_bad_lines += replay.bad_lines;
  load_jobs_from_spool();
  spdlog::info("spool {}: {} node events, {} jobs in memory, kernel position '{}'", cfg_.spool_dir,
               events_.size(), jobs_.jobs().size(), kernel_position_);

  workers_ = std::make_unique<WorkerPool>(cfg_.analysis_concurrency + 1);

  socket_ = std::make_unique<StreamServer>(
      loop_, StreamServer::Options{"socket", cfg_.socket_max_clients, cfg_.socket_timeout_ms, true},
      [this](StreamServer::Conn& c) { on_socket_input(c); });
  socket_->serve(listen_unix(cfg_.socket_path));
  http_ = std::make_unique<StreamServer>(
      loop_, StreamServer::Options{"http", cfg_.http_max_connections, cfg_.http_timeout_ms, false},
      [this](StreamServer::Conn& c) { on_http_input(c); });
  http_->serve(listen_tcp(cfg_.http_address, cfg_.http_port, http_port_));
  if (!opts_.peer_url) {
    // Every node's agent listens on the same configured port.
    const int port = cfg_.http_port != 0 ? cfg_.http_port : http_port_;
    opts_.peer_url = [port](const std::string& node) {
      return "http://" + node + ":" + std::to_string(port);
    };
  }

  std::error_code ec;
  std::filesystem::create_directories(cfg_.inbox_dir, ec);
  if (!ec) ::chmod(cfg_.inbox_dir.c_str(), 0700);
  inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (inotify_ && ::inotify_add_watch(inotify_.get(), cfg_.inbox_dir.c_str(),
                                      IN_MOVED_TO | IN_CLOSE_WRITE) >= 0) {
    loop_.add(inotify_.get(), EPOLLIN, [this](uint32_t) {
      char buf[4096];
      while (::read(inotify_.get(), buf, sizeof buf) > 0) {
      }
      if (!inbox_scan_scheduled_) {
        inbox_scan_scheduled_ = true;
        loop_.after(20, [this] {
          inbox_scan_scheduled_ = false;
          scan_inbox();
        });
      }
    });
  } else {
    spdlog::warn("inbox {}: cannot watch it ({}); scanning every 30 s", cfg_.inbox_dir,
                 std::strerror(errno));
  }
  scan_inbox();

  // Jobs that ended before a restart and still wait for their analysis.
  std::vector<uint64_t> waiting;
  for (const auto& [id, j] : jobs_.jobs()) {
    if (j.ended && !j.analysis) waiting.push_back(id);
  }
  for (uint64_t id : waiting)
    on_job_end(*jobs_.find(id));

  if (opts_.collectors) {
    sampler_ = std::make_unique<collector::DStateSampler>(collector::DStateSampler::Options{
        cfg_.proc_root, std::chrono::milliseconds(cfg_.dstate_read_timeout_ms),
        std::chrono::seconds(cfg_.dstate_persistent_after_sec), cfg_.max_stuck_readers});
    hw_reader_ = std::make_unique<collector::HwCounterReader>(collector::HwCounterReader::Options{
        cfg_.sysfs_root, std::chrono::milliseconds(cfg_.sysfs_read_timeout_ms),
        cfg_.max_stuck_readers});
    hw_watch_ = std::make_unique<collector::HwCounterWatch>(cfg_.node_name, boot_id_);
    dstate_thread_ = std::make_unique<PeriodicThread>("dstate", cfg_.dstate_interval_ms, [this] {
      std::map<int64_t, uint64_t> pids;
      {
        std::lock_guard<std::mutex> l(pids_mu_);
        pids = pids_snapshot_;
      }
      collector::DStateSample s = sampler_->sample(pids);
      loop_.post([this, s = std::move(s)]() mutable { on_dstate_sample(std::move(s)); });
    });
    sysfs_thread_ = std::make_unique<PeriodicThread>("sysfs", cfg_.sysfs_interval_ms, [this] {
      collector::SysfsSnapshot snap = hw_reader_->read();
      std::vector<KernelEvent> evs = hw_watch_->update(snap);
      loop_.post([this, snap = std::move(snap), evs = std::move(evs)]() mutable {
        on_sysfs_snapshot(std::move(snap), std::move(evs));
      });
    });
    dstate_thread_->start();
    sysfs_thread_->start();
  }

  // Periodic work on the loop: health, inbox backstop, maintenance, systemd watchdog.
  struct Ticker {
    static void every(EventLoop& loop, int64_t ms, const std::function<void()>& fn) {
      loop.after(ms, [&loop, ms, fn]() {
        fn();
        every(loop, ms, fn);
      });
    }
  };
  Ticker::every(loop_, 1000, [this] { evaluate_health(); });
  Ticker::every(loop_, 30000, [this] { scan_inbox(); });
  Ticker::every(loop_, 60000, [this] { maintain(); });
  maintain();
  evaluate_health();
  uint64_t watchdog_usec = 0;
  if (opts_.notify_systemd && sd_watchdog_enabled(0, &watchdog_usec) > 0 && watchdog_usec > 0) {
    Ticker::every(loop_, static_cast<int64_t>(watchdog_usec / 2000),
                  [] { sd_notify(0, "WATCHDOG=1"); });
  }
  started_ = true;
  start_kernel_ingest();
  notify("READY=1\nSTATUS=serving; " + std::to_string(events_.size()) + " node events, " +
         std::to_string(jobs_.jobs().size()) + " jobs");
  spdlog::info("agent {} ready: socket {}, http {}:{}, drain policy {}", cfg_.node_name,
               cfg_.socket_path, cfg_.http_address, http_port_, cfg_.drain_policy);
}

void Agent::start_kernel_ingest() {
  if (!opts_.kernel_ingest || cfg_.kernel_source == "none") {
    spdlog::info("kernel log: not read (KernelSource=none)");
    return;
  }
  KernelIngestOptions o;
  o.source = cfg_.kernel_source;
  o.path = cfg_.kernel_path;
  o.rule_layers =
      default_rule_layers(cfg_.rules_dir.empty() ? std::vector<std::string>{}
                                                 : std::vector<std::string>{cfg_.rules_dir});
  o.host = cfg_.node_name;
  o.boot_id_path = boot_id_path(cfg_.proc_root);
  // Without systemd as PID 1 there is no journald writing a journal for this boot.
  o.journal_available = sd_booted() > 0;
  kernel_ingest_ = std::make_unique<KernelIngest>(
      std::move(o),
      [this](std::vector<KernelEvent> events, std::string position) {
        return ingest(std::move(events), std::move(position));
      },
      [this] { return kernel_position(); });
  kernel_ingest_->start();
}

KernelIngestStatus Agent::kernel_status() const {
  if (kernel_ingest_) return kernel_ingest_->status();
  KernelIngestStatus s;
  s.source = "none";
  s.state = "off";
  return s;
}

void Agent::run() {
  loop_.run();
}

void Agent::run_in_background() {
  loop_thread_ = std::thread([this] { loop_.run(); });
  // Wait until the loop thread is the one running tasks.
  call([] {});
}

void Agent::stop() {
  if (!started_.exchange(false)) return;
  notify("STOPPING=1");
  if (kernel_ingest_) kernel_ingest_->stop();
  loop_.post([this] {
    if (socket_) socket_->stop();
    if (http_) http_->stop();
    analyses_.kill_all();
  });
  loop_.stop();
}

void Agent::notify(const std::string& state) {
  if (opts_.notify_systemd) sd_notify(0, state.c_str());
}

void Agent::call(const std::function<void()>& fn) {
  if (loop_.on_loop_thread()) {
    fn();
    return;
  }
  std::promise<void> done;
  auto fut = done.get_future();
  if (!loop_.post([&] {
        fn();
        done.set_value();
      })) {
    throw std::runtime_error("the agent is stopping");
  }
  fut.wait();
}

NodeVerdict Agent::verdict() {
  NodeVerdict v;
  call([&] { v = verdict_; });
  return v;
}

std::string Agent::metrics() {
  std::string m;
  call([&] { m = render_metrics(); });
  return m;
}

std::string Agent::kernel_position() {
  std::lock_guard<std::mutex> l(position_mu_);
  return durable_position_copy_;
}

bool Agent::ingest(std::vector<KernelEvent> events, std::string position) {
  auto done = std::make_shared<std::promise<bool>>();
  auto fut = done->get_future();
  const bool posted = loop_.post(
      [this, done, events = std::move(events), position = std::move(position)]() mutable {
        bool durable = false;
        apply_ingest(std::move(events), position, &durable);
        done->set_value(durable);
      });
  if (!posted) return false;
  return fut.get();
}

void Agent::normalize(KernelEvent& e) const {
  if (e.host.empty()) e.host = cfg_.node_name;
  if (e.boot_id.empty()) e.boot_id = boot_id_;
  if (e.last_usec < e.time_usec) e.last_usec = e.time_usec;
  if (e.lines.size() > KernelEvent::kMaxEventLines) e.lines.resize(KernelEvent::kMaxEventLines);
  if (e.id.empty()) {
    // The pipeline promises ids; should one be missing, derive a stable one from the content so
    // that a replay still finds it.
    std::string basis = e.boot_id + "|" + e.kind + "|" + std::to_string(e.time_usec);
    for (const auto& l : e.lines)
      basis += "|" + l;
    char buf[32];
    (void)std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(fnv1a(basis)));
    e.id = "anon:" + e.boot_id + ":" + buf;
  }
}

void Agent::count_event(const KernelEvent& e, const KernelEvent* previous) {
  const uint64_t before = previous != nullptr ? previous->count : 0;
  const uint64_t delta = e.count > before ? e.count - before : 0;
  if (previous == nullptr) ++stats_.events_by_kind[e.kind];
  if (!from_kernel_log(e)) return;
  if (e.kind == "oom-kill") stats_.oom_kills += delta;
  if (collector::is_gpu_error(e) && e.severity >= Severity::kError && e.action != "none") {
    stats_.gpu_errors += delta;
  }
}

void Agent::apply_ingest(std::vector<KernelEvent> events, const std::string& position,
                         bool* durable) {
  std::vector<KernelEvent> fresh;
  for (KernelEvent& e : events) {
    normalize(e);
    if (events_.classify(e) == EventStore::Change::kDuplicate) {
      ++stats_.duplicates_dropped;
      continue;
    }
    const KernelEvent* prev = events_.find(e.id);
    count_event(e, prev);
    fresh.push_back(e);
    events_.apply(std::move(e));
  }
  if (!fresh.empty()) schedule_health();
  // Anything that failed earlier goes first, so the spool keeps arrival order.
  std::vector<KernelEvent> batch = std::move(pending_events_);
  pending_events_.clear();
  batch.insert(batch.end(), fresh.begin(), fresh.end());
  const std::string pos = position.empty() ? pending_position_ : position;
  if (batch.empty() && (pos.empty() || pos == kernel_position_)) {
    if (durable != nullptr) *durable = true;
    return;
  }
  if (spool_.append_events(batch, pos)) {
    pending_position_.clear();
    if (!pos.empty()) {
      kernel_position_ = pos;
      std::lock_guard<std::mutex> l(position_mu_);
      durable_position_copy_ = pos;
    }
    if (durable != nullptr) *durable = true;
    return;
  }
  // Not durable (disk full?): keep it, do not advance the position, try again shortly.
  if (batch.size() > kMaxPendingEvents) {
    // The oldest go first; what is given up on is counted, so a full disk never loses silently.
    stats_.spool_dropped_events += batch.size() - kMaxPendingEvents;
    batch.erase(batch.begin(),
                batch.begin() + static_cast<std::ptrdiff_t>(batch.size() - kMaxPendingEvents));
  }
  pending_events_ = std::move(batch);
  pending_position_ = pos;
  if (durable != nullptr) *durable = false;
  if (!retry_scheduled_) {
    retry_scheduled_ = true;
    loop_.after(5000, [this] {
      retry_scheduled_ = false;
      apply_ingest({}, "", nullptr);
    });
  }
}

void Agent::publish_pids() {
  std::lock_guard<std::mutex> l(pids_mu_);
  pids_snapshot_ = jobs_.running_pids();
}

void Agent::on_dstate_sample(collector::DStateSample sample) {
  const collector::HealthPolicy& policy = cfg_.health;
  std::vector<KernelEvent> out;
  auto pileup = [&](bool gpu, uint64_t threshold) {
    if (threshold == 0) return;
    std::vector<const collector::DStateTask*> tasks;
    for (const auto& t : sample.tasks) {
      if (t.persistent && (!gpu || collector::is_gpu_wchan(t.wchan, policy))) tasks.push_back(&t);
    }
    if (tasks.size() < threshold) return;
    const auto* oldest =
        *std::min_element(tasks.begin(), tasks.end(), [](const auto* a, const auto* b) {
          return a->first_seen_usec != b->first_seen_usec ? a->first_seen_usec < b->first_seen_usec
                                                          : a->pid < b->pid;
        });
    KernelEvent e;
    e.id = "dstate:" + boot_id_ + ":" + (gpu ? "gpu:" : "any:") + std::to_string(oldest->pid) +
           "." + std::to_string(oldest->start_ticks);
    const KernelEvent* prev = events_.find(e.id);
    auto last = pileup_emitted_.find(e.id);
    if (prev != nullptr && prev->count == tasks.size() && last != pileup_emitted_.end() &&
        sample.time_usec - last->second < kPileupRefreshUsec) {
      return;
    }
    pileup_emitted_[e.id] = sample.time_usec;
    e.kind = "dstate-pileup";
    e.rule = "dstate-sampler";
    e.severity = gpu ? Severity::kError : Severity::kWarning;
    e.action = gpu ? "reboot-at-job-boundary" : "investigate";
    e.count = tasks.size();
    e.time_usec = oldest->first_seen_usec;
    e.last_usec = sample.time_usec;
    std::map<std::string, uint64_t> wchans;
    for (const auto* t : tasks)
      ++wchans[t->wchan.empty() ? "?" : t->wchan];
    std::string where;
    for (const auto& [w, n] : wchans)
      where += (where.empty() ? "" : ", ") + w + " x" + std::to_string(n);
    e.summary = std::to_string(tasks.size()) + " task(s) stuck in D state" +
                (gpu ? " in GPU driver paths" : "") + " (" + where + ")";
    for (const auto* t : tasks) {
      if (e.lines.size() >= KernelEvent::kMaxEventLines) break;
      e.lines.push_back("pid " + std::to_string(t->pid) + " (" + t->comm +
                        ") D wchan=" + (t->wchan.empty() ? "?" : t->wchan) +
                        (t->job_id ? " job=" + std::to_string(*t->job_id) : ""));
    }
    out.push_back(std::move(e));
  };
  pileup(true, policy.dstate_gpu_reboot);
  pileup(false, policy.dstate_degraded);
  dstate_ = std::move(sample);
  schedule_health();
  if (!out.empty()) apply_ingest(std::move(out), "", nullptr);
}

void Agent::on_sysfs_snapshot(collector::SysfsSnapshot snapshot, std::vector<KernelEvent> events) {
  for (const auto& s : snapshot.stuck) {
    if (!sysfs_ || std::none_of(sysfs_->stuck.begin(), sysfs_->stuck.end(),
                                [&](const collector::StuckRead& o) { return o.path == s.path; })) {
      spdlog::error("sysfs read of {} is stuck in the kernel; skipping that file until it returns",
                    s.path);
    }
  }
  sysfs_ = std::move(snapshot);
  schedule_health();
  if (!events.empty()) apply_ingest(std::move(events), "", nullptr);
}

void Agent::schedule_health() {
  // Soon, but once for a burst of events.
  health_dirty_ = true;
  if (health_scheduled_) return;
  health_scheduled_ = true;
  loop_.after(50, [this] {
    health_scheduled_ = false;
    evaluate_health();
  });
}

namespace {

// Whether two verdicts say the same thing. A reason's text carries live counts ("286000 GPU ring
// timeouts"), which change with every folded repeat of a flood: comparing the text would log the
// verdict on every event. The actions and the events behind each reason are what matter.
bool same_story(const NodeVerdict& a, const NodeVerdict& b) {
  if (a.verdict != b.verdict || a.reasons.size() != b.reasons.size()) return false;
  for (size_t i = 0; i < a.reasons.size(); ++i) {
    const VerdictReason& x = a.reasons[i];
    const VerdictReason& y = b.reasons[i];
    if (x.action != y.action || x.event_ids.empty() != y.event_ids.empty()) return false;
    if (!x.event_ids.empty() && x.event_ids.front() != y.event_ids.front()) return false;
  }
  return true;
}

}  // namespace

void Agent::evaluate_health() {
  collector::HealthInputs in;
  in.host = cfg_.node_name;
  in.boot_id = boot_id_;
  in.now_usec = now_usec();
  in.events = &events_.events();
  in.dstate = dstate_ ? &*dstate_ : nullptr;
  in.stuck_sysfs_reads = sysfs_ ? sysfs_->stuck.size() : 0;
  NodeVerdict v = collector::evaluate_node_health(in, cfg_.health);
  health_dirty_ = false;
  const bool changed = !same_story(v, verdict_);
  verdict_ = std::move(v);
  if (changed) {
    if (verdict_.verdict == "healthy") {
      spdlog::info("node health: healthy");
    } else {
      const auto& r = verdict_.reasons.front();
      const auto log =
          verdict_.verdict == "drain-recommended" ? spdlog::level::warn : spdlog::level::info;
      spdlog::log(log, "node health: {} ({}{}): {}", verdict_.verdict, r.action,
                  cfg_.drain_policy == "auto" ? ", auto-drain" : ", recommendation only", r.reason);
    }
    notify("STATUS=" + verdict_.verdict);
  }
  maybe_drain();
}

void Agent::load_jobs_from_spool() {
  size_t loaded = 0;
  for (const Spool::JobFile& f : spool_.list_jobs()) {
    if (loaded++ >= kMaxJobsInMemory) break;
    size_t torn = 0, bad = 0;
    jobs_.restore(f.job_id, spool_.read_job(f.job_id, &torn, &bad), f.mtime_usec);
    stats_.spool_torn_lines += torn;
    stats_.spool_bad_lines += bad;
  }
  publish_pids();
}

JobRecord* Agent::job(uint64_t job_id) {
  if (JobRecord* j = jobs_.find(job_id)) return j;
  std::vector<nlohmann::json> records = spool_.read_job(job_id);
  if (records.empty()) return nullptr;
  jobs_.restore(job_id, records, now_usec());
  return jobs_.find(job_id);
}

void Agent::maintain() {
  const int64_t now = now_usec();
  const int64_t cutoff = now - cfg_.spool_retention_sec * 1000000;
  events_.prune(cutoff);
  spool_.expire_event_segments(cutoff);
  std::erase_if(pileup_emitted_,
                [this](const auto& emitted) { return events_.find(emitted.first) == nullptr; });

  // Jobs: expire by age; keep memory bounded (evicted jobs stay in the spool, loaded on demand).
  std::vector<std::pair<int64_t, uint64_t>> ended;
  std::vector<uint64_t> expired;
  for (const auto& [id, j] : jobs_.jobs()) {
    const int64_t last = std::max(j.touched_usec, j.end_usec);
    if ((j.ended && last < cutoff) ||
        (!j.ended && last < cutoff - cfg_.spool_retention_sec * 1000000)) {
      expired.push_back(id);
    } else if (j.ended && in_pipeline_.count(id) == 0) {
      ended.emplace_back(last, id);
    }
  }
  for (uint64_t id : expired) {
    if (in_pipeline_.count(id) != 0) continue;
    spool_.remove_job(id);
    jobs_.erase(id);
  }
  if (jobs_.jobs().size() > kMaxJobsInMemory) {
    std::sort(ended.begin(), ended.end());
    for (const auto& [t, id] : ended) {
      if (jobs_.jobs().size() <= kMaxJobsInMemory) break;
      jobs_.erase(id);
    }
  }

  SpoolUsage u = spool_.usage();
  if (u.event_bytes > cfg_.spool_max_bytes / 2 && pending_events_.empty()) {
    if (spool_.compact_events(events_.events(), kernel_position_)) u = spool_.usage();
  }
  if (u.event_bytes + u.job_bytes > cfg_.spool_max_bytes) {
    std::vector<Spool::JobFile> files = spool_.list_jobs();  // newest first
    int64_t total = u.event_bytes + u.job_bytes;
    for (auto it = files.rbegin(); it != files.rend() && total > cfg_.spool_max_bytes; ++it) {
      const JobRecord* j = jobs_.find(it->job_id);
      if (in_pipeline_.count(it->job_id) != 0 || (j != nullptr && !j->ended)) continue;
      if (spool_.remove_job(it->job_id)) {
        total -= it->bytes;
        jobs_.erase(it->job_id);
      }
    }
    u = spool_.usage();
    if (u.event_bytes + u.job_bytes > cfg_.spool_max_bytes) {
      spdlog::warn(
          "spool {} holds {} bytes, above SpoolMaxSize={}: only running jobs and live events "
          "remain",
          cfg_.spool_dir, u.event_bytes + u.job_bytes, cfg_.spool_max_bytes);
    }
  }
  stats_.spool_usage = u;
}

NodeEvidence Agent::node_evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec) {
  NodeEvidence n;
  n.host = cfg_.node_name;
  n.reachable = true;
  for (const auto& [key, t] : job.tasks)
    n.tasks.push_back(t);
  std::sort(n.tasks.begin(), n.tasks.end(), [](const TaskExit& a, const TaskExit& b) {
    return a.rank != b.rank ? a.rank < b.rank : a.task < b.task;
  });
  AttributionWindow window = job_window(job, AttributionWindow{start_usec, end_usec});
  AttributionOptions opt;
  opt.grace_usec = cfg_.attribution_grace_sec * 1000000;
  opt.now_usec = now_usec();
  n.events = events_for_job(events_, job, window, jobs_, opt);
  n.verdict = verdict_;
  if (dstate_) n.dstate = dstate_->summary();
  return n;
}

}  // namespace triage::agent
