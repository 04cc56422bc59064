// slurm-triage-agent: one per compute node. It keeps the node's kernel and hardware evidence in a
// crash-safe spool, ties it to Slurm jobs, serves the local socket (SPANK plugin, CLI, users) and
// the HTTP endpoint (metrics, peer evidence, health), decides the node's health, and when a job
// ends on its watch, gathers the job's evidence from every node and runs the analysis as the job's
// owner.
//
// All state lives on one event-loop thread. Other threads only produce input for it: the kernel
// ingest glue (ingest()), the two collector threads, and the worker pool that talks to slurmctld
// and to peers.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/analysis_runner.h"
#include "agent/config.h"
#include "agent/event_loop.h"
#include "agent/event_store.h"
#include "agent/http_message.h"
#include "agent/job_table.h"
#include "agent/kernel_ingest.h"
#include "agent/periodic_thread.h"
#include "agent/slurm_client.h"
#include "agent/spool.h"
#include "agent/stream_server.h"
#include "agent/worker_pool.h"
#include "collector/proc/dstate_sampler.h"
#include "collector/sysfs/hw_counters.h"
#include "common/model.h"

namespace triage::agent {

// In-process knobs that are not triage.conf settings.
struct AgentOptions {
  // Base URL of a peer's HTTP endpoint from its address (Slurm's NodeAddr, else its name); default
  // "http://<address>:<HttpPort>".
  std::function<std::string(const std::string& node)> peer_url;
  std::string boot_id;  // default: <ProcRoot>/sys/kernel/random/boot_id
  bool collectors = true;
  // Whether start() runs the configured KernelSource (agent/kernel_ingest.h). Tests that feed
  // ingest() themselves turn it off.
  bool kernel_ingest = true;
  bool notify_systemd = false;
};

// Members are grouped with the mutex that guards them; ordering them for size instead would save
// 32 bytes in the one Agent of the process.
class Agent {  // NOLINT(clang-analyzer-optin.performance.Padding): see above
 public:
  Agent(AgentConfig config, std::unique_ptr<SlurmClient> slurm, AgentOptions options = {});
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Replays the spool, binds the socket and the HTTP port, starts the collectors. Throws
  // std::runtime_error / std::system_error when the agent cannot work at all.
  void start();
  // Runs the event loop on the calling thread until stop().
  void run();
  // Runs the event loop on a thread of its own (tests, benchmarks).
  void run_in_background();
  // Thread-safe. Ends the loop; run()/the background thread return. In-flight analyses are killed
  // (they run again after a restart: their jobs have no summary yet).
  void stop();

  int http_port() const { return http_port_; }
  const std::string& boot_id() const { return boot_id_; }
  const AgentConfig& config() const { return cfg_; }

  // Kernel events and the source position they cover. Blocks until the events are durable in the
  // spool (true) or could not be made durable (false: they are kept and retried; the position is
  // not advanced). Thread-safe; not to be called from the loop thread.
  bool ingest(std::vector<KernelEvent> events, std::string position);
  // The position the kernel source resumes from after a restart (durable).
  std::string kernel_position();

  // Runs `fn` on the loop thread and waits for it.
  void call(const std::function<void()>& fn);

  NodeVerdict verdict();
  std::string metrics();
  nlohmann::json health_report();
  // The kernel reader's state; source "none" when KernelSource=none or ingest is off.
  KernelIngestStatus kernel_status() const;

 private:
  // agent.cpp: state, ingest, collectors, health, maintenance
  void apply_ingest(std::vector<KernelEvent> events, const std::string& position, bool* durable);
  void normalize(KernelEvent& e) const;
  void on_dstate_sample(collector::DStateSample sample);
  void on_sysfs_snapshot(collector::SysfsSnapshot snapshot, std::vector<KernelEvent> events);
  void publish_pids();
  void evaluate_health();
  void schedule_health();
  void maintain();
  void load_jobs_from_spool();
  JobRecord* job(uint64_t job_id);  // loads an evicted job from the spool on demand
  NodeEvidence node_evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec);
  void notify(const std::string& state);
  void count_event(const KernelEvent& e, const KernelEvent* previous);
  void start_kernel_ingest();

