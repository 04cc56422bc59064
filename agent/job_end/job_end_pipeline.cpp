#include "agent/job_end/job_end_pipeline.h"

#include <algorithm>

#include <spdlog/spdlog.h>

#include "agent/job_end/job_end.h"
#include "agent/job_end/peer_evidence.h"
#include "agent/net/peer_client.h"
#include "agent/slurm/job_comment.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kRecentSummaries = 50;
// How often a job waiting for the kernel reader looks whether it has caught up.
constexpr int64_t kSettlePollMs = 10;

// The reader is live while it reads or is about to (a restarted agent's reader starts behind);
// one that is failing or off will not catch up by waiting.
KernelSourceProgress progress_of(const KernelIngestStatus& s) {
  KernelSourceProgress p;
  p.live = s.state == "starting" || s.state == "reading" || s.state == "waiting";
  p.caught_up_usec = s.caught_up_usec;
  return p;
}

// What the analysis runs as, resolved on a worker (the passwd database may be slow).
struct Owner {
  std::optional<Identity> who;
  std::string home;
  std::string error;
};

Owner owner_of(const JobFacts& facts) {
  Owner o;
  if (!facts.uid) {
    o.error = "the job's owner is unknown";
    return o;
  }
  try {
    gid_t gid = facts.gid.value_or(0);
    o.who = identity_for_uid(*facts.uid, facts.gid ? &gid : nullptr);
    o.home = home_of(*facts.uid);
  } catch (const std::exception& e) {
    o.error = e.what();
  }
  return o;
}

// slurmctld's facts merged with the epilog's; the epilog's alone when slurmctld cannot answer.
JobFacts job_facts(SharedSlurm& slurm, uint64_t job_id, const JobFacts& epilog) {
  return slurm.with([&](SlurmClient* c) {
    std::string error;
    std::optional<JobFacts> ctld = c != nullptr ? c->load_job(job_id, error) : std::nullopt;
    if (ctld) return merge_facts(std::move(*ctld), epilog);
    spdlog::info("job {}: slurmctld facts unavailable ({}); using the epilog's", job_id,
                 error.empty() ? "no client" : log_text(error));
    return epilog;
  });
}

// The evidence handed to the analyzer: every node of the job in the job's order, this node's own
// first when the job's node list does not name it.
std::vector<NodeEvidence> order_nodes(const JobFacts& facts, const std::string& self,
                                      const NodeEvidence& own, std::vector<NodeEvidence> peers) {
  std::vector<NodeEvidence> nodes;
  for (const std::string& node : facts.nodes) {
    if (node == self) {
      nodes.push_back(own);
      continue;
    }
    for (auto& p : peers) {
      if (p.host == node) nodes.push_back(std::move(p));
    }
  }
  if (std::none_of(nodes.begin(), nodes.end(),
                   [&](const NodeEvidence& n) { return n.host == self; })) {
    nodes.insert(nodes.begin(), own);
  }
  return nodes;
}

}  // namespace

JobEndPipeline::JobEndPipeline(const AgentConfig& cfg, EventLoop& loop, NodeState& node,
                               WorkerPool& workers, SharedSlurm& slurm, const PeerUrl& peer_url,
                               OwnEvidence own_evidence, KernelReader kernel)
    : cfg_(cfg),
      loop_(loop),
      node_(node),
      workers_(workers),
      slurm_(slurm),
      peer_url_(peer_url),
      own_evidence_(std::move(own_evidence)),
      kernel_(std::move(kernel)),
      analyses_(loop) {}

void JobEndPipeline::on_job_end(JobRecord& j) {
  if (j.analysis || in_pipeline_.count(j.job_id) != 0) return;
  if (!is_analysis_leader(j, cfg_.node_name)) return;  // the leader will ask us for our evidence
  if (j.mode == "off") {
    record_summary(j.job_id, skipped_summary(j.job_id, "--triage=off", now_usec()));
    return;
  }
  enqueue(j.job_id);
}

void JobEndPipeline::resume_waiting() {
  std::vector<uint64_t> waiting;
  for (const auto& [id, j] : node_.jobs().jobs()) {
    if (j.ended && !j.analysis) waiting.push_back(id);
  }
  for (uint64_t id : waiting)
    on_job_end(*node_.jobs().find(id));
}

void JobEndPipeline::enqueue(uint64_t job_id) {
  if (std::find(queue_.begin(), queue_.end(), job_id) != queue_.end()) return;
  queue_.push_back(job_id);
  pump();
}

void JobEndPipeline::pump() {
  while (in_pipeline_.size() < cfg_.analysis_concurrency && !queue_.empty()) {
    const uint64_t id = queue_.front();
    queue_.pop_front();
    in_pipeline_.insert(id);
    if (kernel_.look_again) kernel_.look_again();
    settle(id, monotonic_usec());
  }
}

