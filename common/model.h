// The facts that travel between the pieces: kernel events from the collectors, task exits from the
// SPANK plugin, job facts from slurmctld or the epilog, and a node's health verdict. The agent
// bundles them per job as Evidence and hands that to `slurm-triage analyze --evidence`. The JSON
// shapes are documented in docs/protocol.md and are a compatibility promise: add fields, never
// rename them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace triage {

inline constexpr int kEvidenceSchemaVersion = 1;

enum class Severity { kInfo, kWarning, kError, kCritical };
std::string_view to_string(Severity s);
std::optional<Severity> parse_severity(std::string_view s);

// One thing a node's kernel (or its hardware counters) said. Multi-line records are one event;
// identical floods are folded into one event with a count and first/last time.
struct KernelEvent {
  std::string id;    // unique per node and stable across agent restarts (e.g. "<boot>:<seq>")
  std::string kind;  // the vocabulary in docs/protocol.md: "oom-kill", "nvidia-xid", ...
  Severity severity = Severity::kInfo;
  std::string host;
  std::string boot_id;
  int64_t time_usec = 0;  // wall clock of the first occurrence (0 = unknown)
  int64_t last_usec = 0;  // wall clock of the last folded occurrence
  uint64_t count = 1;
  std::string rule;     // id of the kernel rule that produced it
  std::string summary;  // one human line
  std::string device;   // PCI address or interface name, when the kernel printed one
  std::optional<int64_t> pid;
  std::string task;  // comm of the process involved
  std::optional<int64_t> uid;
  std::optional<int64_t> code;     // NVIDIA Xid code
  std::string block;               // AMD RAS block: umc, xgmi, gfx, mmhub, sdma, ...
  std::optional<uint64_t> job_id;  // from the cgroup path when the kernel printed one
  std::string step;                // "0", "batch", "extern", ...
  std::string cgroup;
  std::string cause;   // id of an earlier event that caused this one (Xid 45 after Xid 79)
  std::string action;  // the catalog's advice: none, investigate, reset-gpu, drain, reboot
  std::vector<std::string> lines;             // verbatim kernel text (bounded; see kMaxEventLines)
  std::map<std::string, std::string> fields;  // any other named captures of the rule

  static constexpr size_t kMaxEventLines = 64;
};

// A task that ran on a node, as the plugin saw it in slurmstepd. The raw wait status is kept; the
// decoded fields are filled by decode().
struct TaskExit {
  std::string host;
  uint64_t job_id = 0;
  std::string step;   // "0", "1", "batch", "extern", "interactive"
  int64_t task = -1;  // node-local task id
  int64_t rank = -1;  // global task id (the rank)
  int64_t pid = 0;
  std::optional<int> wait_status;  // absent while the task is running
  std::optional<int> exit_code;    // set when it exited normally
  std::optional<int> signal;       // set when a signal ended it
  bool core_dumped = false;
  int64_t start_usec = 0;
  int64_t end_usec = 0;

  void decode();  // derive exit_code/signal/core_dumped from wait_status
};

struct VerdictReason {
  std::string reason;  // one line: "uncorrectable ECC error on GPU 0000:c1:00.0"
  std::string action;  // "drain", "reboot-at-job-boundary", "watch", ...
  std::vector<std::string> event_ids;
};

// A node's health, decided from trusted evidence only (kernel, sysfs).
struct NodeVerdict {
  std::string host;
  std::string verdict = "healthy";  // healthy | degraded | drain-recommended
  std::vector<VerdictReason> reasons;
  int64_t time_usec = 0;
};

struct DStateSummary {
  int64_t time_usec = 0;
  uint64_t count = 0;       // tasks in D state at the last sample
  uint64_t persistent = 0;  // of those, how many were already in D at the previous sample(s)
  std::map<std::string, uint64_t> by_wchan;
};

