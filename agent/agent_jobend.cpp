// The job-end hand-over (gather every node's evidence, run the analysis as the job's owner, keep
// a summary) and the auto-drain policy.
#include <pwd.h>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/job_end.h"
#include "agent/peer_client.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxDrainReason = 160;

std::string home_of(uid_t uid) {
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwuid_r(uid, &pw, buf, sizeof buf, &res) != 0 || res == nullptr || pw.pw_dir == nullptr)
    return "";
  return pw.pw_dir;
}

}  // namespace

void Agent::on_job_end(JobRecord& j) {
  if (j.analysis || in_pipeline_.count(j.job_id) != 0) return;
  if (!is_analysis_leader(j, cfg_.node_name)) return;  // the leader will ask us for our evidence
  if (j.mode == "off") {
    record_summary(j.job_id, skipped_summary(j.job_id, "--triage=off", now_usec()));
    return;
  }
  queue_analysis(j.job_id);
}

void Agent::queue_analysis(uint64_t job_id) {
  if (std::find(analysis_queue_.begin(), analysis_queue_.end(), job_id) != analysis_queue_.end())
    return;
  analysis_queue_.push_back(job_id);
  pump_analyses();
}

void Agent::pump_analyses() {
  while (in_pipeline_.size() < cfg_.analysis_concurrency && !analysis_queue_.empty()) {
    const uint64_t id = analysis_queue_.front();
    analysis_queue_.pop_front();
    in_pipeline_.insert(id);
    // Kernel lines about the job's last moments may reach the journal after the epilog.
    loop_.after(cfg_.evidence_settle_ms, [this, id] { gather_evidence(id); });
  }
}

void Agent::gather_evidence(uint64_t job_id) {
  JobRecord* j = job(job_id);
  if (j == nullptr) {
    in_pipeline_.erase(job_id);
    pump_analyses();
    return;
  }
  const JobFacts epilog = facts_from_epilog(*j, cfg_.node_name);
  const std::string self = cfg_.node_name;
  const auto peer_url = opts_.peer_url;
  PeerFetchOptions fetch;
  fetch.munge_socket = cfg_.munge_socket;
  fetch.timeout_ms = cfg_.peer_fetch_timeout_ms;
  const bool submitted = workers_->submit([this, job_id, epilog, self, peer_url, fetch] {
    // On a worker: slurmctld, peers and the passwd database may all be slow.
    JobFacts facts = epilog;
    {
      std::lock_guard<std::mutex> l(slurm_mu_);
      std::string error;
      std::optional<JobFacts> ctld = slurm_ ? slurm_->load_job(job_id, error) : std::nullopt;
      if (ctld) {
        facts = merge_facts(std::move(*ctld), epilog);
      } else {
        spdlog::info("job {}: slurmctld facts unavailable ({}); using the epilog's", job_id,
                     error.empty() ? "no client" : error);
      }
    }
    std::vector<PeerRequest> requests;
    std::string target = "/v1/jobs/" + std::to_string(job_id) + "/events";
    if (facts.start_time != 0 || facts.end_time != 0) {
      target +=
          "?start=" + std::to_string(facts.start_time) + "&end=" + std::to_string(facts.end_time);
    }
    // Slurm reaches a node at its NodeAddr, which need not be a name DNS knows (several slurmd
    // per host, private fabrics); the peer agent listens there too.
    std::map<std::string, std::string> addresses;
    if (slurm_ && facts.nodes.size() > 1) {
      std::lock_guard<std::mutex> l(slurm_mu_);
      std::string error;
      addresses = slurm_->node_addresses(facts.nodes, error);
      if (!error.empty()) {
        spdlog::info("job {}: node addresses unavailable ({}); reaching peers by name", job_id,
                     error);
      }
    }
    for (const std::string& node : facts.nodes) {
      if (node == self) continue;
      const auto addr = addresses.find(node);
      requests.push_back({node, peer_url(addr != addresses.end() ? addr->second : node), target});
    }
    std::vector<NodeEvidence> peers;
    for (const PeerResponse& r : fetch_from_peers(requests, fetch)) {
      NodeEvidence n;
      n.host = r.host;
      if (r.ok) {
        try {
          n = node_evidence_from_json(nlohmann::json::parse(r.body), r.host);
          n.host = r.host;
          n.reachable = true;
        } catch (const std::exception& e) {
          n.reachable = false;
          n.error = std::string("unusable answer: ") + e.what();
        }
      } else {
        n.reachable = false;
        n.error = r.error;
      }
      peers.push_back(std::move(n));
    }
    std::optional<Identity> who;
    std::string home;
    std::string error;
    if (facts.uid) {
      try {
        gid_t gid = facts.gid.value_or(0);
        who = identity_for_uid(*facts.uid, facts.gid ? &gid : nullptr);
        home = home_of(*facts.uid);
      } catch (const std::exception& e) {
        error = e.what();
      }
    } else {
      error = "the job's owner is unknown";
    }
    loop_.post([this, job_id, facts, peers = std::move(peers), who, home, error]() mutable {
      launch_analysis(job_id, facts, std::move(peers), who, home, error);
    });
  });
  if (!submitted) in_pipeline_.erase(job_id);
}

