#include "analyzer/report_render.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analyzer/finding_render.h"
#include "common/build_config.h"
#include "common/hostlist.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage {

using json = nlohmann::ordered_json;

namespace {

std::string fmt_double(double v, int decimals) {
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string ranks_text(const std::vector<int64_t>& ranks) {
  // "0-3, 7": consecutive runs folded.
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1)
      ++j;
    if (!out.empty()) out += ", ";
    out += std::to_string(ranks[i]);
    if (j > i) out.append("-").append(std::to_string(ranks[j]));
    i = j + 1;
    if (out.size() > 200) {
      out += ", ...";
      break;
    }
  }
  return out;
}

template <typename T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

// How many ranks' watchdog numbers triage.json lists (the decision saw them all).
constexpr size_t kMaxCollectivesShown = 256;

json seq_json(int64_t v) {
  return v == kSeqUnknown ? json(nullptr) : json(v);
}

// "hang_origin": {rank, node, signal, basis} or null with "hang_origin_reason" (null too when the
// job neither hung nor timed out in a collective, so the question was not asked).
void hang_origin_json(const Triage& t, json& j) {
  const HangOrigin& o = t.hang_origin;
  if (t.hang_origin_judged && o.found) {
    j["hang_origin"] = {{"rank", opt(o.rank)},
                        {"node", o.node.empty() ? json(nullptr) : json(o.node)},
                        {"signal", o.signal},
                        {"basis", o.basis}};
    j["hang_origin_reason"] = nullptr;
  } else {
    j["hang_origin"] = nullptr;
    j["hang_origin_reason"] = t.hang_origin_judged ? json(o.reason) : json(nullptr);
  }
  j["hang_outside_communication"] = t.hang_origin_judged && o.outside_communication;
}

json collectives_json(const std::vector<CollectiveProgress>& all) {
  json out = json::array();
  for (size_t i = 0; i < all.size() && i < kMaxCollectivesShown; ++i) {
    const CollectiveProgress& c = all[i];
    out.push_back(
        {{"rank", c.rank},
         {"pg", c.pg.empty() ? json(nullptr) : json(c.pg)},
         {"last_enqueued", seq_json(c.last_enqueued)},
         {"last_completed", seq_json(c.last_completed)},
         {"timed_out", seq_json(c.timed_out)},
         {"dump_from_rank", c.dump_from_rank >= 0 ? json(c.dump_from_rank) : json(nullptr)},
         {"line", c.line}});
  }
  return out;
}

// The report's line about where the hang began.
std::string hang_origin_words(const HangOrigin& o) {
  if (!o.found) {
    return (o.outside_communication ? std::string("none: ") : std::string("none singled out: ")) +
           md_prose(o.reason);
  }
  std::string who;
  if (o.rank) who = "rank " + std::to_string(*o.rank);
  if (!o.node.empty()) who += (who.empty() ? "node " : " on node ") + md_code_span(o.node);
  if (!o.rank && o.node.empty()) who = "unknown";
  return who + " (" + md_prose(o.basis) + "; signal " + md_code_span(o.signal) + ")";
}

double round2(double v) {
  return std::round(v * 100) / 100;
}

// "stragglers": [{rank, node, relative_speed, since, basis}] and "slowdown": {from_s, to_s, since,
// node} or null, as issue 28 names them.
void stragglers_json(const Triage& t, json& j) {
  json list = json::array();
  for (const Straggler& s : t.stragglers) {
    list.push_back({{"rank", opt(s.rank)},
                    {"node", s.node.empty() ? json(nullptr) : json(s.node)},
                    {"relative_speed", round2(s.relative_speed)},
                    {"since", since_text(s.since_usec, s.since_line)},
                    {"basis", s.basis}});
  }
  j["stragglers"] = list;
  const Slowdown& d = t.slowdown;
  if (!d.found) {
    j["slowdown"] = nullptr;
    return;
  }
  j["slowdown"] = {{"from_s", round2(d.from_s)},
                   {"to_s", round2(d.to_s)},
                   {"since", since_text(d.since_usec, d.since_line)},
                   {"node", d.node.empty() ? json(nullptr) : json(d.node)}};
}

std::string link_target(const std::string& name);

