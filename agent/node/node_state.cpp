#include "agent/node/node_state.h"

#include <algorithm>
#include <cstdio>
#include <future>
#include <memory>

#include <spdlog/spdlog.h>

#include "agent/node/attribution.h"
#include "collector/health/node_health.h"
#include "collector/kernel_pipeline.h"
#include "collector/sysfs/ib_judgement.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxJobsInMemory = 4096;
constexpr size_t kMaxPendingEvents = 50000;
constexpr int64_t kPileupRefreshUsec = 600LL * 1000000;

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

// The persistent D-state tasks of a sample (only those in GPU driver paths with `gpu`).
std::vector<const collector::DStateTask*> stuck_tasks(const collector::DStateSample& sample,
                                                      bool gpu,
                                                      const collector::HealthPolicy& policy) {
  std::vector<const collector::DStateTask*> tasks;
  for (const auto& t : sample.tasks) {
    if (t.persistent && (!gpu || collector::is_gpu_wchan(t.wchan, policy))) tasks.push_back(&t);
  }
  return tasks;
}

// The dstate-pileup event for `tasks` (at least one), named after the oldest stuck task.
KernelEvent pileup_event(const std::vector<const collector::DStateTask*>& tasks, bool gpu,
                         const std::string& boot_id, int64_t sample_usec) {
  const auto* oldest =
      *std::min_element(tasks.begin(), tasks.end(), [](const auto* a, const auto* b) {
        return a->first_seen_usec != b->first_seen_usec ? a->first_seen_usec < b->first_seen_usec
                                                        : a->pid < b->pid;
      });
  KernelEvent e;
  e.id = "dstate:" + boot_id + ":" + (gpu ? "gpu:" : "any:") + std::to_string(oldest->pid) + "." +
         std::to_string(oldest->start_ticks);
  e.kind = "dstate-pileup";
  e.rule = "dstate-sampler";
  e.severity = gpu ? Severity::kError : Severity::kWarning;
  e.action = gpu ? "reboot-at-job-boundary" : "investigate";
  e.count = tasks.size();
  e.time_usec = oldest->first_seen_usec;
  e.last_usec = sample_usec;
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
  return e;
}

}  // namespace

NodeState::NodeState(const AgentConfig& cfg, EventLoop& loop)
    : cfg_(cfg), loop_(loop), spool_(Spool::Options{cfg.spool_dir}), events_(cfg.max_node_events) {}

void NodeState::open(std::string boot_id) {
  boot_id_ = std::move(boot_id);
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
}

void NodeState::changed() {
  if (on_change_) on_change_();
}

std::string NodeState::durable_position() {
  std::lock_guard<std::mutex> l(position_mu_);
  return durable_position_copy_;
}

std::map<int64_t, uint64_t> NodeState::running_pids() {
  std::lock_guard<std::mutex> l(pids_mu_);
  return pids_snapshot_;
}

void NodeState::publish_pids() {
  std::lock_guard<std::mutex> l(pids_mu_);
  pids_snapshot_ = jobs_.running_pids();
}

bool NodeState::ingest(std::vector<KernelEvent> events, std::string position) {
  auto done = std::make_shared<std::promise<bool>>();
  auto fut = done->get_future();
  const bool posted = loop_.post(
      [this, done, events = std::move(events), position = std::move(position)]() mutable {
        bool durable = false;
        apply(std::move(events), position, &durable);
        done->set_value(durable);
      });
  if (!posted) return false;
  return fut.get();
}

void NodeState::normalize(KernelEvent& e) const {
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

void NodeState::count_event(const KernelEvent& e, const KernelEvent* previous) {
  const uint64_t before = previous != nullptr ? previous->count : 0;
  const uint64_t delta = e.count > before ? e.count - before : 0;
  if (previous == nullptr) ++stats_.events_by_kind[e.kind];
  if (!from_kernel_log(e)) return;
  if (e.kind == "oom-kill") stats_.oom_kills += delta;
  if (collector::is_gpu_error(e) && e.severity >= Severity::kError && e.action != "none") {
    stats_.gpu_errors += delta;
  }
}

void NodeState::apply(std::vector<KernelEvent> events, const std::string& position, bool* durable) {
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
  if (!fresh.empty()) changed();
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
      apply({}, "", nullptr);
    });
  }
}

