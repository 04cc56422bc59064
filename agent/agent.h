// slurm-triage-agent: one per compute node. It keeps the node's kernel and hardware evidence in a
// crash-safe spool, ties it to Slurm jobs, serves the local socket (SPANK plugin, CLI, users) and
// the HTTP endpoint (metrics, peer evidence, health), decides the node's health, and when a job
// ends on its watch, gathers the job's evidence from every node and runs the analysis as the job's
// owner.
//
// Agent only owns and wires the parts, each with one role and its own header:
//   NodeState        node_state.h        spool, node events, job table, collector samples
//   NodeFeeds        node_feeds.h        collector threads and the kernel log reader feeding it
//   SocketApi        socket_api.h        local Unix socket and the plugin's inbox
//   HttpApi          http_api.h          /metrics and the munge-authenticated /v1 endpoints
//   render_agent_metrics  agent_metrics.h  the /metrics page
//   JobEndPipeline   job_end_pipeline.h  job end -> evidence -> analysis -> summary
//   DrainController  drain_controller.h  node health -> drain recommendation / auto-drain
//   OutcomeHistory   outcome_history.h   the outcomes of the jobs this node ran (/v1/history)
//   FleetMetrics     fleet_metrics.h     outcome, requeue and drain families of /metrics
//   AccountingComments accounting_comment.h  the job's summary in Slurm's accounting, retried
//   JobRequeue       job_requeue.h       after an analysis: the summary and --triage-requeue
//   LiveMonitor      live_monitor.h      running jobs' logs -> early warnings, live hang verdicts
//
// All state lives on one event-loop thread. Other threads only produce input for it: the kernel
// reader (ingest()), the two collector threads, the periodic ticks, and the worker pool that talks
// to slurmctld and to peers.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/base/periodic_thread.h"
#include "agent/base/worker_pool.h"
#include "agent/health/drain_controller.h"
#include "agent/history/outcome_history.h"
#include "agent/job_end/job_end_pipeline.h"
#include "agent/live/live_monitor.h"
#include "agent/node/kernel_ingest.h"
#include "agent/node/node_feeds.h"
#include "agent/node/node_state.h"
#include "agent/requeue/job_requeue.h"
#include "agent/server/callers.h"
#include "agent/server/fleet_metrics.h"
#include "agent/server/http_api.h"
#include "agent/server/socket_api.h"
#include "agent/slurm/accounting_comment.h"
#include "agent/slurm/shared_slurm.h"
#include "agent/slurm/slurm_client.h"
#include "agent/slurm/slurm_command_runner.h"
#include "common/model.h"

namespace triage::agent {

// In-process knobs that are not triage.conf settings.
struct AgentOptions {
  // Base URL of a peer's HTTP endpoint from its address (Slurm's NodeAddr, else its name); default
  // "http://<address>:<HttpPort>".
  std::function<std::string(const std::string& node)> peer_url;
  std::string boot_id;  // default: <ProcRoot>/sys/kernel/random/boot_id
  bool collectors = true;
  // Whether start() runs the configured KernelSource (agent/node/kernel_ingest.h). Tests that feed
  // ingest() themselves turn it off.
  bool kernel_ingest = true;
  bool notify_systemd = false;
  // scontrol and sinfo for the drain controller (reboot, resume, the partition limit); empty: the
  // real commands (tests answer them from their fake Slurm).
  SlurmCommandRunner health_commands;
};

class Agent {
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

  int http_port() const { return http_.port(); }
  const std::string& boot_id() const { return node_.boot_id(); }
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
  KernelIngestStatus kernel_status() const { return feeds_.kernel_status(); }

 private:
  void start_ticks();
  void notify(const std::string& state);
  // Loop thread: the parts' shared answers.
  NodeEvidence node_evidence(const JobRecord& job, int64_t start_usec, int64_t end_usec);
  LiveMonitor::Hooks live_hooks();
  // slurmctld's record of a job through the shared client (the live loop's and the requeue's).
  JobRequeue::LoadJob load_job();
  nlohmann::json health_on_loop();
  // The "preflight" op (agent/health/preflight.h) and the facts only the frame can gather.
  nlohmann::json preflight_on_loop(uint64_t job_id, const std::string& gpus);
  // Marks the refused job's AdminComment "triage-refused=<node>:<reason>"
  // (agent/slurm/job_comment.h).
  void record_refusal(uint64_t job_id, const std::string& reason);
  // A job_end made durable: to the job-end pipeline, unless the preflight refused the job here.
  void job_ended(JobRecord& j);
  std::string metrics_on_loop();

  AgentConfig cfg_;
  AgentOptions opts_;
  SharedSlurm slurm_;
  CallerPolicy callers_;
  int64_t started_usec_ = 0;

  EventLoop loop_;
  WorkerPool workers_;
  NodeState node_;
  NodeFeeds feeds_;
  DrainController health_;
  OutcomeHistory history_;
  FleetMetrics fleet_;
  JobEndPipeline pipeline_;
  AccountingComments comments_;
  JobRequeue requeue_;
  LiveMonitor live_;
  SocketApi socket_;
  HttpApi http_;
  std::vector<std::unique_ptr<PeriodicThread>> ticks_;
  std::map<std::string, uint64_t> preflight_answers_;  // "fit" | "unfit" -> answers given
  std::set<uint64_t> refused_jobs_;  // jobs the preflight refused here, until their epilog

  std::thread loop_thread_;
  std::atomic<bool> started_{false};
};

}  // namespace triage::agent
