// diagnose() decides, for one job: its status (status_decision.h), the primary failure among every
// class found (primary_failure.h), how the other findings relate to it (consequence_links.h), the
// node table, heartbeat check and Ray facts (node_evidence.h, heartbeat_check.h, run_context.h),
// where a hang began (hang_origin.h), slow ranks and a slowing job (straggler_verdict.h),
// whose fault it was (blame_decision.h), and the words and next steps (diagnosis_narrative.h).
// This file only runs those stages in order.
#include "analyzer/diagnosis.h"

#include <algorithm>
#include <iterator>
#include <set>

#include "analyzer/blame_decision.h"
#include "analyzer/consequence_links.h"
#include "analyzer/diagnosis_narrative.h"
#include "analyzer/hang_origin.h"
#include "analyzer/heartbeat_check.h"
#include "analyzer/node_evidence.h"
#include "analyzer/primary_failure.h"
#include "analyzer/run_context.h"
#include "analyzer/shared_switch.h"
#include "analyzer/status_decision.h"

namespace triage {

namespace {

// The report's header: who, which mode, Slurm's state, the summary and the scan's statistics.
Triage start_report(const DiagnosisInput& in) {
  Triage t;
  t.generated_usec = in.now_usec;
  static_cast<JobIdentity&>(t) = in;
  t.mode = in.mode;
  t.slurm_state = in.slurm_state;
  t.slurm_state_source = in.slurm_state.empty() ? "unavailable" : in.slurm_state_source;
  t.notes = in.notes;
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
    if (x == nullptr) continue;
    for (const auto& m : x->classes) {
      if (m.count > 0 && m.earliest() != nullptr) {
        t.scan.extra_sources.push_back(m.earliest()->source);
        break;
      }
    }
  }
  return t;
}

Timeline read_timeline(const DiagnosisInput& in, const SignatureCatalog& cat) {
  TimelineFacts f;
  f.slurm_state = in.slurm_state;
  if (in.evidence != nullptr && in.evidence->job.end_time > 0)
    f.slurm_end_usec = in.evidence->job.end_time * 1000000;
  if (in.scan != nullptr) {
    f.log_read = true;
    f.summary_found = in.scan->facts.summary.found;
    f.summary_finished_usec = in.scan->facts.summary.finished_usec;
    const CancellationInLog c = cancellation_in_log(*in.scan, cat);
    f.cancel_line = c.found;
    f.cancel_time_usec = c.time_usec;
  }
  f.log_mtime_usec = in.log_mtime_usec;
  return build_timeline(f);
}

// The failure classes that are a hang or a collective's timeout: the ones whose report says where
// the hang began.
bool hang_like(const Triage& t) {
  static const char* const kHangClasses[] = {"hang", "nccl-timeout"};
  if (t.status == kStatusHanging) return true;
  return std::any_of(std::begin(kHangClasses), std::end(kHangClasses),
                     [&](const char* c) { return t.primary_failure == c; });
}

// The job log's watchdog numbers, then those of the per-rank logs for the (group, rank) pairs the
// job log does not have (a rank's own log says the same, when both have it).
std::vector<CollectiveProgress> all_collectives(const DiagnosisInput& in, const LogFacts& facts) {
  std::vector<CollectiveProgress> all = facts.collectives;
  if (in.extra_collectives == nullptr) return all;
  std::set<std::pair<std::string, int64_t>> seen;
  for (const auto& c : all)
    seen.emplace(c.pg, c.rank);
  for (const auto& c : *in.extra_collectives) {
    if (seen.emplace(c.pg, c.rank).second) all.push_back(c);
  }
  return all;
}

void judge_hang_origin(Triage& t, const DiagnosisInput& in, const LogFacts& facts) {
  std::vector<CollectiveProgress> collectives = all_collectives(in, facts);
  if (!hang_like(t) && collectives.empty()) return;
  HangOriginInput hin = hang_origin_evidence(in.evidence, t.nodes);
  hin.collectives = collectives;
  hin.stall_usec = t.progress.last_step_time_usec;
  t.hang_origin_judged = true;
  t.hang_origin = decide_hang_origin(hin);
  t.collectives = std::move(collectives);
}

// Slow ranks from the log's per-rank pace, placed on nodes by the task layout; the job's lasting
// slowdown, placed on the node whose GPU clocks fell then (full mode) or whose ranks fell behind.
void judge_stragglers(Triage& t, const DiagnosisInput& in, const LogFacts& facts) {
  const HangOriginInput layout = hang_origin_evidence(in.evidence, t.nodes);
  t.stragglers = find_stragglers(facts.rhythm, layout.rank_node);
  static const std::vector<NodeClockSeries> kNoClocks;
  t.slowdown = find_slowdown(facts.step_times, t.stragglers,
                             in.node_clocks != nullptr ? *in.node_clocks : kNoClocks);
  t.step_times = facts.step_times;
}

// Progress is measured up to the job's end when it ended, else up to now.
ProgressProjection measure_progress(const DiagnosisInput& in, const LogFacts& facts,
                                    const Timeline& tl) {
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
  return project_progress(pin);
}

bool cause_found(const ScanResult* scan, const SignatureCatalog& cat) {
  if (scan == nullptr) return false;
  for (size_t i = 0; i < scan->classes.size(); ++i) {
    if (scan->classes[i].count > 0 && cat.classes()[i].role == ClassRole::kCause) return true;
  }
  return false;
}

DerivedFacts derived_facts(const DiagnosisInput& in, const Triage& t, const LogFacts& facts) {
  DerivedFacts d;
  d.status = t.status;
  d.progress = t.progress;
  d.last_step_text = facts.steps.last_text;
  d.log_lines = t.scan.lines;
  if (in.scan != nullptr && !in.scan->tail.empty()) d.last_line_text = in.scan->tail.back().text;
  return d;
}

// The agent's live record: a flagged stall of a job that still runs is the interim hang report; an
// agent's cancel or requeue is why the job ended.
void apply_live(Triage& t, const Evidence& ev, const Timeline& tl) {
  t.live = live_section(*ev.live, ev.job, tl.alive);
  const LiveRecord& r = t.live->record;
  if (t.live->interim) {
    t.status = kStatusHanging;
    t.status_reason = "flagged live by the batch host's agent: " + r.basis;
  } else if ((r.action == "cancel" || r.action == "requeue") && r.action_error.empty()) {
    t.status_reason += std::string(t.status_reason.empty() ? "" : "; ") +
                       (r.action == "cancel" ? "cancelled" : "requeued") +
                       " as hung by slurm-triage at step " + std::to_string(r.step);
  }
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
  static const LogFacts kNoFacts;
  const LogFacts& facts = in.scan != nullptr ? in.scan->facts : kNoFacts;
  Triage t = start_report(in);

  // Status: progress first, since the stall it measures tells running from hanging.
  const Timeline tl = read_timeline(in, cat);
  t.progress = measure_progress(in, facts, tl);
  const StatusVerdict status = decide_status(
      StatusFacts{t.summary, tl, in.slurm_state, t.progress, cause_found(in.scan, cat)}, cat);
  t.status = status.status;
  t.status_reason = status.reason;
  if (in.evidence != nullptr && in.evidence->live) apply_live(t, *in.evidence, tl);

  // The primary failure among every class found, and its evidence.
  FoundClasses found;
  add_log_classes(found, in.scan, in.extra_scans);
  add_trusted_classes(found, trusted_findings(in.evidence, in.slurm_state, cat), cat);
  add_derived_classes(found, derived_findings(derived_facts(in, t, facts), cat), cat);
  const bool wants_primary = t.status != kStatusCompleted && t.status != kStatusRunning;
  const RankingResult rank = choose_primary(found, wants_primary, t.summary, cat);
  if (rank.primary >= 0) {
    const SignatureClass& pc = cat.classes()[found.occ[static_cast<size_t>(rank.primary)].cls];
    t.primary_failure = pc.id;
    t.primary_title = pc.title;
    PrimaryEvidence pe = primary_evidence(found, rank.primary, facts.tracebacks, cat);
    t.stage = std::move(pe.stage);
    t.evidence = std::move(pe.evidence);
    t.evidence_notes = std::move(pe.notes);
  }
  if (t.stage.empty() && !t.primary_failure.empty() && t.progress.has_steps) t.stage = "Training";
  t.additional = link_consequences(found, rank, cat);

  // What surrounds it: nodes, heartbeat, Ray, the log's end.
  t.nodes = build_node_table(in.evidence, in.scan != nullptr ? &facts : nullptr);
  if (in.evidence != nullptr) {
    t.moved = in.evidence->moved;
    const SignatureClass* pc = cat.find(t.primary_failure);
    t.shared_switch = shared_leaf_switch(*in.evidence, pc != nullptr && network_class(*pc));
  }
  if (in.scan != nullptr) t.heartbeat = check_heartbeat(facts, in.scan->first_error_by_rank, cat);
  t.ray = ray_info(facts, t.status, in.has_tsdb_dir);
  judge_hang_origin(t, in, facts);
  judge_stragglers(t, in, facts);
  if (in.scan != nullptr)
    t.last_lines = last_lines_shown(in.scan->tail, t.status, t.primary_failure, cat);

  // Whose fault, once the primary and the nodes are known.
  const BlameVerdict blame = decide_blame(t, cat);
  t.blame = blame.blame;
  t.blame_basis = blame.basis;
  t.blame_trusted = blame.trusted;
  t.blame_summary = blame_summary(t, blame);

  // The words.
  t.what_happened = what_happened(t, cat);
  t.recommendations = next_steps(t, cat);
  for (auto& note : input_notes(t))
    t.notes.push_back(std::move(note));
  return t;
}

}  // namespace triage
