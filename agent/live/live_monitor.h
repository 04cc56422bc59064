// The batch host's live loop (issue 15): every few seconds, each running job with triage on whose
// batch step runs here has its log followed as its owner (agent/live/live_job.h, on a worker), its
// early warnings recorded at once, and its stall judged. A stall, confirmed RUNNING by slurmctld,
// is recorded with its corroboration (the job's D-state tasks and kernel events on its nodes, the
// busy-wait signature in the cluster Prometheus), gets
// an interim `hang (live)` report written by the analyzer as the owner (the job-end path's
// AnalysisRunner), the job's AdminComment (agent/live/hang_comment.h), the metrics, and then
// whatever decide_hang_action allows (scancel or scontrol requeue, agent/live/hang_commands.h).
// A pace warning (a lasting slowdown or a straggler) is recorded, counted and shown in an interim
// report of the running job, and never acted on.
// Each job's live state is saved in its spool file ({"r":"live"}), so a restarted agent resumes
// from the remembered offset with the same record; the job-end pipeline hands the record to the
// final analysis.
//
// Time: every duration (the silence, when a save or a retry is due, when peers are asked again)
// is measured on the monotonic clock of LiveInstant; the wall clock is only recorded and shown
// (analyzer/live_progress.h, "Time as the job lived it").
//
// Attempts: a record belongs to one attempt of the job (LiveAttempt: Slurm's Restarts and start
// time, agent/live/live_decision.h). A requeued job's next attempt is followed afresh, and the
// job-end evidence takes the record of the attempt that ended. Before every cancel or requeue,
// slurmctld must show the flagged attempt still RUNNING, or nothing is run and the record says why;
// a command that fails is tried again, at most kMaxActionTries times in all.
//
// Loop thread only; every blocking call (the owner's open, slurmctld, scontrol, scancel) runs
// through Hooks::offload.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/job_end/analysis_runner.h"
#include "agent/live/live_decision.h"
#include "agent/live/live_job.h"
#include "agent/node/node_state.h"
#include "agent/slurm/slurm_command_runner.h"
#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/stall_verdict.h"

namespace triage::agent {

// How often the running jobs' logs are polled.
inline constexpr int64_t kLivePollMs = 5000;

class LiveMonitor {
 public:
  // The blocking parts and the node's answers, replaceable in tests.
  struct Hooks {
    // Runs `work` off the loop, then the continuation it returns on the loop.
    std::function<void(std::function<std::function<void()>()> work)> offload;
    std::function<std::optional<JobFacts>(uint64_t job_id, std::string& error)> load_job;
    // (load_job is asked again right before each cancel or requeue command.)
    SlurmCommandRunner run_command;  // scontrol/scancel (agent/slurm/slurm_command_runner.h)
    // This node's evidence for a job in a window (usec).
    std::function<NodeEvidence(const JobRecord& job, int64_t start_usec, int64_t end_usec)>
        own_evidence;
    // What the job's other nodes and the cluster Prometheus say now (blocking: run offloaded);
    // `stalled_since_usec` is the job's last step. Unset: nothing beyond this node is asked.
    std::function<RemoteEvidence(const JobFacts& facts, int64_t stalled_since_usec,
                                 int64_t now_usec)>
        remote_evidence;
  };

  struct Stats {
    uint64_t hangs = 0;           // stalls flagged
    uint64_t early_warnings = 0;  // failure lines seen in running jobs
    double stalled_gpu_hours = 0;
    std::map<std::string, uint64_t> actions;  // cancel | requeue done (the command worked)
    uint64_t action_failures = 0;             // tries whose command failed
    uint64_t actions_not_done = 0;            // not run: slurmctld showed another attempt or state
    uint64_t comment_failures = 0;
    uint64_t interim_reports = 0;
    uint64_t poll_failures = 0;  // a poll that threw, or a log the owner cannot read
    uint64_t bytes_scanned = 0;
    uint64_t pace_warnings = 0;  // pace warnings raised (a slowdown or a straggler began)
  };

  LiveMonitor(const AgentConfig& cfg, EventLoop& loop, NodeState& node, Hooks hooks);
  LiveMonitor(const LiveMonitor&) = delete;
  LiveMonitor& operator=(const LiveMonitor&) = delete;

  // Loads the log-signature catalog (the shipped and /etc/slurm/triage.d layers), once for every
  // job; tick() does it when the first job is to be followed, so a node that runs no triage job
  // never holds it. A catalog with errors turns the live loop off (logged once): the post-mortem
  // still runs. Returns whether the catalog is loaded.
  bool load_catalog(const std::vector<std::string>& extra_layers = {});
  bool enabled() const { return plan_ != nullptr; }

