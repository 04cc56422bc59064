#include "analyzer/diagnosis_narrative.h"

#include <cstdio>

#include "analyzer/diagnosis.h"
#include "common/text.h"

namespace triage {

namespace {

bool live(const Triage& t) {
  return t.status == kStatusRunning || t.status == kStatusHanging;
}

std::string completed_text(const Triage& t) {
  const ProgressProjection& p = t.progress;
  std::string what = "The job completed successfully";
  if (!t.status_reason.empty()) what += " (" + t.status_reason + ")";
  what += ".";
  if (p.has_steps) {
    what += " Training ran through step " + std::to_string(p.last_step) +
            (p.reached_final_step ? ", the final step." : ".");
  }
  return what;
}

std::string running_text(const ProgressProjection& p) {
  std::string what = "The job is still running";
  if (p.has_steps && p.stall_seconds && !p.stall_undetermined) {
    what += ": the last training step (" + std::to_string(p.last_step) + ") was logged " +
            format_duration(*p.stall_seconds) + " ago, within the normal step time.";
  } else if (p.has_steps) {
    what += "; the last training step logged is " + std::to_string(p.last_step) +
            ", but the log gives no time for it, so a stall cannot be ruled out.";
  } else {
    what += "; no training step has been logged yet.";
  }
  return what;
}

// How long before the end (or now) the stalled job logged its last step.
std::string stall_text(const ProgressProjection& p) {
  std::string what = " The last step (" + std::to_string(p.last_step) + ") was logged " +
                     format_duration(*p.stall_seconds) + " before " +
                     (p.reference_basis == "now" ? std::string("now") : p.reference_basis);
  if (p.expected_step) {
    what +=
        "; at this job's step time it should have reached step " + std::to_string(*p.expected_step);
  }
  return what + ".";
}

std::string failure_text(const Triage& t, const SignatureClass* pc) {
  const ProgressProjection& p = t.progress;
  std::string what;
  if (t.status == kStatusCancelled && pc != nullptr && !pc->cancellation) {
    what = "The job was cancelled, but cancellation was not the cause. ";
  } else if (t.status == kStatusHanging) {
    what = "Slurm still runs the job, but training has stopped. ";
  }
  if (pc == nullptr) {
    what += "The job did not succeed, but no known failure signature was found in the log";
    if (t.summary.exit_code) what += " (exit " + std::to_string(*t.summary.exit_code) + ")";
    return what + ". Read the end of the log.";
  }
  what += pc->explain;
  if (pc->derived == Derivation::kStall && p.stall_seconds) what += stall_text(p);
  return what;
}

void node_steps(const Triage& t, std::vector<std::string>& out) {
  for (const auto& row : t.nodes) {
    if (row.verdict == "drain-recommended") {
      std::string r = "Administrators: node " + row.host + " is recommended for draining";
      if (!row.verdict_reasons.empty()) r += " (" + row.verdict_reasons.front() + ")";
      out.push_back(r + ".");
    }
    if (row.from_agent && !row.reachable) {
      out.push_back("Node " + row.host + " did not answer (" + row.unreachable_reason +
                    "); its kernel evidence is missing from this report.");
    }
  }
}

std::string speed_text(double v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

// A straggler or a lasting slowdown is worth a step even when the job completed: the next run on
// the same node loses the same time (straggler_verdict.h).
void pace_steps(const Triage& t, std::vector<std::string>& out) {
  for (const Straggler& s : t.stragglers) {
    std::string who = s.rank ? "Rank " + std::to_string(*s.rank) : std::string("A node");
    if (!s.node.empty()) who += (s.rank ? " on node " : " ") + s.node;
    std::string r =
        who + " ran at " + speed_text(s.relative_speed) + " of the others' pace (" + s.basis + ")";
    r += s.node.empty()
             ? ": find which node it ran on (the job's task layout) and check that node's GPUs."
             : ": check that node's GPUs (clocks, temperature, power capping: nvidia-smi -q -d "
               "PERFORMANCE,TEMPERATURE,POWER or rocm-smi), and if it lags again, run without it "
               "(sbatch --exclude=" +
                   s.node + ") and tell the administrators.";
    out.push_back(r);
  }
  if (t.slowdown.found) {
    std::string r = "The step time rose from " + speed_text(t.slowdown.from_s) + " s to " +
                    speed_text(t.slowdown.to_s) + " s at step " +
                    std::to_string(t.slowdown.since_step) + " and stayed there";
    r += t.slowdown.node.empty()
             ? ": compare what changed at that step (data, checkpointing, the nodes' other load)."
             : ", with node " + t.slowdown.node + " (" + t.slowdown.basis +
                   "): look at that node first.";
    out.push_back(r);
  }
}

void ray_steps(const Triage& t, std::vector<std::string>& out) {
  if (!t.ray.enabled) return;
  if (t.ray.live && !t.ray.head_host.empty()) {
    out.push_back("The job is live: its Prometheus is at http://" + t.ray.head_host + ":" +
                  std::to_string(t.ray.prometheus_port.value_or(9190)) +
                  " (reachable from the head node's network, not localhost:9090).");
  } else if (!t.ray.live && t.ray.has_tsdb_dir && t.status != kStatusCompleted) {
    out.push_back("The live dashboards are gone; open the saved metrics read-only from " +
                  (t.job_dir.empty() ? std::string("<job dir>") : t.job_dir) +
                  "/prometheus for TSDB diagnosis.");
  }
}

}  // namespace

std::string what_happened(const Triage& t, const SignatureCatalog& catalog) {
  if (t.status == kStatusCompleted) return completed_text(t);
  if (t.status == kStatusRunning) return running_text(t.progress);
  return failure_text(t, t.primary_failure.empty() ? nullptr : catalog.find(t.primary_failure));
}

std::vector<std::string> next_steps(const Triage& t, const SignatureCatalog& catalog) {
  std::vector<std::string> out;
  const SignatureClass* pc = t.primary_failure.empty() ? nullptr : catalog.find(t.primary_failure);
  if (pc != nullptr) {
    for (const auto& n : pc->next) {
      if (!n.live_only || live(t)) out.push_back(fill_placeholders(n.text, t));
    }
  }
  if (t.heartbeat.present && (pc == nullptr || !pc->heartbeat_check)) {
    out.push_back("Heartbeat timeout: " + t.heartbeat.verdict + ". " + t.heartbeat.explanation);
  }
  node_steps(t, out);
  pace_steps(t, out);
  ray_steps(t, out);
  if (t.status == kStatusRunning && t.progress.stall_undetermined && t.progress.has_steps) {
    out.push_back(
        "Step lines carry no timestamps: watch for new 'completed step:' lines (or run "
        "slurm_job_monitor.sh) to tell a running job from a hang.");
  }
  return out;
}

std::vector<std::string> input_notes(const Triage& t) {
  std::vector<std::string> out;
  if (t.scan.ends_without_newline && !live(t)) {
    out.push_back(
        "The log ends in the middle of a line: the writer stopped abruptly (typical of SIGKILL).");
  }
  if (t.scan.long_lines > 0) {
    out.push_back(std::to_string(t.scan.long_lines) +
                  " line(s) longer than the scan buffer were scanned in pieces; evidence "
                  "quotes them truncated.");
  }
  if (t.scan.stopped_early)
    out.push_back("Only the first part of the log was scanned (size limit).");
  if (t.progress.restarts_in_log > 0) {
    out.push_back("Training restarted " + std::to_string(t.progress.restarts_in_log) +
                  " time(s) within this log; the projection describes the last run.");
  }
  return out;
}

}  // namespace triage