// What slurmctld (or, failing that, the epilog environment) says about a job.
struct JobFacts {
  uint64_t job_id = 0;  // the record's own id (an array task's or a het job component's own)
  // Which attempt Slurm means by this record (agent/slurm/job_ref.h names it from these): Slurm
  // reads a bare id that is also an array's or a het job's id as the whole array or het job.
  std::optional<uint32_t> array_job_id;   // every record of an array, an unexpanded one too
  std::optional<uint32_t> array_task_id;  // the task's index (absent: a pending array record)
  std::optional<uint32_t> het_job_id;  // every component of a heterogeneous job (the leader's id)
  std::optional<uint32_t> het_job_offset;  // the component's offset (0: the leader)
  std::string name;
  std::string user;
  std::optional<uint32_t> uid;
  std::optional<uint32_t> gid;
  std::string state;               // Slurm job state: COMPLETED, FAILED, CANCELLED, TIMEOUT, ...
  std::optional<int> wait_status;  // SLURM_JOB_EXIT_CODE: the batch script's raw wait status
  std::optional<int> derived_wait_status;  // SLURM_JOB_EXIT_CODE2 / derived exit code
  std::string work_dir;
  std::string stdout_path;     // expanded (slurm_get_job_stdout) when known
  std::string stdout_pattern;  // raw --output pattern from the epilog (may hold %j etc.)
  std::string stderr_path;
  std::vector<std::string> nodes;
  std::string batch_host;
  int64_t submit_time = 0;  // seconds since the epoch; 0 = unknown
  int64_t start_time = 0;
  int64_t end_time = 0;
  int restart_count = 0;
  std::optional<int64_t> gpus;  // GPUs allocated to the whole job (slurmctld's TRES), when known
  std::optional<int64_t> time_limit_sec;  // the job's time limit (absent: unknown or none)
  // For the live hang actions only (not in the evidence JSON): Slurm's AdminComment as it stands
  // and whether the job may be requeued (Requeue=1).
  std::string admin_comment;
  bool requeue_allowed = false;
  // For the requeue only (not in the evidence JSON): ExcNodeList as slurmctld keeps it ("" for
  // none) and whether the job has a batch script (BatchFlag: Slurm requeues only those).
  std::string excluded_nodes;
  bool batch = false;
  std::string partition;
  std::string mode;    // off | basic | full
  std::string source;  // slurmctld | epilog | cli
};

// One node's share of a job's evidence.
struct NodeEvidence {
  std::string host;
  bool reachable = true;
  std::string error;  // why it was not reachable, when it was not
  std::vector<TaskExit> tasks;
  std::vector<KernelEvent> events;  // kernel events attributed to this job on this node
  std::optional<NodeVerdict> verdict;
  std::optional<DStateSummary> dstate;
  uint64_t job_dstate = 0;  // of those D-state tasks, the job's own (its cgroup) at the last sample
  // The leaf switch the node hangs off in Slurm's topology ("": unknown, or no topology).
  std::string leaf_switch;
};

// What the agent did about a job that asked for --triage-requeue, for the report of the attempt
// it concerns (docs/agent.md, "Requeue around failed nodes").
struct RequeueNote {
  std::string outcome;                // requeued | declined | refused
  std::string reason;                 // one sentence: why
  std::vector<std::string> excluded;  // the nodes the next attempt is kept off
  int attempt = 0;                    // this attempt: Slurm's restart count when it ran
  int max = 0;                        // the N of --triage-requeue=N
  std::vector<std::string> steps;     // each Slurm command and how it went
};

// A node the job was moved off before it started: its preflight refused the job there
// (docs/agent.md, "Preflight"), as the job's AdminComment records it ("triage-refused=...").
struct MovedNote {
  std::string node;
  std::string reason;  // the refusal's evidence, "triage preflight: ..."
};

// The first line of a failure class seen in a running job's log (untrusted: the log's word).
struct LiveWarning {
  std::string cls;
  int64_t line = 0;
  std::string text;
  int64_t seen_usec = 0;
};

// A stall the agent flagged and that later resumed (steps came again).
struct LiveStall {
  int64_t flagged_usec = 0;
  int64_t step = -1;
  double silence_s = 0;
  int64_t resumed_usec = 0;
};