  // Starts following the jobs that should be followed, stops following those that ended, and
  // polls every followed job that is not being polled.
  void tick(const LiveInstant& now);

  // The live record of the job's attempt with `restart_count` (memory, else its spool file), for
  // the job-end evidence; nullopt when this node holds none of that attempt.
  std::optional<LiveRecord> record(uint64_t job_id, int restart_count);
  // The record handed to the final analysis of the attempt that ended: from now on no interim
  // report of the job is written, and one still running is killed, so that it can never land after
  // the final report.
  std::optional<LiveRecord> hand_over(uint64_t job_id, int restart_count);

  size_t followed() const { return jobs_.size(); }
  // Followed jobs whose pace warning stands now.
  size_t pace_warned() const;
  const Stats& stats() const { return stats_; }
  void kill_all() { reports_.kill_all(); }

 private:
  struct Followed {
    std::shared_ptr<LiveJob> job;  // null until set up
    JobFacts facts;
    LiveAttempt attempt;       // the attempt followed (from slurmctld at the set-up)
    uint64_t attempt_seq = 0;  // the job record's JobRecord::attempt_seq when following began
    Identity owner;
    std::string home;
    LiveRecord record;
    FollowState follow;  // after the last poll
    int64_t lines = 0;
    bool busy = false;       // a setup, poll or hang step is under way
    int64_t retry_mono = 0;  // a setup that failed is tried again from then
    bool gone = false;  // slurmctld says it ended or runs another attempt (no job_end reached us)
    int64_t saved_mono = 0;
    uint64_t saved_offset = 0;
    // Stalled GPU-hours are counted up to here (monotonic), from the flagged stall's last step.
    int64_t gpu_counted_mono = 0;
    int64_t last_step_mono = 0;
    std::string last_error;
    RemoteEvidence remote;          // the last answer of the job's other nodes and the Prometheus
    bool handed_over = false;       // the final analysis has the record: no interim report any more
    int64_t action_retry_mono = 0;  // a cancel or requeue whose try failed runs again from then
    bool interim_running = false;   // an interim analysis of the job runs
    bool interim_again = false;     // ... and another is due when it ends
    std::string pace_reported;      // the pace warning's key its last interim report showed
  };

  void start(uint64_t job_id, const JobRecord& job, const LiveInstant& now);
  void set_up(uint64_t job_id, std::optional<JobFacts> facts, std::optional<Identity> owner,
              std::string home, const std::string& error, const LiveInstant& now);
  void poll(uint64_t job_id, Followed& f, const LiveInstant& now);
  void on_poll(LiveObservation obs);
  void judge(uint64_t job_id, Followed& f, const StallVerdict& v, const LiveInstant& now);
  void carry_out(uint64_t job_id, const StallVerdict& v, const NodeEvidence& own,
                 std::optional<JobFacts> facts, std::optional<RemoteEvidence> remote,
                 const LiveInstant& now);
  void flag(uint64_t job_id, Followed& f, const StallVerdict& v, const Corroboration& c,
            const HangDecision& d, const LiveInstant& now);
  // Records the action and runs one try of its command, once slurmctld shows the flagged attempt.
  void act(uint64_t job_id, HangOutcome outcome, const LiveInstant& now);
  void on_action(uint64_t job_id, const std::string& what, const SlurmCommandResult& done,
                 const std::string& not_done, const LiveInstant& now);
  void set_comment(uint64_t job_id, const Followed& f);
  // `own`: this node's evidence as the stall or pace was judged on it. One interim analysis of a
  // job at a time: one asked for while another runs follows it, so an older report never lands
  // last.
  void write_interim_report(uint64_t job_id, Followed& f, const NodeEvidence& own);
  void save(uint64_t job_id, Followed& f, const LiveInstant& now);
  void stop(uint64_t job_id, const LiveInstant& now);
  NodeEvidence own_evidence(uint64_t job_id, const Followed& f, const LiveInstant& now);
  // Every node's evidence: this node's first, then the other nodes' last answers.
  static std::vector<NodeEvidence> job_nodes(const Followed& f, const NodeEvidence& own);
  static Corroboration corroboration(const Followed& f, const NodeEvidence& own);
  HangDecision decide(const JobRecord& job, const Followed& f, const StallVerdict& v,
                      const Corroboration& c) const;

  const AgentConfig& cfg_;
  NodeState& node_;
  Hooks hooks_;
  LiveStallPolicy policy_;
  std::unique_ptr<SignatureCatalog> catalog_;
  std::unique_ptr<ScanPlan> plan_;
  bool catalog_failed_ = false;
  AnalysisRunner reports_;
  std::map<uint64_t, Followed> jobs_;
  Stats stats_;
};

}  // namespace triage::agent