// A short table of the slow ranks and the slowdown, and full mode's pictures of the job's pace;
// nothing when there is none of them.
void stragglers_markdown(const Triage& t, std::string& md) {
  const bool pictures = !t.step_time_svg.empty() || !t.clock_strip_svg.empty();
  if (t.stragglers.empty() && !t.slowdown.found && !pictures) return;
  md += "### Slow ranks and slowdowns\n\n";
  const Slowdown& d = t.slowdown;
  if (d.found) {
    char buf[160];
    (void)std::snprintf(buf, sizeof buf, "%.2f s to %.2f s (+%.0f%%)", d.from_s, d.to_s,
                        d.from_s > 0 ? (d.to_s / d.from_s - 1) * 100 : 0.0);
    md += "**Slowdown:** steady step time rose from " + std::string(buf) + " at step " +
          std::to_string(d.since_step) + " (" + md_prose(since_text(d.since_usec, d.since_line)) +
          ") and stayed there";
    md += d.node.empty() ? std::string(", no node singled out")
                         : "; node " + md_code_span(d.node) + ": " + md_prose(d.basis);
    md += ".\n\n";
  }
  if (!t.stragglers.empty()) {
    md +=
        "| Rank | Node | Relative speed | Since | Basis "
        "|\n|------|------|----------------|-------|-------|\n";
    for (const Straggler& s : t.stragglers) {
      char speed[32];
      (void)std::snprintf(speed, sizeof speed, "%.2f", s.relative_speed);
      md += "| " + (s.rank ? std::to_string(*s.rank) : std::string("-")) + " | " +
            md_prose(s.node.empty() ? "-" : s.node) + " | " + speed + " | " +
            md_prose(since_text(s.since_usec, s.since_line)) + " | " + md_code_span(s.basis) +
            " |\n";
    }
    md +=
        "\nA rank's speed is its own pace (outside the collectives every rank waits in) against "
        "the "
        "median of the other ranks, or a straggler report's score against the fastest rank.";
    const bool node_only = std::any_of(t.stragglers.begin(), t.stragglers.end(),
                                       [](const Straggler& s) { return !s.rank; });
    if (node_only)
      md +=
          " A node without a rank: its GPUs' mean core clock against the other nodes' median "
          "(full mode, from the TSDB).";
    md += "\n\n";
  }
  if (!t.step_time_svg.empty())
    md += "![Step time over the run](" + link_target(t.step_time_svg) + ")\n\n";
  if (!t.clock_strip_svg.empty())
    md += "![GPU core clock per node](" + link_target(t.clock_strip_svg) + ")\n\n";
}

json progress_json(const ProgressProjection& p) {
  if (!p.has_steps && !p.total_steps) return nullptr;
  json j = json::object();
  j["has_steps"] = p.has_steps;
  j["start"] = p.start.empty() ? json(nullptr) : json(p.start);
  j["restored_from_step"] = opt(p.restored_from_step);
  j["start_basis"] = p.start_basis;
  j["first_step"] = p.has_steps ? json(p.first_step) : json(nullptr);
  j["last_step"] = p.has_steps ? json(p.last_step) : json(nullptr);
  j["first_step_line"] = p.first_step_line;
  j["last_step_line"] = p.last_step_line;
  j["steps_this_run"] = p.steps_this_run;
  j["total_steps"] = opt(p.total_steps);
  j["total_steps_source"] = p.total_steps_source;
  j["percent"] = p.percent ? json(std::round(*p.percent * 100) / 100) : json(nullptr);
  j["step_seconds"] =
      p.step_seconds ? json(std::round(*p.step_seconds * 1000) / 1000) : json(nullptr);
  j["step_time_basis"] = p.step_time_basis;
  j["last_step_time"] =
      p.last_step_time_usec > 0 ? json(format_utc(p.last_step_time_usec)) : json(nullptr);
  j["last_step_time_basis"] = p.last_step_time_basis;
  j["expected_step"] = opt(p.expected_step);
  j["reference_time"] =
      p.reference_time_usec > 0 ? json(format_utc(p.reference_time_usec)) : json(nullptr);
  j["reference_basis"] = p.reference_basis;
  j["stall_seconds"] = p.stall_seconds ? json(std::round(*p.stall_seconds)) : json(nullptr);
  j["stalled"] = p.stalled;
  j["stall_undetermined"] = p.stall_undetermined;
  j["checkpoint_period"] = opt(p.checkpoint_period);
  j["checkpoint_period_source"] = p.checkpoint_period_source;
  j["checkpointing_enabled"] = opt(p.checkpointing_enabled);
  j["last_periodic_checkpoint"] = opt(p.last_periodic_checkpoint);
  j["resume_step"] = opt(p.resume_step);
  j["progress_lost_steps"] = opt(p.progress_lost_steps);
  j["progress_lost_seconds"] =
      p.progress_lost_seconds ? json(std::round(*p.progress_lost_seconds)) : json(nullptr);
  j["progress_lost_all"] = p.progress_lost_all;
  j["remaining_seconds"] =
      p.remaining_seconds ? json(std::round(*p.remaining_seconds)) : json(nullptr);
  j["reached_final_step"] = p.reached_final_step;
  j["restarts_in_log"] = p.restarts_in_log;
  return j;
}