// What the batch host's agent learnt about a job while it ran (issue 15): the early warnings of
// its log, whether and when a stall was flagged, at which step, on what evidence, and what was
// done about it. Kept in the job's spool file and handed to the analyzer in the evidence, which
// writes the interim `hang (live)` report from it and, after the job, says what was flagged and
// done.
struct LiveRecord {
  int64_t followed_since_usec = 0;
  std::vector<LiveWarning> warnings;
  int64_t flagged_usec = 0;  // when the stall was flagged (0: never)
  int64_t step = -1;         // the last step before the silence (-1: none seen)
  int64_t step_line = 0;
  int64_t last_step_usec = 0;
  double silence_s = 0;                    // at the flag
  double threshold_s = 0;                  // the silence allowed
  std::string basis;                       // the stall verdict's sentence
  std::vector<std::string> corroboration;  // node facts backing it, one line each
  int64_t resumed_usec = 0;                // steps came again after the flag (0: not)
  std::string action;                      // notify | cancel | requeue ("" before the flag)
  std::string action_reason;
  int64_t action_usec = 0;
  std::string action_error;  // empty: the command worked (or none ran)
  // A cancel or requeue's fate: "" (not run yet, or under way), done, retry (a try failed, another
  // comes), failed (every try failed), not-done (Slurm showed another attempt or state: nothing
  // was run; action_error says what it showed). action_tries: the commands run so far.
  std::string action_result;
  int64_t action_tries = 0;
  int64_t stalls = 0;  // how many stalls were flagged in all (the current one included)
  std::vector<LiveStall> earlier_stalls;  // the latest earlier ones, each resumed
  // The pace warning while it lasts (issue 28): a lasting slowdown or a straggler, as judged on
  // the log read so far ("Pace (live): ..."); "" when none stands. Never part of a stall.
  std::string pace_warning;
  int64_t pace_warning_usec = 0;  // when it was raised (0: none stands)
};

// Everything the agent knows about one ended job, handed to the analyzer on a pipe.
struct Evidence {
  int schema_version = kEvidenceSchemaVersion;
  JobFacts job;
  std::vector<NodeEvidence> nodes;
  std::string report_path;  // where triage.md goes; empty = the analyzer's own placement rules
  // Set on the report pass of a --triage-requeue job: the report says it, and a copy of it is kept
  // per attempt (triage.attempt<N>.md) so that the next attempt's report does not replace it.
  std::optional<RequeueNote> requeue;
  std::optional<LiveRecord> live;  // the batch host's live record, when it followed the job
  std::vector<MovedNote> moved;    // the nodes the preflight moved the job off, before it started
};

void to_json(nlohmann::json& j, const KernelEvent& e);
void to_json(nlohmann::json& j, const TaskExit& t);
void to_json(nlohmann::json& j, const VerdictReason& r);
void to_json(nlohmann::json& j, const NodeVerdict& v);
void to_json(nlohmann::json& j, const DStateSummary& d);
void to_json(nlohmann::json& j, const JobFacts& f);
void to_json(nlohmann::json& j, const NodeEvidence& n);
void to_json(nlohmann::json& j, const RequeueNote& n);
void to_json(nlohmann::json& j, const MovedNote& n);
void to_json(nlohmann::json& j, const LiveWarning& w);
void to_json(nlohmann::json& j, const LiveStall& s);
void to_json(nlohmann::json& j, const LiveRecord& r);
void to_json(nlohmann::json& j, const Evidence& e);

// Parsers are strict about types and name the offending field ("nodes[2].tasks[0].pid: expected
// an integer") through InputError(origin, 0, ...). Unknown fields are ignored (newer writers).
KernelEvent kernel_event_from_json(const nlohmann::json& j, const std::string& origin,
                                   const std::string& path = "");
TaskExit task_exit_from_json(const nlohmann::json& j, const std::string& origin,
                             const std::string& path = "");
NodeVerdict node_verdict_from_json(const nlohmann::json& j, const std::string& origin,
                                   const std::string& path = "");
JobFacts job_facts_from_json(const nlohmann::json& j, const std::string& origin,
                             const std::string& path = "");
NodeEvidence node_evidence_from_json(const nlohmann::json& j, const std::string& origin,
                                     const std::string& path = "");
RequeueNote requeue_note_from_json(const nlohmann::json& j, const std::string& origin,
                                   const std::string& path = "");
LiveRecord live_record_from_json(const nlohmann::json& j, const std::string& origin,
                                 const std::string& path = "live");
Evidence evidence_from_json(const nlohmann::json& j, const std::string& origin);
// Parses text (at most 64 MiB) into Evidence; bad JSON is an InputError with the byte offset.
Evidence parse_evidence(std::string_view text, const std::string& origin);

}  // namespace triage