void NodeState::on_dstate_sample(collector::DStateSample sample) {
  const collector::HealthPolicy& policy = cfg_.health;
  std::vector<KernelEvent> out;
  auto pileup = [&](bool gpu, uint64_t threshold) {
    if (threshold == 0) return;
    const auto tasks = stuck_tasks(sample, gpu, policy);
    if (tasks.size() < threshold) return;
    KernelEvent e = pileup_event(tasks, gpu, boot_id_, sample.time_usec);
    // The same pile-up is re-emitted only when it grew or shrank, or to refresh it now and then.
    const KernelEvent* prev = events_.find(e.id);
    auto last = pileup_emitted_.find(e.id);
    if (prev != nullptr && prev->count == tasks.size() && last != pileup_emitted_.end() &&
        sample.time_usec - last->second < kPileupRefreshUsec) {
      return;
    }
    pileup_emitted_[e.id] = sample.time_usec;
    out.push_back(std::move(e));
  };
  pileup(true, policy.dstate_gpu_reboot);
  pileup(false, policy.dstate_degraded);
  dstate_ = std::move(sample);
  changed();
  if (!out.empty()) apply(std::move(out), "", nullptr);
}

void NodeState::on_sysfs_snapshot(collector::SysfsSnapshot snapshot,
                                  std::vector<KernelEvent> events) {
  for (const auto& s : snapshot.stuck) {
    if (!sysfs_ || std::none_of(sysfs_->stuck.begin(), sysfs_->stuck.end(),
                                [&](const collector::StuckRead& o) { return o.path == s.path; })) {
      spdlog::error("sysfs read of {} is stuck in the kernel; skipping that file until it returns",
                    s.path);
    }
  }
  sysfs_ = std::move(snapshot);
  changed();
  if (!events.empty()) apply(std::move(events), "", nullptr);
}

void NodeState::on_gpu_holders(collector::GpuHolderScan scan) {
  for (const auto& h : scan.holders) {
    if (jobs_.running().count(h.job_id) != 0) continue;
    const bool seen = gpu_holders_ && std::any_of(gpu_holders_->holders.begin(),
                                                  gpu_holders_->holders.end(), [&](const auto& o) {
                                                    return o.pid == h.pid && o.job_id == h.job_id;
                                                  });
    if (seen) continue;
    std::string devices;
    for (const auto& d : h.devices)
      devices += (devices.empty() ? "" : ", ") + d;
    spdlog::warn("pid {} ({}) of job {}, which is not running here, holds {}", h.pid,
                 log_text(h.comm), h.job_id, devices);
  }
  gpu_holders_ = std::move(scan);
}

std::vector<std::string> NodeState::ib_ports_down_now() const {
  if (!sysfs_) return {};
  return collector::ib_ports_down(sysfs_->ib);
}

void NodeState::load_jobs_from_spool() {
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

JobRecord* NodeState::job(uint64_t job_id) {
  if (JobRecord* j = jobs_.find(job_id)) return j;
  std::vector<nlohmann::json> records = spool_.read_job(job_id);
  if (records.empty()) return nullptr;
  jobs_.restore(job_id, records, now_usec());
  return jobs_.find(job_id);
}

void NodeState::maintain(const std::function<bool(uint64_t job_id)>& busy) {
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
    } else if (j.ended && !busy(id)) {
      ended.emplace_back(last, id);
    }
  }
  for (uint64_t id : expired) {
    if (busy(id)) continue;
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
      if (busy(it->job_id) || (j != nullptr && !j->ended)) continue;
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

NodeEvidence NodeState::evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec,
                                 const NodeVerdict& verdict) {
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
  n.verdict = verdict;
  if (dstate_) {
    n.dstate = dstate_->summary();
    const auto mine = dstate_->by_job.find(job.job_id);
    if (mine != dstate_->by_job.end()) n.job_dstate = mine->second;
  }
  return n;
}

}  // namespace triage::agent