bool failed_like(const Triage& t) {
  return t.status == kStatusFailed || t.status == kStatusCancelled || t.status == kStatusHanging ||
         t.status == kStatusUnknown;
}

void progress_markdown(const Triage& t, std::string& md) {
  const ProgressProjection& p = t.progress;
  md += "### Training progress projection\n\n";
  if (!p.has_steps) {
    md +=
        "No `completed step:` line in the log: training did not start, or this job does not print "
        "steps.\n\n";
    return;
  }
  auto row = [&md](const std::string& metric, const std::string& value) {
    md += "| " + metric + " | " + value + " |\n";
  };
  md += "| Metric | Value |\n|--------|-------|\n";
  if (p.start == "restored") {
    row("Start", "restored from checkpoint step " +
                     std::to_string(p.restored_from_step.value_or(p.first_step - 1)) + " (" +
                     md_prose(p.start_basis) + ")");
  } else {
    row("Start", "fresh (" + md_prose(p.start_basis) + ")");
  }
  row("Steps completed (this run)", std::to_string(p.steps_this_run) + " steps (step " +
                                        std::to_string(p.first_step) + " through " +
                                        std::to_string(p.last_step) + ")");
  if (p.total_steps) {
    row("Overall progress", std::to_string(p.last_step + 1) + " / " +
                                std::to_string(*p.total_steps) + " (" +
                                fmt_double(p.percent.value_or(0), 1) + "%)");
  } else {
    row("Overall progress",
        std::to_string(p.last_step + 1) + " steps (total unknown: no steps= in PASSTHROUGH_ARGS)");
  }
  row("Steady-state step time",
      p.step_seconds ? fmt_double(*p.step_seconds, 3) + "s (" + p.step_time_basis + ")"
                     : "unknown");
  if (p.last_step_time_usec > 0) {
    row("Last step logged at",
        format_utc(p.last_step_time_usec) + " (" + p.last_step_time_basis + ")");
  }
  if (p.expected_step) {
    std::string v = std::to_string(*p.expected_step) + " (at " + format_utc(p.reference_time_usec) +
                    ", " + md_prose(p.reference_basis) + ")";
    if (p.stalled) v += ": **stalled " + format_duration(p.stall_seconds.value_or(0)) + "**";
    row(p.reference_basis == "now" ? "Expected step by now" : "Expected step at end", v);
  } else {
    row("Expected step by now", "unknown (no time for the last step or no step time)");
  }
  const std::string period = p.checkpoint_period ? std::to_string(*p.checkpoint_period) : "";
  if (!p.checkpoint_period) {
    row("Last periodic ckpt this run",
        p.checkpointing_enabled && !*p.checkpointing_enabled
            ? "none (checkpointing disabled)"
            : "unknown (no checkpoint_period and checkpointing not enabled)");
  } else if (p.last_periodic_checkpoint) {
    row("Last periodic ckpt this run", "step " + std::to_string(*p.last_periodic_checkpoint) +
                                           " (every " + period + " steps, " +
                                           p.checkpoint_period_source + ")");
  } else {
    row("Last periodic ckpt this run", "none: didn't reach checkpoint_period (" + period + ")");
  }
  if (failed_like(t)) {
    if (p.progress_lost_all) {
      std::string v =
          "all: no periodic ckpt (" + std::to_string(p.progress_lost_steps.value_or(0)) + " steps";
      if (p.progress_lost_seconds) v += ", " + format_duration(*p.progress_lost_seconds);
      row("Progress lost", v + ")");
    } else if (p.progress_lost_steps) {
      std::string v = std::to_string(*p.progress_lost_steps) + " steps";
      if (p.progress_lost_seconds) v += " (" + format_duration(*p.progress_lost_seconds) + ")";
      row("Progress lost",
          v + " since the checkpoint at step " + std::to_string(p.resume_step.value_or(0)));
    }
  }
  if (p.reached_final_step) {
    row("Estimated time remaining", "none: the final step was reached");
  } else if (p.remaining_seconds) {
    row("Estimated time remaining",
        format_duration(*p.remaining_seconds) + " (from the last step, if healthy)");
  } else {
    row("Estimated time remaining", "unknown");
  }
  md += "\n";
}

