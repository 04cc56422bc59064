#include "agent/node/node_feeds.h"

#include <unistd.h>

#include <cstdio>

#include <spdlog/spdlog.h>
#include <systemd/sd-daemon.h>

#include "common/boot_id.h"
#include "common/rules_file.h"
#include "common/safe_io.h"
#include "common/text.h"

namespace triage::agent {

namespace {

// The boot id file the agent (and the kmsg reader, whose positions carry the boot) reads: the
// fixture tree's when it has one, else the real one.
std::string boot_id_path(const std::string& proc_root) {
  const std::string p = proc_root + "/sys/kernel/random/boot_id";
  return ::access(p.c_str(), R_OK) == 0 ? p : "/proc/sys/kernel/random/boot_id";
}

}  // namespace

collector::IbThresholds load_ib_thresholds(const AgentConfig& cfg) {
  const RulesLoad load = load_rule_layers(agent_rule_layers(cfg));
  collector::IbThresholdsLoad t = collector::ib_thresholds_from(load.sections);
  // A bad line keeps that threshold's default; the port evidence is worth more than a stop.
  for (const InputError& e : t.errors)
    spdlog::error("InfiniBand port thresholds: {}", e.what());
  return t.thresholds;
}

std::string read_agent_boot_id(const std::string& proc_root) {
  // In the journal's spelling (common/boot_id.h normalises it), so that the health check can tell
  // this boot's events from history.
  try {
    return triage::read_boot_id(boot_id_path(proc_root));
  } catch (const std::exception&) {
    return "unknown-boot";
  }
}

std::string read_agent_boot_id(const std::string& proc_root, const std::string& boot_id_file) {
  if (boot_id_file.empty()) return read_agent_boot_id(proc_root);
  try {
    return triage::read_boot_id(boot_id_file);
  } catch (const std::exception&) {
    return "unknown-boot";
  }
}

NodeFeeds::NodeFeeds(const AgentConfig& cfg, EventLoop& loop, NodeState& node)
    : cfg_(cfg), loop_(loop), node_(node) {}

NodeFeeds::~NodeFeeds() {
  shut_down();
}

void NodeFeeds::start_collectors() {
  sampler_ = std::make_unique<collector::DStateSampler>(collector::DStateSampler::Options{
      cfg_.proc_root, std::chrono::milliseconds(cfg_.dstate_read_timeout_ms),
      std::chrono::seconds(cfg_.dstate_persistent_after_sec), cfg_.max_stuck_readers,
      cfg_.cgroup_root, std::chrono::seconds(cfg_.dstate_whole_node_interval_sec)});
  hw_reader_ = std::make_unique<collector::HwCounterReader>(collector::HwCounterReader::Options{
      cfg_.sysfs_root, std::chrono::milliseconds(cfg_.sysfs_read_timeout_ms),
      cfg_.max_stuck_readers, cfg_.infiniband_dir, cfg_.gpu_device_dir});
  hw_watch_ = std::make_unique<collector::HwCounterWatch>(cfg_.node_name, node_.boot_id());
  ib_watch_ = std::make_unique<collector::IbPortWatch>(cfg_.node_name, node_.boot_id(),
                                                       load_ib_thresholds(cfg_));
  dstate_thread_ = std::make_unique<PeriodicThread>("dstate", cfg_.dstate_interval_ms, [this] {
    collector::DStateSample s = sampler_->sample(node_.running_pids());
    loop_.post([this, s = std::move(s)]() mutable { node_.on_dstate_sample(std::move(s)); });
  });
  sysfs_thread_ = std::make_unique<PeriodicThread>("sysfs", cfg_.sysfs_interval_ms, [this] {
    collector::SysfsSnapshot snap = hw_reader_->read();
    std::vector<KernelEvent> evs = hw_watch_->update(snap);
    std::vector<KernelEvent> ib = ib_watch_->update(snap);
    evs.insert(evs.end(), std::make_move_iterator(ib.begin()), std::make_move_iterator(ib.end()));
    loop_.post([this, snap = std::move(snap), evs = std::move(evs)]() mutable {
      node_.on_sysfs_snapshot(std::move(snap), std::move(evs));
    });
  });
  dstate_thread_->start();
  sysfs_thread_->start();
  gpu_scanner_ = std::make_unique<collector::GpuHolderScanner>(collector::GpuHolderScanner::Options{
      cfg_.proc_root, cfg_.gpu_device_dir, std::chrono::milliseconds(cfg_.dstate_read_timeout_ms),
      cfg_.max_stuck_readers});
  gpu_holder_thread_ =
      std::make_unique<PeriodicThread>("gpu-holders", cfg_.gpu_holder_interval_ms, [this] {
        collector::GpuHolderScan s = gpu_scanner_->scan();
        loop_.post([this, s = std::move(s)]() mutable { node_.on_gpu_holders(std::move(s)); });
      });
  gpu_holder_thread_->start();
}

void NodeFeeds::start_kernel_ingest(bool wanted) {
  if (!wanted || cfg_.kernel_source == "none") {
    spdlog::info("kernel log: not read (KernelSource=none)");
    return;
  }
  KernelIngestOptions o;
  o.source = cfg_.kernel_source;
  o.path = cfg_.kernel_path;
  o.rule_layers = agent_rule_layers(cfg_);
  o.host = cfg_.node_name;
  o.boot_id_path = boot_id_path(cfg_.proc_root);
  // Without systemd as PID 1 there is no journald writing a journal for this boot.
  o.journal_available = sd_booted() > 0;
  kernel_ingest_ = std::make_unique<KernelIngest>(
      std::move(o),
      [this](std::vector<KernelEvent> events, std::string position) {
        return node_.ingest(std::move(events), std::move(position));
      },
      [this] { return node_.durable_position(); });
  kernel_ingest_->start();
}

void NodeFeeds::stop_kernel_ingest() {
  if (kernel_ingest_) kernel_ingest_->stop();
}

void NodeFeeds::shut_down() {
  kernel_ingest_.reset();
  if (dstate_thread_) dstate_thread_->stop();
  if (sysfs_thread_) sysfs_thread_->stop();
  if (gpu_holder_thread_) gpu_holder_thread_->stop();
}

void NodeFeeds::kernel_look_again() {
  if (kernel_ingest_) kernel_ingest_->look_again();
}

KernelIngestStatus NodeFeeds::kernel_status() const {
  if (kernel_ingest_) return kernel_ingest_->status();
  KernelIngestStatus s;
  s.source = "none";
  s.state = "off";
  return s;
}

}  // namespace triage::agent
