// Structured facts a training log states outright, extracted in the same pass as the signature
// scan: training steps, the JOB SUMMARY, the run's config (steps=, checkpointing), node exits, task
// failures reported by srun, the Ray tunnel, heartbeat accusations, tracebacks, checkpoint
// restore markers, the lines that announce a pause in training (a checkpoint save, an
// evaluation pass), and each rank's NCCL watchdog numbers (collective_progress.h). Each extractor
// is triggered by a literal (see fact_triggers()) and may ask for the lines that follow (a summary
// block, a traceback).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "analyzer/collective_progress.h"
#include "analyzer/line_text.h"
#include "analyzer/rank_rhythm.h"

namespace triage {

// What a line can tell the extractors; fact_triggers() lists the (lower-case) literals for each.
enum class FactKind : uint8_t {
  kStep,
  kSummary,
  kPassthrough,
  kConfigParam,
  kNodeExit,
  kSshTunnel,
  kPrometheusPort,
  kHeartbeat,
  kPolledError,
  kTerminating,
  kTraceback,
  kSrunError,
  kFreshStart,
  kRestore,
  kCheckpointSave,
  kEvaluation,
  kCollective,
  kRhythmBlock,
  kCount
};
struct FactTrigger {
  std::string literal;
  FactKind kind;
};
const std::vector<FactTrigger>& fact_triggers();

// What marks a training step line; the step number follows it.
inline constexpr std::string_view kStepMarker = "completed step:";

// A step line's own timestamp (its text after split_line), wherever it stands before the step
// marker: at the start, in brackets, or behind a logging prefix.
std::optional<LineTimestamp> step_line_timestamp(std::string_view text, int year_hint);

// The first steps of a run (compilation, cache warm-up) are not its pace: steps from
// first_step + kWarmUpSteps on are the steady state.
inline constexpr int64_t kWarmUpSteps = 5;

// One uninterrupted run of training steps (a restart in the same log starts a new one).
struct StepSegment {
  int64_t first_step = -1;
  int64_t last_step = -1;
  int64_t first_line = 0;
  int64_t last_line = 0;
  int64_t first_time_usec = 0;  // 0 = the line had no timestamp
  int64_t last_time_usec = 0;   // (-1 while the collector has not worked it out yet)
  uint64_t distinct_steps = 0;
  double steady_seconds_sum = 0;  // steps >= first_step + kWarmUpSteps
  uint64_t steady_count = 0;
  double warm_seconds_sum = 0;  // steps first_step + 1 .. first_step + kWarmUpSteps - 1
  uint64_t warm_count = 0;
  double first_seconds = -1;
  std::string last_text;
};

// One training step's pace as the log states it: the step line's own "seconds:", else the time
// since the previous step line divided by the steps between them (-1 = neither known).
struct StepPace {
  int64_t step = 0;
  double seconds = -1;
  int64_t time_usec = 0;  // the step line's timestamp (0 = none)
  int64_t line = 0;
};

// Step times kept for the last segment; beyond this every other one is dropped and the stride
// doubles (a week-long run at one step a second still spans the whole run).
inline constexpr size_t kMaxStepTimes = size_t{1} << 17;

struct JobSummaryFacts {
  bool found = false;
  int64_t line = 0;
  std::string status_word;  // SUCCESS, FAILED, CANCELLED, ...
  std::optional<int> exit_code;
  int64_t status_line = 0;
  std::string status_text;
  int64_t finished_usec = 0;  // "Finished:" / "End time:" in the block, when printed
};

struct RunConfigFacts {
  std::optional<int64_t> total_steps;
  std::string total_steps_source;
  std::optional<int64_t> checkpoint_period;
  std::optional<bool> enable_checkpointing;
  std::optional<bool> async_checkpointing;
  std::optional<double> heartbeat_timeout_s;  // jax_distributed_heartbeat_timeout_seconds
  std::string passthrough;                    // the PASSTHROUGH_ARGS text (bounded)
  int64_t passthrough_line = 0;
};

struct NodeExitFact {
  std::string host;
  int exit_code = 0;
  int64_t line = 0;
};

// "srun: error: node003: tasks 4-7: Killed": which tasks ran where, and how they ended.
struct SrunTaskFact {
  std::string host;
  std::string tasks;  // as printed ("3", "4-7", "0,2")
  std::vector<int64_t> ranks;
  std::string outcome;  // "Exited with exit code 1", "Killed", "Out Of Memory", ...
  int64_t line = 0;
};

struct TunnelFacts {
  std::string command;  // the ssh -L command line as printed
  int64_t line = 0;
  std::string head_host;
  std::vector<int> forwarded_ports;  // remote ports of the -L specs
  std::optional<int> prometheus_port;
  std::string prometheus_port_source;  // "prometheus-log", "tunnel", "default"
  int64_t prometheus_line = 0;
};

struct HeartbeatFacts {
  int64_t line = 0;              // the first heartbeat accusation
  std::vector<int64_t> accused;  // JAX task ids, sorted, bounded
};

struct TracebackFact {
  int64_t start_line = 0;
  int64_t rank = -1;
  int64_t exception_line = 0;
  std::string exception_text;
  // The innermost frame's file (the last `File "PATH", line N` line), when the traceback shows one:
  // where the exception was raised.
  std::string raised_in;
};

struct RestoreFacts {
  bool fresh = false;  // "No existing checkpoints found"
  std::optional<int64_t> restored_step;
  int64_t line = 0;
  std::string source;  // "log" or the worker log's relative path
};

// The last line announcing a pause in training: training is quiet while a checkpoint is written or
// an evaluation runs, so a live stall judgement must know one was announced.
struct PauseAnnouncement {
  int64_t line = 0;       // 0 = none seen
  int64_t time_usec = 0;  // the line's own timestamp (0 = none)
  uint64_t count = 0;
  std::string text;  // bounded
};

struct LogFacts {
  StepSegment steps;                 // the last segment
  std::vector<StepSegment> earlier;  // earlier segments, newest last (bounded)
  uint64_t restarts = 0;
  JobSummaryFacts summary;
  RunConfigFacts config;
  std::vector<NodeExitFact> node_exits;  // last per host, bounded
  std::vector<SrunTaskFact> srun_tasks;  // bounded
  TunnelFacts tunnel;
  HeartbeatFacts heartbeat;
  std::map<int64_t, int64_t> self_reported_death;  // rank -> first line it logged its own death
  std::vector<TracebackFact> tracebacks;           // first ones, bounded
  RestoreFacts restore;
  PauseAnnouncement checkpoint_save;  // "Saving checkpoint", "Saving model checkpoint to", ...
  PauseAnnouncement evaluation;       // "***** Running Evaluation *****", "Evaluating iter", ...
  bool ray_enabled = false;           // RAY=1 in the header
  // Each rank's NCCL watchdog numbers per process group, in the order first seen (bounded).
  std::vector<CollectiveProgress> collectives;
  // The last segment's steps, one entry per `step_times_stride` steps, and each rank's own pace
  // (rank_rhythm.h): what straggler_verdict.h judges.
  std::vector<StepPace> step_times;
  int64_t step_times_stride = 1;
  RankRhythm rhythm;
};

// Feeds lines to the extractors. The scanner calls on_line() for every line that holds a trigger
// literal and for every line while lines_wanted() is non-zero.
class FactCollector {
 public:
  // `year_hint`: the year for timestamps printed without one (0 = the current year).
  explicit FactCollector(int year_hint);