// Kernel lines about the job's last moments may reach the reader after the epilog: the evidence
// waits until the reader has looked at its source since the job ended and found nothing more.
void JobEndPipeline::settle(uint64_t job_id, int64_t ended_usec) {
  std::vector<KernelSourceProgress> sources;
  if (kernel_.status) sources.push_back(progress_of(kernel_.status()));
  if (evidence_settled(sources, ended_usec, monotonic_usec(), cfg_.evidence_settle_ms * 1000)) {
    gather_evidence(job_id);
    return;
  }
  loop_.after(kSettlePollMs, [this, job_id, ended_usec] { settle(job_id, ended_usec); });
}

void JobEndPipeline::gather_evidence(uint64_t job_id) {
  JobRecord* j = node_.job(job_id);
  if (j == nullptr) {
    in_pipeline_.erase(job_id);
    pump();
    return;
  }
  const JobFacts epilog = facts_from_epilog(*j, cfg_.node_name);
  // The attempt that ended, as its prolog saw it: slurmctld (and the epilog) already count the
  // requeue that ended a requeued attempt, and its evidence (the live record above all) is that
  // attempt's.
  const std::optional<int> ended_attempt = j->restart_count;
  const std::string self = cfg_.node_name;
  const PeerUrl peer_url = peer_url_;
  const PeerFetchOptions fetch = peer_fetch_options(cfg_);
  const bool submitted =
      workers_.submit([this, job_id, epilog, ended_attempt, self, peer_url, fetch] {
        // On a worker: slurmctld, peers and the passwd database may all be slow.
        JobFacts facts = job_facts(slurm_, job_id, epilog);
        if (ended_attempt) facts.restart_count = *ended_attempt;
        const std::vector<PeerRequest> requests =
            peer_requests(slurm_, job_id, facts.nodes,
                          EvidenceWindow{facts.start_time, facts.end_time}, self, peer_url);
        std::vector<NodeEvidence> peers;
        for (const PeerResponse& r : fetch_from_peers(requests, fetch))
          peers.push_back(peer_evidence(r));
        // Where the peers were reached: the job's outcome goes there too, without asking again.
        std::map<std::string, std::string> bases;
        for (const PeerRequest& r : requests)
          bases[r.host] = r.base_url;
        Owner owner = owner_of(facts);
        std::map<std::string, std::string> leaf_of;
        if (leaf_switches_ && facts.nodes.size() >= 2) leaf_of = leaf_switches_();
        loop_.post([this, job_id, facts, peers = std::move(peers), owner = std::move(owner),
                    bases = std::move(bases), leaf_of = std::move(leaf_of)]() mutable {
          peer_bases_[job_id] = std::move(bases);
          leaf_of_[job_id] = std::move(leaf_of);
          launch(job_id, facts, std::move(peers), owner.who, owner.home, owner.error);
        });
      });
  if (!submitted) in_pipeline_.erase(job_id);
}

void JobEndPipeline::launch(uint64_t job_id, const JobFacts& facts, std::vector<NodeEvidence> peers,
                            std::optional<Identity> who, const std::string& home,
                            const std::string& error) {
  JobRecord* j = node_.job(job_id);
  std::vector<std::string> unreachable;
  for (const auto& p : peers) {
    if (!p.reachable) {
      unreachable.push_back(p.host);
      ++stats_.peer_fetch_failures;
      spdlog::warn("job {}: no evidence from {}: {}", job_id, p.host, log_text(p.error));
    }
  }
  const std::string target = analysis_target(facts);
  if (j == nullptr || !who) {
    AnalysisOutcome failed;
    failed.job_id = job_id;
    failed.err =
        j == nullptr ? "the job's records are gone" : "cannot run as the job's owner: " + error;
    done(job_id, facts, target, unreachable, failed);
    return;
  }
  Evidence ev;
  ev.job = facts;
  ev.report_path = expand_report_path(cfg_.report_path, facts);
  const NodeEvidence own = own_evidence_(*j, facts.start_time * 1000000, facts.end_time * 1000000);
  ev.nodes = order_nodes(facts, cfg_.node_name, own, std::move(peers));
  if (const auto leaf = leaf_of_.find(job_id); leaf != leaf_of_.end()) {
    for (NodeEvidence& n : ev.nodes) {
      if (const auto s = leaf->second.find(n.host); s != leaf->second.end())
        n.leaf_switch = s->second;
    }
    leaf_of_.erase(leaf);
  }
  // The preflight's refusal on another node, as slurmctld's AdminComment for the job records it.
  if (auto moved = refused_from_comment(facts.admin_comment)) ev.moved.push_back(std::move(*moved));
  if (live_record_) ev.live = live_record_(job_id, facts.restart_count);
  AnalysisRequest req;
  req.job_id = job_id;
  req.argv = analyzer_argv(cfg_.analyzer_path, facts.mode, cfg_.stall_after_sec, target);
  req.who = *who;
  req.home = home;
  req.stdin_data =
      nlohmann::json(ev).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  req.timeout_ms = cfg_.analysis_timeout_sec * 1000;
  req.output_max = cfg_.analysis_output_max;
  spdlog::info("job {}: analysing {} as uid {} ({} node(s), {} unreachable)", job_id,
               log_text(target), who->uid, ev.nodes.size(), unreachable.size());
  if (on_analysed_) requests_[job_id] = req;
  analyses_.start(std::move(req),
                  [this, job_id, facts, target, unreachable](const AnalysisOutcome& o) {
                    done(job_id, facts, target, unreachable, o);
                  });
}