// A file name as a Markdown link target: a log called "run (2).log" gives a report and a timeline
// with a space and parentheses in their names, which would end the link early.
std::string link_target(const std::string& name) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : name) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z') || (u >= '0' && u <= '9') || c == '.' ||
        c == '-' || c == '_') {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

// The playbooks build an ordinary (key-sorted) json value; keep its content and order, in ours.
json tsdb_json(const tsdb::TsdbResult& result, const std::string& timeline_svg) {
  nlohmann::json j = result.to_json();
  j["timeline_svg"] = timeline_svg.empty() ? nlohmann::json(nullptr) : nlohmann::json(timeline_svg);
  return json::parse(j.dump());
}

// What the agent did about --triage-requeue for this attempt, in the words of the decision.
std::string requeue_markdown(const RequeueNote& n) {
  std::string md = "### Requeue (--triage-requeue=" + std::to_string(n.max) + ")\n\n";
  md += "**" + md_prose(n.outcome) + "** (attempt " + std::to_string(n.attempt) +
        "): " + md_prose(n.reason) + ".\n\n";
  if (!n.excluded.empty()) {
    md += "Nodes excluded from the next attempt: " + md_code_span(compress_hostlist(n.excluded)) +
          ".\n\n";
  }
  for (const std::string& step : n.steps)
    md += "- " + md_prose(step) + "\n";
  if (!n.steps.empty()) md += "\n";
  if (n.outcome == "requeued") {
    md += "This report is kept as this attempt's copy; the next attempt writes its own.\n\n";
  }
  return md;
}

// The agent's live record: when the stall was flagged, what was done, the early warnings.
void live_markdown(const Triage& t, std::string& md) {
  if (!t.live || (t.live->record.flagged_usec == 0 && t.live->record.warnings.empty() &&
                  t.live->record.pace_warning.empty()))
    return;
  const LiveRecord& r = t.live->record;
  // "Hang detection" only where a stall was flagged: a pace warning or an early warning alone is
  // what the agent saw while watching, not a hang.
  md += r.flagged_usec != 0 ? "### Live hang detection\n\n" : "### Live watch\n\n";
  if (!t.live->summary.empty()) md += md_prose(t.live->summary) + "\n\n";
  if (r.flagged_usec != 0) {
    md += "- Basis: " + md_prose(r.basis) + "\n";
    for (const auto& c : r.corroboration)
      md += "- Node fact: " + md_prose(c) + "\n";
    if (r.corroboration.empty()) md += "- Node facts: none seen (D state, kernel events)\n";
    if (!r.action_reason.empty()) md += "- Decision: " + md_prose(r.action_reason) + "\n";
    md += "\n";
  }
  if (!r.pace_warning.empty()) {
    // A warning only: a slowdown or a straggler is never a hang (analyzer/live_pace.h).
    md += "- " + md_prose(r.pace_warning) + " (raised " + format_utc(r.pace_warning_usec) +
          ", standing when last judged; a warning, nothing was done)\n\n";
  }
  if (!r.warnings.empty()) {
    md += "Early warnings while the job ran (the log's own lines):\n\n";
    for (const auto& w : r.warnings) {
      md += "- " + md_code_span(w.cls) + " at line " + std::to_string(w.line) + ", seen " +
            format_utc(w.seen_usec) + ": " + md_code_span(strip_ansi(w.text)) + "\n";
    }
    md += "\n";
  }
}

// Only for a job the agent followed: the other reports keep their shape.
void live_json(const Triage& t, json& j) {
  if (!t.live) return;
  const bool flagged = t.live->record.flagged_usec != 0;
  j["live"] = t.live->interim;
  j["flagged_at"] = flagged ? json(format_utc(t.live->record.flagged_usec)) : json(nullptr);
  json r = json::parse(nlohmann::json(t.live->record).dump());
  r["summary"] = t.live->summary;
  r["hours_saved"] = t.live->hours_saved ? json(*t.live->hours_saved) : json(nullptr);
  r["gpu_hours_saved"] = t.live->gpu_hours_saved ? json(*t.live->gpu_hours_saved) : json(nullptr);
  j["live_record"] = std::move(r);
}

}  // namespace