void Agent::launch_analysis(uint64_t job_id, const JobFacts& facts, std::vector<NodeEvidence> peers,
                            std::optional<Identity> who, const std::string& home,
                            const std::string& error) {
  JobRecord* j = job(job_id);
  std::vector<std::string> unreachable;
  for (const auto& p : peers) {
    if (!p.reachable) {
      unreachable.push_back(p.host);
      ++stats_.peer_fetch_failures;
      spdlog::warn("job {}: no evidence from {}: {}", job_id, p.host, p.error);
    }
  }
  const std::string target = analysis_target(facts);
  if (j == nullptr || !who) {
    AnalysisOutcome failed;
    failed.job_id = job_id;
    failed.err =
        j == nullptr ? "the job's records are gone" : "cannot run as the job's owner: " + error;
    analysis_done(job_id, facts, target, unreachable, failed);
    return;
  }
  Evidence ev;
  ev.job = facts;
  ev.report_path = expand_report_path(cfg_.report_path, facts);
  NodeEvidence own = node_evidence(*j, facts.start_time * 1000000, facts.end_time * 1000000);
  for (const std::string& node : facts.nodes) {
    if (node == cfg_.node_name) {
      ev.nodes.push_back(own);
      continue;
    }
    for (auto& p : peers) {
      if (p.host == node) ev.nodes.push_back(std::move(p));
    }
  }
  if (std::none_of(ev.nodes.begin(), ev.nodes.end(),
                   [&](const NodeEvidence& n) { return n.host == cfg_.node_name; })) {
    ev.nodes.insert(ev.nodes.begin(), own);
  }
  AnalysisRequest req;
  req.job_id = job_id;
  req.argv = analyzer_argv(cfg_.analyzer_path, facts.mode, target);
  req.who = *who;
  req.home = home;
  req.stdin_data =
      nlohmann::json(ev).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  req.timeout_ms = cfg_.analysis_timeout_sec * 1000;
  req.output_max = cfg_.analysis_output_max;
  spdlog::info("job {}: analysing {} as uid {} ({} node(s), {} unreachable)", job_id, target,
               who->uid, ev.nodes.size(), unreachable.size());
  analyses_.start(std::move(req),
                  [this, job_id, facts, target, unreachable](const AnalysisOutcome& o) {
                    analysis_done(job_id, facts, target, unreachable, o);
                  });
}

void Agent::analysis_done(uint64_t job_id, const JobFacts& facts, const std::string& target,
                          const std::vector<std::string>& unreachable,
                          const AnalysisOutcome& outcome) {
  nlohmann::json s = analysis_summary(facts, target, outcome, unreachable, now_usec());
  const std::string result = s.value("result", "failed");
  if (result != "ok") {
    spdlog::warn("job {}: analysis {}: {}", job_id, result, s.value("error", s.value("exit", "")));
  } else {
    spdlog::info("job {}: analysis done in {} ms", job_id, outcome.duration_ms);
  }
  record_summary(job_id, std::move(s));
  in_pipeline_.erase(job_id);
  pump_analyses();
}

void Agent::record_summary(uint64_t job_id, nlohmann::json summary) {
  ++stats_.analyses[summary.value("result", "failed")];
  if (!spool_.append_job(job_id, summary)) {
    spdlog::error("job {}: analysis summary not durable: {}", job_id, spool_.last_error());
  }
  jobs_.set_analysis(job_id, summary);
  recent_summaries_.push_back(std::move(summary));
  while (recent_summaries_.size() > 50)
    recent_summaries_.pop_front();
}

void Agent::maybe_drain() {
  if (cfg_.drain_policy != "auto" || verdict_.verdict != "drain-recommended" || drain_in_flight_)
    return;
  const std::string why =
      verdict_.reasons.empty() ? "drain recommended" : verdict_.reasons.front().reason;
  if (drained_for_ == why) return;
  const int64_t now = now_usec();
  if (now - drain_last_attempt_usec_ < 60LL * 1000000) return;
  drain_last_attempt_usec_ = now;
  drain_in_flight_ = true;
  const std::string node = cfg_.node_name;
  const std::string reason = std::string(truncate_utf8(printable(why), kMaxDrainReason));
  const bool submitted = workers_->submit([this, node, why, reason] {
    std::string state;
    std::string error;
    bool settled = false;
    {
      std::lock_guard<std::mutex> l(slurm_mu_);
      if (!slurm_) {
        state = "failed: no Slurm client";
      } else if (auto n = slurm_->load_node(node, error); n && (n->drain || n->down)) {
        // Never touch a drain somebody else made, and never undo one.
        settled = true;
        state = n->reason.rfind("triage:", 0) == 0
                    ? "drained by triage"
                    : "left alone: already " + n->state + " (" + n->reason + ")";
      } else if (n && slurm_->drain_node(node, reason, error)) {
        settled = true;
        state = "drained by triage";
      } else {
        state = "failed: " + error;
      }
    }
    loop_.post([this, state, settled, why, reason] {
      drain_in_flight_ = false;
      drain_state_ = state;
      drain_reason_ = "triage: " + reason;
      if (settled) drained_for_ = why;
      const auto level = state.rfind("failed", 0) == 0 ? spdlog::level::err : spdlog::level::warn;
      spdlog::log(level, "auto-drain of {}: {}", cfg_.node_name, state);
    });
  });
  if (!submitted) drain_in_flight_ = false;
}

}  // namespace triage::agent