  // Continues `seg` instead of starting a new segment: a live follower scans a log chunk by chunk,
  // and the steady/warm split and the restart test count from the segment's first step.
  void continue_steps(const StepSegment& seg);

  // `kinds` is a bit mask of FactKind values whose literal the line contains (0 for lines fed only
  // because a window is open).
  void on_line(const LineText& lt, int64_t line_no, uint32_t kinds);
  // How many following lines the open windows still want.
  int64_t lines_wanted() const;
  // The lines at the start of [data, data + size) that only an open per-rank block wants, read in
  // one go (RankRhythmReader::take_block_lines); the first is line `first_line`. Returns the
  // bytes taken (0 when another window wants the lines too) and sets `lines` to their count.
  size_t take_block_lines(const char* data, size_t size, int64_t first_line, int64_t* lines);
  // The start line of an open traceback of this rank, or 0.
  int64_t open_traceback(int64_t rank) const;
  // Parses the header lines (the first lines of the log) for RAY=1 and friends.
  void on_header_line(std::string_view text);

  // Whether to read each rank's pace and keep the step-time series (on by default).
  void set_rank_rhythm(bool on) { rank_rhythm_ = on; }

  // The facts, finished (the last step's time is worked out here, not on every step line).
  LogFacts take();

 private:
  void on_step(const LineText& lt, int64_t line_no);
  void finish_segment(StepSegment& seg) const;
  void on_summary_window_line(const LineText& lt, int64_t line_no);
  void on_passthrough(const LineText& lt, int64_t line_no);
  void on_config_param(const LineText& lt);
  void on_node_exit(const LineText& lt, int64_t line_no);
  void on_ssh_tunnel(const LineText& lt, int64_t line_no);
  void on_prometheus_port(const LineText& lt, int64_t line_no);
  void on_heartbeat_text(std::string_view text);
  void on_srun_error(const LineText& lt, int64_t line_no);
  void on_traceback_window_line(const LineText& lt, int64_t line_no);
  void on_restore(const LineText& lt, int64_t line_no, bool fresh);
  void on_pause(PauseAnnouncement& pause, const LineText& lt, int64_t line_no);
  void on_collective(const LineText& lt, int64_t line_no);
  void record_step_time(const LineText& lt, int64_t step, double seconds, int64_t line_no);

  struct OpenTraceback {
    int64_t rank = -1;
    int64_t start_line = 0;
    int64_t lines_left = 0;
    size_t fact_index = 0;  // into facts_.tracebacks, or SIZE_MAX when not kept
  };

  LogFacts facts_;
  int year_hint_;
  int64_t summary_lines_left_ = 0;
  int64_t heartbeat_lines_left_ = 0;
  std::vector<OpenTraceback> open_tracebacks_;
  std::map<std::pair<std::string, int64_t>, size_t> collective_index_;  // (pg, rank) -> index
  RankRhythmReader rhythm_;
  bool rank_rhythm_ = true;
};

// "steps=5000 enable_checkpointing=true" -> key/value pairs (quotes and commas tolerated).
std::map<std::string, std::string> parse_key_values(std::string_view text);

}  // namespace triage