std::string render_markdown(const Triage& t) {
  std::string md;
  md +=
      "## Job triage: " + md_code_span(t.log_path.empty() ? std::string("(no log)") : t.log_path) +
      "\n\n";
  if (!t.blame_summary.empty()) md += md_prose(t.blame_summary) + "\n\n";
  md += "**Status:** " + std::string(t.live && t.live->interim ? "hang (live)" : t.status) + "  \n";
  if (t.primary_failure.empty()) {
    md += "**Primary failure:** none  \n";
  } else {
    md += "**Primary failure:** " + md_code_span(t.primary_failure) + " (" +
          md_prose(t.primary_title) + ")  \n";
  }
  if (t.hang_origin_judged) md += "**Hang origin:** " + hang_origin_words(t.hang_origin) + "  \n";
  // A running job's report written for its pace warning (agent/live/live_monitor.h): the warning
  // is the news, so it stands among the first lines too.
  if (t.status == kStatusRunning && t.live && !t.live->record.pace_warning.empty())
    md += "**Warning:** " + md_prose(t.live->record.pace_warning) + "  \n";
  // Where the job did not run, among the first lines: the preflight moved it off a node.
  for (const MovedNote& m : t.moved) {
    md += "**Moved:** off node " + md_code_span(m.node) +
          " before it started: " + md_prose(m.reason) + "  \n";
  }
  // What --triage-requeue did, among the first lines: a stopped requeue is the news of this report.
  if (t.requeue) {
    md += "**Requeue:** " + md_prose(t.requeue->outcome) + " (attempt " +
          std::to_string(t.requeue->attempt) +
          " of --triage-requeue=" + std::to_string(t.requeue->max) +
          "): " + md_prose(t.requeue->reason) + "  \n";
  }
  if (t.blame) {
    md += "**Whose fault:** " + md_code_span(std::string(to_string(*t.blame))) + " (" +
          md_prose(t.blame_basis) + "; " +
          (t.blame_trusted ? "trusted evidence" : "the log's word only") + ")  \n";
  }
  if (t.shared_switch)
    md += "**Switch:** " + md_prose(shared_switch_sentence(*t.shared_switch)) + "  \n";
  md += "**Stage:** " + (t.stage.empty() ? std::string("-") : md_prose(t.stage)) + "  \n";
  std::string job = t.job_id ? std::to_string(*t.job_id) : "";
  if (!t.job_name.empty()) job += (job.empty() ? "" : " ") + md_code_span(t.job_name);
  if (!job.empty()) md += "**Job:** " + job + "  \n";
  if (!t.job_dir.empty()) md += "**Job directory:** " + md_code_span(t.job_dir) + "  \n";
  md += "**Slurm state:** " +
        (t.slurm_state.empty() ? std::string("unavailable")
                               : md_prose(t.slurm_state) + " (" + t.slurm_state_source + ")") +
        "\n\n";

  md += "### What happened\n\n" + md_prose(t.what_happened) + "\n\n";
  if (!t.status_reason.empty()) md += "Status basis: " + md_prose(t.status_reason) + ".\n\n";
  if (t.requeue) md += requeue_markdown(*t.requeue);

  live_markdown(t, md);

  md += "### Evidence\n\n";
  if (t.evidence.empty() && t.last_lines.empty()) md += "No log line names the failure.\n\n";
  for (const auto& f : t.evidence) {
    md += "- " + finding_where_md(f) + ":\n\n";
    md += md_code_block({finding_quote(f)}, "text");
    md += "\n";
  }
  for (const auto& n : t.evidence_notes)
    md += md_prose(n) + "\n\n";
  if (!t.last_lines.empty()) {
    md +=
        "Last lines of the log (line " + std::to_string(t.last_lines.front().number) + " on):\n\n";
    std::vector<std::string> lines;
    for (const auto& l : t.last_lines)
      lines.push_back(strip_ansi(l.text) + (l.truncated ? " [...]" : ""));
    md += md_code_block(lines, "text") + "\n";
  }

  if (!t.nodes.empty()) {
    md += "### Nodes\n\n";
    md +=
        "| Node | Ranks | Exit | Meaning | Kernel events during the job | Verdict | Log says "
        "(unverified) |\n";
    md +=
        "|------|-------|------|---------|------------------------------|---------|----------------"
        "--------|\n";
    for (const auto& r : t.nodes) {
      std::string events;
      for (size_t i = 0; i < r.events.size() && i < 6; ++i)
        events += (i > 0 ? "; " : "") + r.events[i];
      if (r.events.size() > 6) events += "; ... (" + std::to_string(r.events.size()) + " in all)";
      if (events.empty())
        events = r.from_agent ? (r.reachable ? "none" : "unavailable") : "no agent evidence";
      std::string verdict = r.verdict.empty() ? "-" : r.verdict;
      if (!r.reachable) verdict = "unreachable: " + r.unreachable_reason;
      for (const auto& why : r.verdict_reasons)
        verdict += "; " + why;
      md += "| " + md_prose(r.host) + " | " + md_prose(ranks_text(r.ranks)) + " | " +
            md_prose(r.exit.empty() ? "-" : r.exit) + " | " +
            md_prose(r.meaning.empty() ? "-" : r.meaning) + " | " + md_prose(events) + " | " +
            md_prose(verdict) + " | " + md_prose(r.log_hint.empty() ? "-" : r.log_hint) + " |\n";
    }
    md +=
        "\nKernel events and exit statuses come from the nodes' agents (trusted); the last column "
        "only repeats "
        "what the job's log printed.\n\n";
  }

  progress_markdown(t, md);
  stragglers_markdown(t, md);

  if (t.tsdb) md += t.tsdb->render_markdown({link_target(t.tsdb_timeline_svg), 3}) + "\n";

  if (t.heartbeat.present) {
    md += "### Heartbeat timeout checklist\n\n";
    md += "- Verdict: **" + t.heartbeat.verdict + "**. " + md_prose(t.heartbeat.explanation) + "\n";
    md += "- Accusation at line " + std::to_string(t.heartbeat.line) + ".\n";
    if (!t.heartbeat.self_reported.empty()) {
      md += "- Accused tasks that logged their own death (they were alive): " +
            ranks_text(t.heartbeat.self_reported) + ".\n";
    }
    for (const auto& [task, what] : t.heartbeat.prior_errors) {
      md += "- Task " + std::to_string(task) + " failed earlier: " + md_prose(what) + ".\n";
    }
    if (t.ray.has_tsdb_dir) {
      md +=
          "- This job has a TSDB (`prometheus/`): GPU utilisation, TCP retransmits, I/O pressure "
          "and memory at the "
          "failure time confirm whether the tasks were healthy.\n";
    }
    md += "\n";
  }

  md += "### Additional findings\n\n";
  if (t.additional.empty()) md += "None.\n";
  for (const auto& a : t.additional) {
    md += "- " + md_code_span(a.cls) + " (" + md_prose(a.title) + "), " + std::to_string(a.count) +
          " time" + (a.count == 1 ? "" : "s") + ", " + md_prose(a.relation) + "; first at " +
          finding_where_md(a.first) + ": " + finding_short_quote_md(a.first);
    if (a.last) md += "; last at " + finding_where_md(*a.last);
    md += "\n";
  }
  md += "\n";

  if (t.ray.enabled) {
    md += "### Live dashboards (RAY=1)\n\n";
    if (!t.ray.tunnel_command.empty()) {
      md += "SSH tunnel command from the log (line " + std::to_string(t.ray.tunnel_line) + "):\n\n";
      md += md_code_block({t.ray.tunnel_command}, "sh") + "\n";
    } else {
      md += "The log has no `ssh -L` tunnel command.\n\n";
    }
    md += "- Head node: " +
          (t.ray.head_host.empty() ? std::string("unknown") : md_code_span(t.ray.head_host)) + "\n";
    md += "- Prometheus port: " + std::to_string(t.ray.prometheus_port.value_or(9190)) + " (" +
          md_prose(t.ray.prometheus_port_source) + ")\n";
    if (t.ray.live) {
      md +=
          "- The job is live: Prometheus answers at `http://<head>:<port>` from the head node's "
          "network, the Ray "
          "Dashboard on port 8265 and TensorBoard on 6006. The tunnel above binds these on your "
          "own machine. Want "
          "port forwarding set up for the Ray Dashboard, Prometheus and TensorBoard?\n";
    } else {
      md += "- The job has ended: its live dashboards are gone.";
      if (t.ray.has_tsdb_dir) md += " The saved TSDB is in `prometheus/` of the job directory.";
      md += "\n";
    }
    md += "\n";
  }

  if (!t.notes.empty()) {
    md += "### Notes\n\n";
    for (const auto& n : t.notes)
      md += "- " + md_prose(n) + "\n";
    md += "\n";
  }

  md += "### Recommended next steps\n\n";
  if (t.recommendations.empty()) md += "Nothing to do.\n";
  for (size_t i = 0; i < t.recommendations.size(); ++i) {
    md += std::to_string(i + 1) + ". " + md_prose(t.recommendations[i]) + "\n";
  }
  return md;
}