void JobEndPipeline::done(uint64_t job_id, const JobFacts& facts, const std::string& target,
                          const std::vector<std::string>& unreachable,
                          const AnalysisOutcome& outcome) {
  nlohmann::json s = analysis_summary(facts, target, outcome, unreachable, now_usec());
  const std::string result = s.value("result", "failed");
  if (result != "ok") {
    spdlog::warn("job {}: analysis {}: {}", job_id, result,
                 log_text(s.value("error", s.value("exit", ""))));
  } else {
    spdlog::info("job {}: analysis done in {} ms", job_id, outcome.duration_ms);
  }
  record_summary(job_id, std::move(s));
  const auto bases = peer_bases_.find(job_id);
  std::optional<OutcomeRecord> record;
  if (result == "ok" && bases != peer_bases_.end())
    record = record_outcome(facts, outcome, bases->second, unreachable);
  if (bases != peer_bases_.end()) peer_bases_.erase(bases);
  if (record) hand_on(facts, std::move(*record), outcome);
  requests_.erase(job_id);
  in_pipeline_.erase(job_id);
  pump();
}

void JobEndPipeline::hand_on(const JobFacts& facts, OutcomeRecord record,
                             const AnalysisOutcome& outcome) {
  const auto req = requests_.find(facts.job_id);
  const JobRecord* j = node_.job(facts.job_id);
  if (!on_analysed_ || req == requests_.end() || j == nullptr) return;
  AnalysedJob a;
  a.facts = facts;
  a.record = std::move(record);
  const nlohmann::json triage = nlohmann::json::parse(outcome.out, nullptr, false);
  if (triage.is_object()) {
    const auto p = triage.find("report_path");
    if (p != triage.end() && p->is_string()) a.report_path = p->get<std::string>();
  }
  a.requeue_max = j->requeue_max;
  a.requeue_allowed = j->requeue_allowed;
  a.request = std::move(req->second);
  on_analysed_(std::move(a));
}

void JobEndPipeline::record_summary(uint64_t job_id, nlohmann::json summary) {
  ++stats_.analyses[summary.value("result", "failed")];
  if (!node_.spool().append_job(job_id, summary)) {
    spdlog::error("job {}: analysis summary not durable: {}", job_id, node_.spool().last_error());
  }
  node_.jobs().set_analysis(job_id, summary);
  recent_summaries_.push_back(std::move(summary));
  while (recent_summaries_.size() > kRecentSummaries)
    recent_summaries_.pop_front();
}

std::optional<OutcomeRecord> JobEndPipeline::record_outcome(
    const JobFacts& facts, const AnalysisOutcome& outcome,
    const std::map<std::string, std::string>& peers, const std::vector<std::string>& unreachable) {
  // --format json prints triage.json: the analyzer's answer is the record's source.
  const nlohmann::json triage = nlohmann::json::parse(outcome.out, nullptr, false);
  if (!triage.is_object()) {
    spdlog::warn("job {}: no outcome recorded: the analyzer's answer is not a JSON object",
                 facts.job_id);
    return std::nullopt;
  }
  OutcomeRecord record = build_outcome_record(triage, facts, facts.gpus, now_usec() / 1000000);
  if (on_outcome_) on_outcome_(record);
  push_outcome(record, peers, unreachable);
  return record;
}

void JobEndPipeline::push_outcome(const OutcomeRecord& record,
                                  const std::map<std::string, std::string>& peers,
                                  const std::vector<std::string>& unreachable) {
  // A node whose agent did not answer for the evidence moments ago is not waited for again.
  const std::string carried = outcome_to_compact_json(record).dump(
      -1, ' ', false, nlohmann::json::error_handler_t::replace);
  std::vector<PeerRequest> requests;
  for (const auto& [node, base] : peers) {
    ++stats_.history_pushes;
    if (std::find(unreachable.begin(), unreachable.end(), node) == unreachable.end()) {
      requests.push_back({node, base, "/v1/history", carried});
      continue;
    }
    ++stats_.history_push_failures;
    spdlog::warn("job {}: outcome not recorded on {}: its agent did not answer for the evidence",
                 record.job_id, node);
  }
  if (requests.empty()) return;
  PeerFetchOptions push = peer_fetch_options(cfg_);
  push.max_body = 4096;
  const uint64_t job_id = record.job_id;
  (void)workers_.submit([this, job_id, requests = std::move(requests), push] {
    std::vector<PeerResponse> answers = fetch_from_peers(requests, push);
    loop_.post([this, job_id, answers = std::move(answers)] {
      for (const PeerResponse& a : answers) {
        if (a.ok) continue;
        ++stats_.history_push_failures;
        spdlog::warn("job {}: outcome not recorded on {} (not retried; it stays on this node): {}",
                     job_id, a.host, log_text(a.error));
      }
    });
  });
}

}  // namespace triage::agent