  // agent_socket.cpp: the local socket and the inbox
  void on_socket_input(StreamServer::Conn& conn);
  nlohmann::json handle_request(uid_t uid, const nlohmann::json& request);
  nlohmann::json handle_lifecycle(uid_t uid, const nlohmann::json& request);
  void scan_inbox();
  bool privileged(uid_t uid) const;

  // agent_http.cpp: HTTP endpoint and metrics
  void on_http_input(StreamServer::Conn& conn);
  std::string handle_http(const HttpRequest& req);
  std::string render_metrics();

  // agent_jobend.cpp: the job-end hand-over and auto-drain
  void on_job_end(JobRecord& job);
  void queue_analysis(uint64_t job_id);
  void pump_analyses();
  void gather_evidence(uint64_t job_id);
  void launch_analysis(uint64_t job_id, const JobFacts& facts, std::vector<NodeEvidence> peers,
                       std::optional<Identity> who, const std::string& home,
                       const std::string& error);
  void analysis_done(uint64_t job_id, const JobFacts& facts, const std::string& target,
                     const std::vector<std::string>& unreachable, const AnalysisOutcome& outcome);
  void record_summary(uint64_t job_id, nlohmann::json summary);
  void maybe_drain();

  AgentConfig cfg_;
  AgentOptions opts_;
  std::unique_ptr<SlurmClient> slurm_;
  std::mutex slurm_mu_;  // libslurm calls, one at a time
  std::optional<uid_t> slurm_uid_;
  std::string boot_id_;

  EventLoop loop_;
  Spool spool_;
  EventStore events_;
  JobTable jobs_;
  std::string kernel_position_;
  std::vector<KernelEvent> pending_events_;  // applied but not yet durable
  std::string pending_position_;
  bool retry_scheduled_ = false;
  std::mutex position_mu_;
  std::string durable_position_copy_;

  std::unique_ptr<StreamServer> socket_;
  std::unique_ptr<StreamServer> http_;
  int http_port_ = 0;
  UniqueFd inotify_;
  bool inbox_scan_scheduled_ = false;
  AnalysisRunner analyses_;
  std::unique_ptr<WorkerPool> workers_;

  std::unique_ptr<collector::DStateSampler> sampler_;
  std::unique_ptr<collector::HwCounterReader> hw_reader_;
  std::unique_ptr<collector::HwCounterWatch> hw_watch_;
  std::unique_ptr<PeriodicThread> dstate_thread_;
  std::unique_ptr<PeriodicThread> sysfs_thread_;
  std::unique_ptr<KernelIngest> kernel_ingest_;
  std::mutex pids_mu_;
  std::map<int64_t, uint64_t> pids_snapshot_;

  std::optional<collector::DStateSample> dstate_;
  std::optional<collector::SysfsSnapshot> sysfs_;
  std::map<std::string, int64_t> pileup_emitted_;  // dstate-pileup id -> last emission (usec)
  NodeVerdict verdict_;
  bool health_dirty_ = true;
  bool health_scheduled_ = false;

  std::deque<uint64_t> analysis_queue_;
  std::set<uint64_t> in_pipeline_;
  std::deque<nlohmann::json> recent_summaries_;

  std::string drain_state_ = "none";
  std::string drain_reason_;
  bool drain_in_flight_ = false;
  int64_t drain_last_attempt_usec_ = 0;
  std::string drained_for_;

  struct Stats {
    std::map<std::string, uint64_t> events_by_kind;
    uint64_t oom_kills = 0;
    uint64_t gpu_errors = 0;
    uint64_t duplicates_dropped = 0;
    uint64_t spool_dropped_events = 0;          // pending events given up on (spool full too long)
    std::map<std::string, uint64_t> lifecycle;  // op -> accepted
    std::map<std::string, uint64_t> rejected;   // reason -> count
    std::map<std::string, uint64_t> analyses;   // result -> count
    std::map<int, uint64_t> http_requests;      // status -> count
    uint64_t inbox_applied = 0;
    uint64_t inbox_refused = 0;
    uint64_t peer_fetch_failures = 0;
    uint64_t spool_torn_lines = 0;
    uint64_t spool_bad_lines = 0;
    SpoolUsage spool_usage;
    int64_t started_usec = 0;
  } stats_;

  std::thread loop_thread_;
  std::atomic<bool> started_{false};
};

}  // namespace triage::agent
