#include "analyzer/diagnosis.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <set>

#include "analyzer/failure_ranking.h"
#include "analyzer/heartbeat_check.h"
#include "analyzer/node_evidence.h"
#include "common/text.h"
#include "common/time_util.h"
#include "common/wait_status.h"

namespace triage {

namespace {

// Findings from outside the main log come after every log line in "earliest" order.
constexpr int64_t kOrderExtraLogs = INT64_MAX / 4;
constexpr int64_t kOrderTrusted = INT64_MAX / 2;

bool is_cancel_class(const std::string& id) {
  return id == "cancelled" || id == "time-limit" || id == "preempted";
}

// The earliest finding of a class; when some of its lines matched a cause-pattern, the earliest
// of those (`cause` is set).
const Finding* earliest_effective(const ClassMatches& m, bool& cause) {
  const Finding* best = nullptr;
  const Finding* best_cause = nullptr;
  for (const auto& f : m.first) {
    if (best == nullptr || f.effective_line() < best->effective_line()) best = &f;
    if (f.cause && (best_cause == nullptr || f.effective_line() < best_cause->effective_line()))
      best_cause = &f;
  }
  cause = best_cause != nullptr;
  return cause ? best_cause : best;
}

// Everything that decides the status, gathered up front.
struct Timeline {
  bool alive = false;    // Slurm says the job has not ended
  bool ended = false;    // Slurm (or the log) says it has
  int64_t end_usec = 0;  // when it ended, when known
  std::string end_basis;
  bool cancel_line = false;  // "*** JOB ... CANCELLED AT ..." in the log
};

Timeline build_timeline(const DiagnosisInput& in, const SignatureCatalog& cat) {
  Timeline tl;
  const std::string& st = in.slurm_state;
  tl.alive = slurm_state_alive(st);
  tl.ended = !st.empty() && !tl.alive && st != "PENDING";
  if (in.evidence != nullptr && in.evidence->job.end_time > 0) {
    tl.end_usec = in.evidence->job.end_time * 1000000;
    tl.end_basis = "job end (Slurm)";
  }
  if (in.scan != nullptr && tl.end_usec == 0 && in.scan->facts.summary.finished_usec > 0) {
    tl.end_usec = in.scan->facts.summary.finished_usec;
    tl.end_basis = "JOB SUMMARY end time";
  }
  if (in.scan != nullptr) {
    for (const char* id : {"time-limit", "preempted", "cancelled"}) {
      const int ci = cat.index_of(id);
      if (ci < 0) continue;
      const auto& m = in.scan->classes[static_cast<size_t>(ci)];
      if (m.count == 0) continue;
      tl.cancel_line = true;
      const Finding* f = m.latest();
      if (tl.end_usec == 0 && f != nullptr && f->time_usec > 0) {
        tl.end_usec = f->time_usec;
        tl.end_basis = "cancellation time in the log";
      }
    }
    if (in.scan->facts.summary.found || tl.cancel_line) tl.ended = tl.ended || !tl.alive;
  }
  if (tl.ended && tl.end_usec == 0 && in.log_mtime_usec > 0) {
    tl.end_usec = in.log_mtime_usec;
    tl.end_basis = "log last written";
  }
  return tl;
}

// Whether `a` explains `b` (the catalog's lists, or `b` is a traceback that ended in `a`).
bool catalog_explains(const SignatureCatalog& cat, const ClassOccurrence& a,
                      const ClassOccurrence& b) {
  if (cat.explains(static_cast<int>(a.cls), static_cast<int>(b.cls))) return true;
  return cat.classes()[b.cls].id == "python-exception" && a.first != nullptr &&
         b.first != nullptr && a.first->traceback_line > 0 &&
         a.first->traceback_line == b.first->line;
}

bool has_cause_finding(const DiagnosisInput& in, const SignatureCatalog& cat) {
  if (in.scan == nullptr) return false;
  for (size_t i = 0; i < in.scan->classes.size(); ++i) {
    if (in.scan->classes[i].count > 0 && cat.classes()[i].role == ClassRole::kCause) return true;
  }
  return false;
}

void decide_status(const DiagnosisInput& in, const Timeline& tl, const SignatureCatalog& cat,
                   Triage& t) {
  const auto& sum = t.summary;
  const ProgressProjection& p = t.progress;
  if (sum.found && (!sum.status_word.empty() || sum.exit_code)) {
    const int code = sum.exit_code.value_or(sum.status_word == "SUCCESS" ? 0 : 1);
    if (code == 130 || code == 143 || sum.status_word == "CANCELLED") {
      t.status = kStatusCancelled;
      t.status_reason = "JOB SUMMARY reports exit " + std::to_string(code) + " (cancellation)";
    } else if (sum.status_word == "SUCCESS" || (sum.status_word.empty() && code == 0)) {
      t.status = kStatusCompleted;
      t.status_reason = "JOB SUMMARY reports SUCCESS (exit " + std::to_string(code) + ")";
    } else {
      t.status = kStatusFailed;
      t.status_reason = "JOB SUMMARY reports " +
                        (sum.status_word.empty() ? std::string("failure") : sum.status_word) +
                        " (exit " + std::to_string(code) + ")";
    }
    return;
  }
  if (tl.cancel_line) {
    t.status = kStatusCancelled;
    t.status_reason = "Slurm's cancellation line in the log; no JOB SUMMARY";
    return;
  }
  const std::string& st = in.slurm_state;
  if (tl.alive) {
    if (p.has_steps && p.stalled) {
      t.status = kStatusHanging;
      t.status_reason = "Slurm state " + st + ", but training steps stopped " +
                        format_duration(*p.stall_seconds) + " ago";
    } else {
      t.status = kStatusRunning;
      t.status_reason = "Slurm state " + st +
                        (p.has_steps ? (p.stall_undetermined ? "; step progress cannot be timed"
                                                             : "; training steps are advancing")
                                     : "; no training step logged yet");
    }
    return;
  }
  if (tl.ended) {
    if (st == "COMPLETED") {
      t.status = kStatusCompleted;
    } else if (st == "CANCELLED" || st == "TIMEOUT" || st == "PREEMPTED" || st == "DEADLINE") {
      t.status = kStatusCancelled;
    } else if (st == "FAILED" || st == "OUT_OF_MEMORY" || st == "NODE_FAIL" || st == "BOOT_FAIL") {
      t.status = kStatusFailed;
    } else {
      t.status = has_cause_finding(in, cat) ? kStatusFailed : kStatusUnknown;
    }
    t.status_reason = "no JOB SUMMARY; Slurm state " + (st.empty() ? std::string("ended") : st);
    return;
  }
  // Slurm's view is unavailable: only the log speaks.
  if (p.has_steps && !p.stalled && !p.stall_undetermined && !p.reached_final_step) {
    t.status = kStatusRunning;
    t.status_reason = "no JOB SUMMARY, Slurm state unavailable; the last step was logged " +
                      format_duration(p.stall_seconds.value_or(0)) + " ago";
    return;
  }
  if (has_cause_finding(in, cat)) {
    t.status = kStatusFailed;
    t.status_reason = "no JOB SUMMARY, Slurm state unavailable; the log shows a failure";
    return;
  }
  t.status = kStatusUnknown;
  t.status_reason = "no JOB SUMMARY, training stopped, and Slurm state unavailable";
}

}  // namespace

std::string fill_placeholders(std::string text, const Triage& t) {
  const std::pair<const char*, std::string> subs[] = {
      {"{job_id}", t.job_id ? std::to_string(*t.job_id) : "<job id>"},
      {"{job_dir}", t.job_dir.empty() ? "<job dir>" : t.job_dir},
      {"{log}", t.log_path.empty() ? "<log>" : t.log_path},
  };
  for (const auto& [key, value] : subs) {
    size_t pos = 0;
    while ((pos = text.find(key, pos)) != std::string::npos) {
      text.replace(pos, std::string_view(key).size(), value);
      pos += value.size();
    }
  }
  return text;
}

int exit_code_for(const Triage& t) {
  if (t.status == kStatusCompleted || t.status == kStatusRunning) return 0;
  return 1;
}

Triage diagnose(const DiagnosisInput& in) {
  const SignatureCatalog& cat = *in.catalog;
  Triage t;
  t.generated_usec = in.now_usec;
  static_cast<JobIdentity&>(t) = in;
  t.mode = in.mode;
  t.slurm_state = in.slurm_state;
  t.slurm_state_source = in.slurm_state.empty() ? "unavailable" : in.slurm_state_source;
  t.notes = in.notes;
  static const LogFacts kNoFacts;
  const LogFacts& facts = in.scan != nullptr ? in.scan->facts : kNoFacts;
  if (in.scan != nullptr) {
    const ScanResult& s = *in.scan;
    t.summary.found = s.facts.summary.found;
    t.summary.line = s.facts.summary.line;
    t.summary.status_word = s.facts.summary.status_word;
    t.summary.exit_code = s.facts.summary.exit_code;
    t.summary.finished_usec = s.facts.summary.finished_usec;
    t.scan.bytes = s.bytes_scanned;
    t.scan.lines = s.lines;
    t.scan.seconds = s.seconds;
    t.scan.long_lines = s.long_lines;
    t.scan.ends_without_newline = s.ends_without_newline;
    t.scan.stopped_early = s.stopped_early;
    for (const uint64_t n : s.harmless_counts)
      t.scan.harmless_lines += n;
  }
  for (const ScanResult* x : in.extra_scans) {
    if (x != nullptr && !x->classes.empty()) {
      for (const auto& m : x->classes) {
        if (m.count > 0 && m.earliest() != nullptr) {
          t.scan.extra_sources.push_back(m.earliest()->source);
          break;
        }
      }
    }
  }

  const Timeline tl = build_timeline(in, cat);

  // Progress first: the stall it measures decides running against hanging.
  ProgressInput pin;
  pin.facts = &facts;
  pin.worker_restore = in.worker_restore;
  pin.log_mtime_usec = in.log_mtime_usec;
  pin.stall = in.stall;
  if (tl.ended && tl.end_usec > 0) {
    pin.reference_time_usec = tl.end_usec;
    pin.reference_basis = tl.end_basis;
  } else if (!tl.ended) {
    pin.reference_time_usec = in.now_usec;
    pin.reference_basis = "now";
  }
  t.progress = project_progress(pin);
  decide_status(in, tl, cat, t);

  // Every class found, with its earliest finding.
  std::vector<TrustedFinding> trusted = trusted_findings(in.evidence, in.slurm_state, cat);
  std::vector<Finding> derived;
  derived.reserve(4);
  std::vector<ClassOccurrence> occ;
  std::vector<const ClassMatches*> occ_matches;
  std::set<uint32_t> seen;
  if (in.scan != nullptr) {
    for (size_t i = 0; i < in.scan->classes.size(); ++i) {
      const ClassMatches& m = in.scan->classes[i];
      if (m.count == 0) continue;
      bool cause = false;
      const Finding* f = earliest_effective(m, cause);
      if (f == nullptr) continue;
      occ.push_back(
          ClassOccurrence{static_cast<uint32_t>(i), f, m.count, false, f->effective_line(), cause});
      occ_matches.push_back(&m);
      seen.insert(static_cast<uint32_t>(i));
    }
  }
  for (const ScanResult* x : in.extra_scans) {
    if (x == nullptr) continue;
    for (size_t i = 0; i < x->classes.size(); ++i) {
      const ClassMatches& m = x->classes[i];
      if (m.count == 0 || seen.count(static_cast<uint32_t>(i)) != 0) continue;
      occ.push_back(
          ClassOccurrence{static_cast<uint32_t>(i), m.earliest(), m.count, false, kOrderExtraLogs});
      occ_matches.push_back(&m);
      seen.insert(static_cast<uint32_t>(i));
    }
  }
  std::map<uint32_t, size_t> trusted_index;  // class -> occurrence
  for (const auto& tf : trusted) {
    const int ci = cat.index_of(tf.finding.cls);
    if (ci < 0) continue;
    const auto cls = static_cast<uint32_t>(ci);
    auto it = trusted_index.find(cls);
    if (it == trusted_index.end()) {
      trusted_index.emplace(cls, occ.size());
      occ.push_back(ClassOccurrence{cls, &tf.finding, 1, tf.decisive, kOrderTrusted});
      occ_matches.push_back(nullptr);
    } else {
      ClassOccurrence& o = occ[it->second];
      ++o.count;
      if (tf.decisive && !o.decisive) {
        o.decisive = true;
        o.first = &tf.finding;
      }
    }
  }
  // Derived classes: a hang (steps stopped while alive, or before the job was ended), and a death
  // nobody explained.
  const ProgressProjection& p = t.progress;
  const bool stopped_before_end = p.has_steps && p.stalled &&
                                  (t.status == kStatusHanging || t.status == kStatusCancelled ||
                                   t.status == kStatusFailed || t.status == kStatusUnknown);
  if (stopped_before_end && cat.index_of("hang") >= 0) {
    Finding f;
    f.cls = "hang";
    f.source = "log";
    f.line = p.last_step_line;
    f.text = facts.steps.last_text;
    f.time_usec = p.last_step_time_usec;
    f.stage = "Training";
    derived.push_back(std::move(f));
  }
  if (t.status == kStatusUnknown && cat.index_of("unknown-death") >= 0) {
    Finding f;
    f.cls = "unknown-death";
    f.source = "log";
    f.line = t.scan.lines;
    f.stage = p.has_steps ? "Training" : "";
    if (in.scan != nullptr && !in.scan->tail.empty()) f.text = in.scan->tail.back().text;
    derived.push_back(std::move(f));
  }
  for (const auto& f : derived) {
    const int ci = cat.index_of(f.cls);
    occ.push_back(ClassOccurrence{static_cast<uint32_t>(ci), &f, 1, false,
                                  f.line + (f.cls == "hang" ? 1 : 0)});
    occ_matches.push_back(nullptr);
  }

  const bool wants_primary = t.status != kStatusCompleted && t.status != kStatusRunning;
  RankingResult rank = rank_failures(cat, occ, wants_primary);
  if (!wants_primary) rank.primary = -1;

  // A failed job whose log matched nothing: the summary's exit code may still name a signal.
  Finding exit_finding;
  if (wants_primary && rank.primary < 0 && t.summary.exit_code &&
      cat.index_of("signal-kill") >= 0) {
    const int code = *t.summary.exit_code;
    if (code == 134 || code == 135 || code == 137 || code == 139) {
      exit_finding.cls = "signal-kill";
      exit_finding.line = t.summary.line;
      exit_finding.text =
          "JOB SUMMARY exit " + std::to_string(code) + ": " + describe_exit_code(code);
      exit_finding.stage = "Training";
      occ.push_back(ClassOccurrence{static_cast<uint32_t>(cat.index_of("signal-kill")),
                                    &exit_finding, 1, false, t.summary.line});
      occ_matches.push_back(nullptr);
      rank.explained_by.push_back(-1);
      rank.primary = static_cast<int>(occ.size()) - 1;
    }
  }

  // Primary failure and its evidence.
  if (rank.primary >= 0) {
    const ClassOccurrence& po = occ[static_cast<size_t>(rank.primary)];
    const SignatureClass& pc = cat.classes()[po.cls];
    t.primary_failure = pc.id;
    t.primary_title = pc.title;
    t.stage = po.first != nullptr && !po.first->stage.empty() ? po.first->stage : pc.stage;
    if (po.first != nullptr) t.evidence.push_back(*po.first);
    if (const ClassMatches* m = occ_matches[static_cast<size_t>(rank.primary)]) {
      for (const auto& f : m->first) {
        if (t.evidence.size() >= 4) break;
        if (f.line != po.first->line || f.source != po.first->source) t.evidence.push_back(f);
      }
      if (const Finding* last = m->latest(); last != nullptr && m->count > t.evidence.size()) {
        const bool dup = std::any_of(t.evidence.begin(), t.evidence.end(), [&](const Finding& e) {
          return e.line == last->line && e.source == last->source;
        });
        if (!dup) t.evidence.push_back(*last);
      }
      if (m->count > t.evidence.size()) {
        t.evidence_notes.push_back(std::to_string(m->count) + " lines matched " + pc.id +
                                   "; the first and last are shown.");
      }
    }
    // A traceback's own last line says what was raised.
    for (const auto& tb : facts.tracebacks) {
      const bool ours = std::any_of(t.evidence.begin(), t.evidence.end(), [&](const Finding& e) {
        return e.source == "log" && (e.line == tb.start_line || e.traceback_line == tb.start_line);
      });
      if (ours && tb.exception_line > 0 &&
          std::none_of(t.evidence.begin(), t.evidence.end(),
                       [&](const Finding& e) { return e.line == tb.exception_line; })) {
        Finding ex;
        ex.cls = pc.id;
        ex.line = tb.exception_line;
        ex.text = tb.exception_text;
        ex.rank = tb.rank;
        t.evidence.push_back(std::move(ex));
      }
    }
    // Trusted evidence of the primary: the related task exits on the same host.
    if (po.first != nullptr && po.first->trusted) {
      for (const auto& tf : trusted) {
        if (&tf.finding != po.first && tf.finding.host == po.first->host && t.evidence.size() < 8 &&
            (tf.finding.cls == pc.id || tf.finding.source.rfind("tasks:", 0) == 0)) {
          t.evidence.push_back(tf.finding);
        }
      }
    }
    std::stable_sort(t.evidence.begin(), t.evidence.end(), [](const Finding& a, const Finding& b) {
      if (a.source != b.source) return a.source == "log";
      return a.line < b.line;
    });
  }
  if (t.stage.empty() && !t.primary_failure.empty() && p.has_steps) t.stage = "Training";

  // Additional findings: everything else that was found.
  for (size_t i = 0; i < occ.size(); ++i) {
    if (static_cast<int>(i) == rank.primary || occ[i].first == nullptr) continue;
    const SignatureClass& c = cat.classes()[occ[i].cls];
    AdditionalFinding a;
    a.cls = c.id;
    a.title = c.title;
    a.count = occ[i].count;
    a.first = *occ[i].first;
    a.trusted = occ[i].first->trusted;
    if (const ClassMatches* m = occ_matches[i]; m != nullptr && m->count > 1) a.last = *m->latest();
    const int by = i < rank.explained_by.size() ? rank.explained_by[i] : -1;
    const bool by_primary =
        rank.primary >= 0 && catalog_explains(cat, occ[static_cast<size_t>(rank.primary)], occ[i]);
    if (by_primary) {
      a.relation = "consequence of " + t.primary_failure;
    } else if (by >= 0) {
      a.relation = "consequence of " + cat.classes()[occ[static_cast<size_t>(by)].cls].id;
    } else if (c.role == ClassRole::kMinor) {
      a.relation = "minor";
    } else {
      a.relation = "independent";
    }
    t.additional.push_back(std::move(a));
  }
  std::stable_sort(t.additional.begin(), t.additional.end(),
                   [](const AdditionalFinding& a, const AdditionalFinding& b) {
                     if (a.first.trusted != b.first.trusted) return a.first.trusted;
                     return a.first.line < b.first.line;
                   });

  // Nodes, heartbeat, Ray.
  t.nodes = build_node_table(in.evidence, in.scan != nullptr ? &facts : nullptr);
  if (in.scan != nullptr) t.heartbeat = check_heartbeat(facts, in.scan->first_error_by_rank, cat);
  t.ray.enabled = facts.ray_enabled || !facts.tunnel.command.empty();
  t.ray.tunnel_command = facts.tunnel.command;
  t.ray.tunnel_line = facts.tunnel.line;
  t.ray.head_host = facts.tunnel.head_host;
  t.ray.prometheus_port = facts.tunnel.prometheus_port;
  t.ray.prometheus_port_source = facts.tunnel.prometheus_port_source;
  if (t.ray.enabled && !t.ray.prometheus_port) {
    t.ray.prometheus_port = 9190;
    t.ray.prometheus_port_source = "default";
  }
  t.ray.live = t.status == kStatusRunning || t.status == kStatusHanging;
  t.ray.has_tsdb_dir = in.has_tsdb_dir;
  if (in.scan != nullptr && (t.status == kStatusUnknown || t.primary_failure == "unknown-death")) {
    const auto& tail = in.scan->tail;
    const size_t n = std::min<size_t>(tail.size(), 8);
    t.last_lines.assign(tail.end() - static_cast<std::ptrdiff_t>(n), tail.end());
  }

  // What happened, in words.
  std::string what;
  const SignatureClass* pc = t.primary_failure.empty() ? nullptr : cat.find(t.primary_failure);
  if (t.status == kStatusCompleted) {
    what = "The job completed successfully";
    if (!t.status_reason.empty()) what += " (" + t.status_reason + ")";
    what += ".";
    if (p.has_steps) {
      what += " Training ran through step " + std::to_string(p.last_step) +
              (p.reached_final_step ? ", the final step." : ".");
    }
  } else if (t.status == kStatusRunning) {
    what = "The job is still running";
    if (p.has_steps && p.stall_seconds && !p.stall_undetermined) {
      what += ": the last training step (" + std::to_string(p.last_step) + ") was logged " +
              format_duration(*p.stall_seconds) + " ago, within the normal step time.";
    } else if (p.has_steps) {
      what += "; the last training step logged is " + std::to_string(p.last_step) +
              ", but the log gives no time for it, so a stall cannot be ruled out.";
    } else {
      what += "; no training step has been logged yet.";
    }
  } else {
    if (t.status == kStatusCancelled && pc != nullptr && !is_cancel_class(pc->id)) {
      what = "The job was cancelled, but cancellation was not the cause. ";
    } else if (t.status == kStatusHanging) {
      what = "Slurm still runs the job, but training has stopped. ";
    }
    if (pc != nullptr) what += pc->explain;
    if (t.primary_failure == "hang" && p.stall_seconds) {
      what += " The last step (" + std::to_string(p.last_step) + ") was logged " +
              format_duration(*p.stall_seconds) + " before " +
              (p.reference_basis == "now" ? std::string("now") : p.reference_basis);
      if (p.expected_step)
        what += "; at this job's step time it should have reached step " +
                std::to_string(*p.expected_step);
      what += ".";
    }
    if (pc == nullptr) {
      what += "The job did not succeed, but no known failure signature was found in the log";
      if (t.summary.exit_code) what += " (exit " + std::to_string(*t.summary.exit_code) + ")";
      what += ". Read the end of the log.";
    }
  }
  t.what_happened = what;

  // Next steps: the primary class's, then what the evidence adds.
  if (pc != nullptr) {
    const bool live = t.status == kStatusRunning || t.status == kStatusHanging;
    for (const auto& n : pc->next) {
      if (!n.live_only || live) t.recommendations.push_back(fill_placeholders(n.text, t));
    }
  }
  if (t.heartbeat.present && t.primary_failure != "heartbeat-timeout") {
    t.recommendations.push_back("Heartbeat timeout: " + t.heartbeat.verdict + ". " +
                                t.heartbeat.explanation);
  }
  for (const auto& row : t.nodes) {
    if (row.verdict == "drain-recommended") {
      std::string r = "Administrators: node " + row.host + " is recommended for draining";
      if (!row.verdict_reasons.empty()) r += " (" + row.verdict_reasons.front() + ")";
      t.recommendations.push_back(r + ".");
    }
    if (row.from_agent && !row.reachable) {
      t.recommendations.push_back("Node " + row.host + " did not answer (" +
                                  row.unreachable_reason +
                                  "); its kernel evidence is missing from this report.");
    }
  }
  if (t.ray.enabled) {
    if (t.ray.live && !t.ray.head_host.empty()) {
      t.recommendations.push_back("The job is live: its Prometheus is at http://" +
                                  t.ray.head_host + ":" +
                                  std::to_string(t.ray.prometheus_port.value_or(9190)) +
                                  " (reachable from the head node's network, not localhost:9090).");
    } else if (!t.ray.live && t.ray.has_tsdb_dir && t.status != kStatusCompleted) {
      t.recommendations.push_back(
          "The live dashboards are gone; open the saved metrics read-only from " +
          (t.job_dir.empty() ? std::string("<job dir>") : t.job_dir) +
          "/prometheus for TSDB diagnosis.");
    }
  }
  if (t.status == kStatusRunning && p.stall_undetermined && p.has_steps) {
    t.recommendations.push_back(
        "Step lines carry no timestamps: watch for new 'completed step:' lines (or run "
        "slurm_job_monitor.sh) to tell a running job from a hang.");
  }

  // Notes about the input itself.
  if (t.scan.ends_without_newline && t.status != kStatusRunning && t.status != kStatusHanging) {
    t.notes.push_back(
        "The log ends in the middle of a line: the writer stopped abruptly (typical of SIGKILL).");
  }
  if (t.scan.long_lines > 0) {
    t.notes.push_back(std::to_string(t.scan.long_lines) +
                      " line(s) longer than the scan buffer were scanned in pieces; evidence "
                      "quotes them truncated.");
  }
  if (t.scan.stopped_early)
    t.notes.push_back("Only the first part of the log was scanned (size limit).");
  if (p.restarts_in_log > 0) {
    t.notes.push_back("Training restarted " + std::to_string(p.restarts_in_log) +
                      " time(s) within this log; the projection describes the last run.");
  }
  return t;
}

}  // namespace triage
