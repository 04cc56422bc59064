// The job-end hand-over on the analysis leader: queue the ended job, wait until the kernel log
// reader has read what the kernel wrote up to the job's end (EvidenceSettleDelay at the most),
// gather every node's evidence (slurmctld's facts, the peers' events, on a worker), run the
// analyzer as the job's owner and keep a root-owned summary. When the analysis worked, the job's
// outcome record (agent/history/outcome_record.h) goes into this node's history and is handed to
// every other node of the job (POST /v1/history, on a worker: a peer that is down costs one
// attempt, a log line and a count, never the job-end path), and the analysed job is handed on
// (set_on_analysed: the accounting summary and the requeue, agent/requeue/job_requeue.h). The
// decisions along the way are the plain functions of agent/job_end/job_end.h.
//
// Loop thread only; slurmctld, the peers and the passwd database are asked on a worker.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/base/config.h"
#include "agent/base/event_loop.h"
#include "agent/base/worker_pool.h"
#include "agent/history/outcome_record.h"
#include "agent/job_end/analysis_runner.h"
#include "agent/job_end/job_end.h"
#include "agent/job_end/peer_evidence.h"
#include "agent/node/job_table.h"
#include "agent/node/kernel_ingest.h"
#include "agent/node/node_state.h"
#include "agent/slurm/shared_slurm.h"
#include "common/model.h"
#include "common/privilege.h"

namespace triage::agent {

class JobEndPipeline {
 public:
  using PeerUrl = agent::PeerUrl;
  // This node's evidence for a job in a window (usec; 0: the job's own).
  using OwnEvidence =
      std::function<NodeEvidence(const JobRecord& job, int64_t start_usec, int64_t end_usec)>;

  // The kernel log reader: where it is, and a way to make it look at its source now.
  struct KernelReader {
    std::function<KernelIngestStatus()> status;
    std::function<void()> look_again;
  };

  // Keeps an outcome record in this node's history.
  using OnOutcome = std::function<void(const OutcomeRecord&)>;
  // What follows a worked analysis on this node (the accounting summary, the requeue).
  using OnAnalysed = std::function<void(AnalysedJob)>;

  struct Stats {
    std::map<std::string, uint64_t> analyses;  // result -> count
    uint64_t peer_fetch_failures = 0;
    uint64_t history_pushes = 0;  // outcome records meant for another node of the job
    // ... that did not arrive (not retried: the record stays on this node and the job's other
    // nodes); a node that did not answer for the evidence is not tried again.
    uint64_t history_push_failures = 0;
  };

  // `peer_url` is read when evidence is gathered (the agent fills it in once its port is known).
  JobEndPipeline(const AgentConfig& cfg, EventLoop& loop, NodeState& node, WorkerPool& workers,
                 SharedSlurm& slurm, const PeerUrl& peer_url, OwnEvidence own_evidence,
                 KernelReader kernel);
  JobEndPipeline(const JobEndPipeline&) = delete;
  JobEndPipeline& operator=(const JobEndPipeline&) = delete;

  void set_on_outcome(OnOutcome on_outcome) { on_outcome_ = std::move(on_outcome); }
  void set_on_analysed(OnAnalysed on_analysed) { on_analysed_ = std::move(on_analysed); }
  // The batch host's live record of the job's attempt that ended (its restart count), handed to
  // its final analysis when it starts (the live side then writes no interim report of the job any
  // more).
  using LiveRecordOf = std::function<std::optional<LiveRecord>(uint64_t job_id, int restart_count)>;
  void set_live_record(LiveRecordOf live_record) { live_record_ = std::move(live_record); }
  // Each node's leaf switch (node -> switch; empty: no topology), asked on a worker for a job of
  // two or more nodes, so that the report can say when a network failure's nodes share a switch.
  using LeafSwitches = std::function<std::map<std::string, std::string>()>;
  void set_leaf_switches(LeafSwitches leaf_switches) { leaf_switches_ = std::move(leaf_switches); }

  // A job_end arrived (or a restart found the job still waiting for its analysis).
  void on_job_end(JobRecord& job);
  // Hands on the jobs that ended before a restart and still wait for their analysis.
  void resume_waiting();
  // Kills the running analyzers (they run again after a restart: no summary yet).
  void kill_all() { analyses_.kill_all(); }

  // Whether the job is between its queueing and its summary (its records must stay).
  bool busy(uint64_t job_id) const { return in_pipeline_.count(job_id) != 0; }
  size_t queued() const { return queue_.size(); }
  size_t running() const { return analyses_.running(); }
  const std::deque<nlohmann::json>& recent_summaries() const { return recent_summaries_; }
  const Stats& stats() const { return stats_; }

 private:
  void enqueue(uint64_t job_id);
  void pump();
  void settle(uint64_t job_id, int64_t ended_usec);
  void gather_evidence(uint64_t job_id);
  void launch(uint64_t job_id, const JobFacts& facts, std::vector<NodeEvidence> peers,
              std::optional<Identity> who, const std::string& home, const std::string& error);
  void done(uint64_t job_id, const JobFacts& facts, const std::string& target,
            const std::vector<std::string>& unreachable, const AnalysisOutcome& outcome);
  void record_summary(uint64_t job_id, nlohmann::json summary);
  // The record kept and handed on; nullopt when the analyzer's answer is unusable.
  std::optional<OutcomeRecord> record_outcome(const JobFacts& facts, const AnalysisOutcome& outcome,
                                              const std::map<std::string, std::string>& peers,
                                              const std::vector<std::string>& unreachable);
  void hand_on(const JobFacts& facts, OutcomeRecord record, const AnalysisOutcome& outcome);
  // `peers`: node -> base URL, where its evidence was asked for.
  void push_outcome(const OutcomeRecord& record, const std::map<std::string, std::string>& peers,
                    const std::vector<std::string>& unreachable);

  const AgentConfig& cfg_;
  EventLoop& loop_;
  NodeState& node_;
  WorkerPool& workers_;
  SharedSlurm& slurm_;
  const PeerUrl& peer_url_;
  OwnEvidence own_evidence_;
  KernelReader kernel_;
  OnOutcome on_outcome_;
  OnAnalysed on_analysed_;
  LiveRecordOf live_record_;
  LeafSwitches leaf_switches_;
  std::map<uint64_t, std::map<std::string, std::string>> leaf_of_;  // per job, until its launch
  AnalysisRunner analyses_;

  std::deque<uint64_t> queue_;
  std::set<uint64_t> in_pipeline_;
  // Where each job's other nodes were reached, from the evidence until the outcome is handed on.
  std::map<uint64_t, std::map<std::string, std::string>> peer_bases_;
  // Each running analysis as it was started, for what follows it (a report pass runs it again).
  std::map<uint64_t, AnalysisRequest> requests_;
  std::deque<nlohmann::json> recent_summaries_;
  Stats stats_;
};

}  // namespace triage::agent
