#include "agent/live/live_decision.h"

#include <algorithm>

#include "agent/requeue/attempt_check.h"
#include "common/live_cost.h"
#include "common/time_util.h"

namespace triage::agent {

bool should_follow(const JobRecord& job) {
  const bool triage_on = job.mode == "basic" || job.mode == "full";
  return !job.ended && triage_on && job.uid.has_value() && job.batch_here;
}

bool remote_evidence_due(int64_t asked_usec, int64_t now_usec, int64_t interval_usec) {
  return asked_usec == 0 || now_usec - asked_usec >= interval_usec;
}

Corroboration corroborate(const std::vector<NodeEvidence>& nodes, int64_t since_usec,
                          const RemoteEvidence& remote) {
  Corroboration c;
  for (const NodeEvidence& n : nodes) {
    if (!n.reachable) continue;
    if (n.job_dstate > 0) {
      c.dstate_tasks += n.job_dstate;
      c.lines.push_back(n.host + ": " + std::to_string(n.job_dstate) +
                        " of the job's tasks in D state (uninterruptible sleep)");
    }
    for (const KernelEvent& e : n.events) {
      if (e.severity < Severity::kWarning) continue;
      const int64_t at = std::max(e.time_usec, e.last_usec);
      if (at < since_usec) continue;
      ++c.kernel_events;
      c.lines.push_back(n.host + ": kernel " + e.kind +
                        (e.summary.empty() ? std::string() : ": " + e.summary));
    }
  }
  if (remote.busy_wait) {
    c.busy_wait = true;
    c.lines.push_back(remote.busy_wait_line.empty()
                          ? std::string("cluster Prometheus: GPUs busy at idle-level power")
                          : remote.busy_wait_line);
  }
  return c;
}

size_t add_warnings(LiveRecord& record, const std::vector<EarlyWarning>& seen, int64_t now_usec,
                    size_t max_text) {
  size_t added = 0;
  for (const EarlyWarning& w : seen) {
    if (record.warnings.size() >= kMaxLiveWarnings) break;
    const bool known = std::any_of(record.warnings.begin(), record.warnings.end(),
                                   [&](const LiveWarning& k) { return k.cls == w.cls; });
    if (known) continue;
    record.warnings.push_back(LiveWarning{w.cls, w.line, w.text.substr(0, max_text),
                                          w.arrived_usec > 0 ? w.arrived_usec : now_usec});
    ++added;
  }
  return added;
}

void flag_stall(LiveRecord& record, const StallVerdict& v, const Corroboration& c,
                int64_t now_usec) {
  if (record.flagged_usec != 0) {
    record.earlier_stalls.push_back(
        {record.flagged_usec, record.step, record.silence_s, record.resumed_usec});
    if (record.earlier_stalls.size() > kMaxEarlierStalls)
      record.earlier_stalls.erase(record.earlier_stalls.begin());
  }
  ++record.stalls;
  record.flagged_usec = now_usec;
  record.step = v.last_step;
  record.step_line = v.last_step_line;
  record.last_step_usec = v.last_step_usec;
  record.silence_s = v.silence_s;
  record.threshold_s = v.threshold_s;
  record.basis = v.basis;
  record.corroboration = c.lines;
  record.resumed_usec = 0;
}

PaceChange take_pace_warning(LiveRecord& record, const std::string& line, int64_t now_usec) {
  const bool stood = !record.pace_warning.empty();
  record.pace_warning = line;
  if (line.empty()) {
    record.pace_warning_usec = 0;
    return stood ? PaceChange::kCleared : PaceChange::kNone;
  }
  if (stood) return PaceChange::kNone;
  record.pace_warning_usec = now_usec;
  return PaceChange::kRaised;
}

bool stall_unflagged(const LiveRecord& record) {
  return record.flagged_usec == 0 || record.resumed_usec != 0;
}

bool interim_report_due(const LiveRecord& record, bool new_watchdog_lines) {
  return new_watchdog_lines && record.flagged_usec != 0 && record.resumed_usec == 0;
}

bool pace_report_due(const std::string& reported, const std::string& key) {
  return key != reported;
}

bool mark_resumed(LiveRecord& record, bool new_steps, int64_t now_usec) {
  if (record.flagged_usec == 0 || record.resumed_usec != 0 || !new_steps) return false;
  record.resumed_usec = now_usec;
  return true;
}

HangFacts hang_facts(const JobRecord& job, const LiveRecord& record, const StallVerdict& v,
                     const Corroboration& c, bool batch, const JobFacts& shown) {
  HangFacts f;
  f.asked = job.on_hang;
  f.admin_allows = job.hang_action_allowed;
  f.stalled = v.stalled;
  f.silence_s = v.silence_s;
  f.threshold_s = v.threshold_s;
  f.dstate_tasks = static_cast<int>(std::min<uint64_t>(c.dstate_tasks, 1u << 30));
  f.kernel_events = static_cast<int>(std::min<uint64_t>(c.kernel_events, 1u << 30));
  f.busy_wait = c.busy_wait;
  f.notified = !stall_unflagged(record);
  f.acted = record.action == "cancel" || record.action == "requeue";
  f.batch = batch;
  f.requeueable = shown.requeue_allowed;
  f.restarts = shown.restart_count;
  f.requeue_max = job.requeue_max;
  return f;
}

LiveAttempt attempt_of(const JobFacts& shown) {
  return LiveAttempt{shown.restart_count, shown.start_time};
}

std::string to_string(const LiveAttempt& a) {
  return "Restarts=" + std::to_string(a.restart_count) + " started " +
         (a.start_time > 0 ? format_utc(a.start_time * 1000000) : std::string("(unknown)"));
}

// "The flagged attempt" in the sense the post-mortem requeue uses too (same_attempt).
std::string attempt_mismatch(const LiveAttempt& flagged, const JobFacts& shown) {
  if (!same_attempt(flagged.restart_count, flagged.start_time, shown)) {
    return "slurmctld shows another attempt of the job (" + to_string(attempt_of(shown)) +
           ") than the one flagged (" + to_string(flagged) + ")";
  }
  if (shown.state != "RUNNING") {
    return "slurmctld shows the flagged attempt " +
           (shown.state.empty() ? std::string("in no state") : shown.state) + ", not RUNNING";
  }
  return "";
}

bool action_pending(const LiveRecord& record) {
  if (record.action != "cancel" && record.action != "requeue") return false;
  return (record.action_result.empty() || record.action_result == "retry") &&
         record.action_tries < kMaxActionTries;
}

int64_t action_retry_delay_usec(int64_t tries) {
  return kActionRetryUsec << std::clamp<int64_t>(tries - 1, 0, 10);
}

void record_action_try(LiveRecord& record, bool ok, const std::string& error) {
  if (ok) {
    record.action_result = "done";
    record.action_error.clear();
    return;
  }
  record.action_result = record.action_tries < kMaxActionTries ? "retry" : "failed";
  record.action_error = error + " (try " + std::to_string(record.action_tries) + " of " +
                        std::to_string(kMaxActionTries) + ")";
}

bool save_due(bool record_changed, bool moved, int64_t last_saved_usec, int64_t now_usec,
              int64_t interval_usec) {
  return record_changed || (moved && now_usec - last_saved_usec >= interval_usec);
}

double stalled_gpu_hours(const LiveRecord& record, std::optional<int64_t> gpus, int64_t last_step,
                         int64_t counted_until, int64_t now) {
  if (record.flagged_usec == 0 || record.resumed_usec != 0 || !gpus) return 0;
  return gpu_hours(*gpus, std::max(counted_until, last_step), now);
}

nlohmann::json live_spool_record(const FollowState& follow, const LiveRecord& record, int64_t lines,
                                 const LiveAttempt& attempt) {
  return {{"r", "live"},
          {"attempt", {{"restarts", attempt.restart_count}, {"start", attempt.start_time}}},
          {"follow", follow_state_json(follow)},
          {"record", record},
          {"lines", lines}};
}

namespace {

// The newest well-formed live record that `wanted` accepts.
template <typename Wanted>
std::optional<LiveSpoolEntry> newest_live_entry(const std::vector<nlohmann::json>& records,
                                                Wanted wanted) {
  for (auto it = records.rbegin(); it != records.rend(); ++it) {
    const auto r = it->find("r");
    if (r == it->end() || *r != "live") continue;
    try {
      LiveSpoolEntry e;
      if (const auto a = it->find("attempt"); a != it->end()) {
        e.attempt = LiveAttempt{a->at("restarts").get<int>(), a->at("start").get<int64_t>()};
      }
      e.follow = follow_state_from_json(it->at("follow"), "spool");
      e.record = live_record_from_json(it->at("record"), "spool");
      e.lines = it->value("lines", int64_t{0});
      if (wanted(e)) return e;
    } catch (const std::exception&) {
      // A damaged record: an older one may still be good.
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LiveSpoolEntry> latest_live_entry(const std::vector<nlohmann::json>& records) {
  return newest_live_entry(records, [](const LiveSpoolEntry&) { return true; });
}

std::optional<LiveSpoolEntry> live_entry_of(const std::vector<nlohmann::json>& records,
                                            int restart_count) {
  return newest_live_entry(records, [restart_count](const LiveSpoolEntry& e) {
    return e.attempt && e.attempt->restart_count == restart_count;
  });
}

bool resumes(const LiveSpoolEntry& saved, const LiveAttempt& attempt, const std::string& path) {
  return saved.attempt && *saved.attempt == attempt && saved.follow.path == path;
}

}  // namespace triage::agent