json triage_to_json(const Triage& t) {
  json j = json::object();
  j["schema_version"] = t.schema_version;
  j["tool"] = std::string("slurm-triage ") + kVersion;
  j["generated_at"] = t.generated_usec > 0 ? json(format_utc(t.generated_usec)) : json(nullptr);
  j["log"] = t.log_path.empty() ? json(nullptr) : json(t.log_path);
  j["job_dir"] = t.job_dir.empty() ? json(nullptr) : json(t.job_dir);
  j["job"] = {{"id", opt(t.job_id)},
              {"name", t.job_name.empty() ? json(nullptr) : json(t.job_name)},
              {"user", t.user.empty() ? json(nullptr) : json(t.user)},
              {"slurm_state", t.slurm_state.empty() ? json(nullptr) : json(t.slurm_state)},
              {"slurm_state_source", t.slurm_state_source}};
  j["mode"] = t.mode;
  j["status"] = t.status;
  j["status_reason"] = t.status_reason;
  live_json(t, j);
  j["summary"] = {
      {"found", t.summary.found},
      {"line", t.summary.found ? json(t.summary.line) : json(nullptr)},
      {"status", t.summary.status_word.empty() ? json(nullptr) : json(t.summary.status_word)},
      {"exit_code", opt(t.summary.exit_code)},
      {"finished",
       t.summary.finished_usec > 0 ? json(format_utc(t.summary.finished_usec)) : json(nullptr)}};
  j["primary_failure"] = t.primary_failure.empty() ? json(nullptr) : json(t.primary_failure);
  j["primary_title"] = t.primary_title.empty() ? json(nullptr) : json(t.primary_title);
  j["stage"] = t.stage.empty() ? json(nullptr) : json(t.stage);
  hang_origin_json(t, j);
  stragglers_json(t, j);
  j["blame"] = t.blame ? json(std::string(to_string(*t.blame))) : json(nullptr);
  j["blame_basis"] = t.blame ? json(t.blame_basis) : json(nullptr);
  j["blame_trusted"] = t.blame ? json(t.blame_trusted) : json(nullptr);
  j["blame_summary"] = t.blame ? json(t.blame_summary) : json(nullptr);
  j["what_happened"] = t.what_happened;
  json findings = json::array();
  for (const auto& f : t.evidence)
    findings.push_back(finding_json(f));
  j["findings"] = findings;
  j["progress"] = progress_json(t.progress);
  j["collective_progress"] = collectives_json(t.collectives);
  json nodes = json::array();
  for (const auto& r : t.nodes) {
    nodes.push_back({{"host", r.host},
                     {"ranks", r.ranks},
                     {"exit", r.exit.empty() ? json(nullptr) : json(r.exit)},
                     {"meaning", r.meaning.empty() ? json(nullptr) : json(r.meaning)},
                     {"kernel_events", r.events},
                     {"verdict", r.verdict.empty() ? json(nullptr) : json(r.verdict)},
                     {"verdict_reasons", r.verdict_reasons},
                     {"reachable", r.reachable},
                     {"unreachable_reason",
                      r.unreachable_reason.empty() ? json(nullptr) : json(r.unreachable_reason)},
                     {"from_agent", r.from_agent},
                     {"from_log", r.from_log},
                     {"log_hint", r.log_hint.empty() ? json(nullptr) : json(r.log_hint)}});
  }
  j["nodes"] = nodes;
  if (t.heartbeat.present) {
    json prior = json::array();
    for (const auto& [task, what] : t.heartbeat.prior_errors)
      prior.push_back({{"task", task}, {"error", what}});
    j["heartbeat"] = {{"line", t.heartbeat.line},
                      {"accused", t.heartbeat.accused},
                      {"self_reported", t.heartbeat.self_reported},
                      {"prior_errors", prior},
                      {"verdict", t.heartbeat.verdict},
                      {"explanation", t.heartbeat.explanation}};
  } else {
    j["heartbeat"] = nullptr;
  }
  if (t.ray.enabled) {
    j["ray"] = {{"tunnel_command",
                 t.ray.tunnel_command.empty() ? json(nullptr) : json(t.ray.tunnel_command)},
                {"tunnel_line", t.ray.tunnel_line > 0 ? json(t.ray.tunnel_line) : json(nullptr)},
                {"head_host", t.ray.head_host.empty() ? json(nullptr) : json(t.ray.head_host)},
                {"prometheus_port", opt(t.ray.prometheus_port)},
                {"prometheus_port_source", t.ray.prometheus_port_source},
                {"live", t.ray.live},
                {"has_tsdb_dir", t.ray.has_tsdb_dir}};
  } else {
    j["ray"] = nullptr;
  }
  json additional = json::array();
  for (const auto& a : t.additional) {
    json x = {{"class", a.cls},         {"title", a.title},     {"count", a.count},
              {"relation", a.relation}, {"trusted", a.trusted}, {"first", finding_json(a.first)}};
    x["last"] = a.last ? finding_json(*a.last) : json(nullptr);
    additional.push_back(std::move(x));
  }
  j["additional_findings"] = additional;
  j["recommendations"] = t.recommendations;
  j["notes"] = t.notes;
  json last = json::array();
  for (const auto& l : t.last_lines)
    last.push_back({{"line", l.number}, {"text", l.text}, {"truncated", l.truncated}});
  j["last_lines"] = last;
  j["scan"] = {{"bytes", t.scan.bytes},
               {"lines", t.scan.lines},
               {"long_lines", t.scan.long_lines},
               {"ends_without_newline", t.scan.ends_without_newline},
               {"stopped_early", t.scan.stopped_early},
               {"harmless_lines", t.scan.harmless_lines},
               {"extra_sources", t.scan.extra_sources}};
  j["tsdb"] = t.tsdb ? tsdb_json(*t.tsdb, t.tsdb_timeline_svg) : json(nullptr);
  // Only where they apply, so that reports printed without --write stay as they were.
  if (!t.report_path.empty()) j["report_path"] = t.report_path;
  if (t.requeue) {
    const RequeueNote& n = *t.requeue;
    j["requeue"] = {{"outcome", n.outcome}, {"reason", n.reason}, {"excluded", n.excluded},
                    {"attempt", n.attempt}, {"max", n.max},       {"steps", n.steps}};
    if (!t.attempt_report_path.empty()) j["requeue"]["attempt_report"] = t.attempt_report_path;
  }
  if (!t.moved.empty()) {
    json moved = json::array();
    for (const MovedNote& m : t.moved)
      moved.push_back({{"node", m.node}, {"reason", m.reason}});
    j["moved"] = std::move(moved);
  }
  if (t.shared_switch) {
    const SharedSwitch& w = *t.shared_switch;
    j["shared_switch"] = {{"switch", w.leaf_switch},
                          {"nodes", w.nodes},
                          {"singled_out", w.singled_out},
                          {"sentence", shared_switch_sentence(w)}};
  }
  return j;
}

std::string render_json(const Triage& t) {
  return triage_to_json(t).dump(2, ' ', false, json::error_handler_t::replace) + "\n";
}

}  // namespace triage
