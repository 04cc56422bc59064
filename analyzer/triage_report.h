// The triage of one job: what triage.md and triage.json are rendered from. It holds data, never
// pre-rendered text: other parts of the analysis (the TSDB playbooks) add their result through
// `tsdb` without touching the rest, and report_render.cpp renders every section (each finding, of
// the log, a node or the metrics, through finding_render.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analyzer/blame.h"
#include "analyzer/finding.h"
#include "analyzer/hang_origin.h"
#include "analyzer/job_identity.h"
#include "analyzer/live_report.h"
#include "analyzer/log_reader.h"
#include "analyzer/shared_switch.h"
#include "analyzer/straggler_verdict.h"
#include "analyzer/tsdb/tsdb.h"
#include "common/model.h"

namespace triage {

inline constexpr int kTriageSchemaVersion = 1;

// Status vocabulary (fixed; used in JSON).
inline constexpr const char* kStatusCompleted = "completed";
inline constexpr const char* kStatusFailed = "failed";
inline constexpr const char* kStatusCancelled = "cancelled";
inline constexpr const char* kStatusRunning = "running";
inline constexpr const char* kStatusHanging = "hanging";
inline constexpr const char* kStatusUnknown = "unknown";

// Fields are grouped for the reader, not packed: one of these exists per report.
struct ProgressProjection {  // NOLINT(clang-analyzer-optin.performance.Padding)
  bool has_steps = false;
  std::string start;  // "fresh" | "restored" | "unknown"
  std::optional<int64_t> restored_from_step;
  std::string start_basis;  // what decided fresh/restored
  int64_t first_step = -1;
  int64_t last_step = -1;
  int64_t first_step_line = 0;
  int64_t last_step_line = 0;
  int64_t steps_this_run = 0;
  std::optional<int64_t> total_steps;
  std::string total_steps_source;
  std::optional<double> percent;
  std::optional<double> step_seconds;
  std::string step_time_basis;
  int64_t last_step_time_usec = 0;   // 0 = unknown
  std::string last_step_time_basis;  // "timestamp" | "estimated" | "log mtime (upper bound)"
  std::optional<int64_t> expected_step;
  int64_t reference_time_usec = 0;  // the "now" of expected_step
  std::string reference_basis;      // "now" | "job end" | ...
  std::optional<double> stall_seconds;
  bool stalled = false;
  // True when the data cannot tell advancing from stopped (no step timestamps, and the log's
  // modification time is recent: a hung job can keep writing other output).
  bool stall_undetermined = false;
  std::optional<int64_t> checkpoint_period;
  std::string checkpoint_period_source;  // "Config param", "PASSTHROUGH_ARGS", "default
                                         // (enable_checkpointing=true)"
  std::optional<bool> checkpointing_enabled;
  std::optional<bool> async_checkpointing;  // saves overlap the next steps
  std::optional<double> last_loss;          // on the last completed step's line (NaN when "nan")
  std::optional<int64_t> last_periodic_checkpoint;  // saved by this run
  std::optional<int64_t> resume_step;               // where a restart would resume from
  std::optional<int64_t> progress_lost_steps;
  std::optional<double> progress_lost_seconds;
  bool progress_lost_all = false;
  std::optional<double> remaining_seconds;
  bool reached_final_step = false;
  uint64_t restarts_in_log = 0;
};

// One node's row: what its agent (trusted) and the log (untrusted) say about it.
struct NodeRow {
  std::string host;
  std::vector<int64_t> ranks;
  std::string exit;                 // "exit 1", "SIGKILL", "exit 137", "" when unknown
  std::string meaning;              // what the exit usually means
  std::vector<std::string> events;  // kernel events on the node during the job, one line each
  std::string verdict;              // healthy | degraded | drain-recommended | unknown
  std::vector<std::string> verdict_reasons;
  bool reachable = true;
  std::string unreachable_reason;
  bool from_agent = false;  // trusted evidence present
  bool from_log = false;    // NODE_EXIT / srun lines mention it
  std::string log_hint;     // what the log says about it (suspicion, not proof)
};

struct HeartbeatCheck {
  bool present = false;
  std::optional<double> timeout_s;  // jax_distributed_heartbeat_timeout_seconds, when the log says
  int64_t line = 0;
  std::vector<int64_t> accused;
  std::vector<int64_t> self_reported;  // accused tasks that logged their own death afterwards
  std::vector<std::pair<int64_t, std::string>>
      prior_errors;     // task -> "python-exception at line N"
  std::string verdict;  // false-positive | true-positive | undetermined
  std::string explanation;
};

struct RayInfo {
  bool enabled = false;
  std::string tunnel_command;
  int64_t tunnel_line = 0;
  std::string head_host;
  std::optional<int> prometheus_port;
  std::string prometheus_port_source;
  bool live = false;
  bool has_tsdb_dir = false;
};

struct AdditionalFinding {
  std::string cls;
  std::string title;
  uint64_t count = 0;
  Finding first;
  std::optional<Finding> last;
  std::string relation;  // "consequence of <class>", "independent", "minor", "harmless-looking"
  bool trusted = false;
};

struct ScanStats {
  uint64_t bytes = 0;
  int64_t lines = 0;
  double seconds = 0;
  uint64_t long_lines = 0;
  bool ends_without_newline = false;
  bool stopped_early = false;
  uint64_t harmless_lines = 0;
  std::vector<std::string> extra_sources;  // full mode: other files scanned
};

struct Triage : JobIdentity {
  int schema_version = kTriageSchemaVersion;
  std::string mode = "basic";
  int64_t generated_usec = 0;

  std::string status = kStatusUnknown;
  std::string status_reason;
  std::string slurm_state;         // as known
  std::string slurm_state_source;  // evidence | option | squeue | unavailable
  struct Summary {
    bool found = false;
    int64_t line = 0;
    std::string status_word;
    std::optional<int> exit_code;
    int64_t finished_usec = 0;
  } summary;

  std::string primary_failure;  // class id; empty = none
  std::string primary_title;
  std::string stage;
  std::string what_happened;
  // Whose fault it was (blame_decision.h); no value when nothing failed.
  std::optional<Blame> blame;
  std::string blame_basis;        // the evidence that decided it
  bool blame_trusted = false;     // that evidence is a node's kernel or Slurm's, not the log's word
  std::string blame_summary;      // the report's first words: "Not your code: ..."
  std::vector<Finding> evidence;  // the primary failure's evidence, in order
  std::vector<std::string> evidence_notes;
  ProgressProjection progress;
  // Where the hang began (hang_origin.h): judged when the job hung or a collective timed out, or
  // the log has the watchdog's numbers; `collectives` are those numbers, per rank.
  bool hang_origin_judged = false;
  HangOrigin hang_origin;
  std::vector<CollectiveProgress> collectives;
  // Slow ranks and a lasting slowdown of the whole job (straggler_verdict.h).
  std::vector<Straggler> stragglers;
  Slowdown slowdown;
  std::vector<StepPace> step_times;  // the series the slowdown was judged on (and is drawn from)
  // Full mode: the pictures written beside the report ("" = none).
  std::string step_time_svg;
  std::string clock_strip_svg;
  std::vector<NodeRow> nodes;
  HeartbeatCheck heartbeat;
  RayInfo ray;
  std::vector<AdditionalFinding> additional;
  std::vector<std::string> recommendations;
  std::vector<std::string> notes;
  ScanStats scan;
  std::vector<LineCopy> last_lines;  // the end of the log, for deaths without a summary

  // The batch host's live record, when the agent followed the job (analyzer/live_report.h).
  std::optional<LiveSection> live;

  // The TSDB playbooks' result, when they ran (full mode).
  std::optional<tsdb::TsdbResult> tsdb;
  std::string tsdb_timeline_svg;  // the timeline's file name beside the report, once written

  // Where the report is written (`analyze --write`; "" otherwise), and, on the report pass of a
  // --triage-requeue job, what the agent did about the requeue and this attempt's own copy.
  std::string report_path;
  std::optional<RequeueNote> requeue;
  std::string attempt_report_path;

  // The nodes the preflight moved the job off before it started (docs/agent.md, "Preflight"), and,
  // for a network failure, the leaf switch all its implicated nodes hang off (shared_switch.h).
  std::vector<MovedNote> moved;
  std::optional<SharedSwitch> shared_switch;
};

}  // namespace triage
