// Full-mode diagnosis from a job's metrics: the public API of triage_tsdb.
//
//   TsdbRequest req;                       // what triage found, where the metrics are
//   req.job_dir = "/home/alice/outputs/4242-llama";
//   req.triage_class = "hang";
//   req.last_step = 316; req.last_step_time = 1763729000; req.job_end = 1763736200;
//   TsdbResult res = run_tsdb_analysis(req);   // never throws for missing pieces: see res.notes
//   json["tsdb"] = res.to_json();
//   md += res.render_markdown({"tsdb-timeline.svg"});
//   write_svg_timeline(res, job_dirfd, "tsdb-timeline.svg");
//
// Sources, in order: a cluster Prometheus (`cluster_url`), the live job's own Prometheus on its
// head node (`liveness == kLive` and `head_host`/`head_port`), a private copy of the job's
// `prometheus/` directory served by a private read-only prometheus (blocks only while the job is
// live). docs/tsdb.md describes the playbooks, the JSON and the safety rules.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "analyzer/finding.h"
#include "analyzer/tsdb/prom_client.h"
#include "common/kv_config.h"
#include "common/model.h"
#include "common/tsdb_config_keys.h"

namespace triage::tsdb {

enum class JobLiveness { kUnknown, kLive, kFinished };

struct TsdbRequest {
  // Where the job's artifacts are: <job_dir>/prometheus/ is the job's own TSDB (RAY=1 jobs).
  std::string job_dir;
  std::string job_id;  // for names and the report only

  // The job's window (seconds since the epoch). Absent: the TSDB's own range.
  std::optional<double> job_start;
  std::optional<double> job_end;
  // The job's nodes. Empty: whatever hosts the TSDB holds (a cluster Prometheus needs them).
  std::vector<std::string> hosts;

  // What the log triage concluded.
  std::string triage_class;                  // hang, heartbeat-timeout, oom-host, node-fail, ...
  std::vector<std::string> class_playbooks;  // the catalog's playbook ids for triage_class
  std::optional<double> failure_time;        // the crash / error line's time
  std::optional<double> last_step_time;      // wall clock of the last "completed step" (hang start)
  std::optional<int64_t> first_step;
  std::optional<int64_t> last_step;  // the wrong-database guard compares these two with tb_*
  std::optional<double> last_loss;
  std::vector<std::string> accused_hosts;  // heartbeat-timeout: hosts of the "unhealthy" tasks
  std::vector<int64_t> accused_tasks;
  std::optional<double> heartbeat_timeout_s;  // jax_distributed_heartbeat_timeout_seconds
  std::string coordinator_host;               // task 0's host (gRPC coordinator)
  std::optional<int64_t> checkpoint_period;
  bool async_checkpointing = false;
  std::optional<double> step_time_s;  // steady-state step time from the log
  std::string gpu_model;              // a hint such as "MI355X" or "NVIDIA H100 80GB HBM3"

  // How to reach the metrics.
  JobLiveness liveness = JobLiveness::kUnknown;
  std::string head_host;  // live job: its Prometheus, from the tunnel line in the log
  uint16_t head_port = 0;
  std::string cluster_url;          // PrometheusURL= in triage.conf
  std::string host_label = "host";  // the host label of the cluster Prometheus

  // What to run: the class's playbooks (`class_playbooks`; when empty, the `playbooks` key of the
  // class's [signature] section in the rule layers), plus GPU health (5), network health (6) and
  // training stability (7) in full mode. A non-empty `playbooks` replaces the choice (numbers 1-7).
  bool full = true;
  std::vector<int> playbooks;

  // Environment.
  std::string prometheus_binary = "prometheus";  // name (searched in $PATH) or absolute path
  std::string scratch_dir;                       // where the private copy goes ($TMPDIR, /tmp)
  std::vector<std::string> rule_layers;          // empty: default_rule_layers()
  double query_timeout_s = 60;
  double ready_timeout_s = 120;
  uint64_t max_copy_bytes = uint64_t{256} << 30;
};

// One query as it was sent, with (a bounded part of) what came back.
struct QueryRecord {
  std::string query;
  std::string kind;  // instant | range | raw
  double time = 0;   // instant: evaluation time; range: end
  double start = 0;  // range only
  double step = 0;   // range only
  struct Row {
    Labels labels;
    double value = 0;  // instant value, or the last value of a range
    std::optional<double> min, max, avg;
    size_t points = 0;
  };
  std::vector<Row> rows;
  size_t total_rows = 0;  // rows beyond the bound are counted, not kept
  std::string error;
  double seconds = 0;
};

struct EvidenceTable {
  std::string title;
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
};

// Something that deviated, when and where: the raw material of the root-cause chain.
struct Anomaly {
  double time = 0;
  std::string host;
  std::string gpu;
  std::string metric;
  std::string domain;  // training | gpu | network | io | memory | hardware | monitoring
  // How it can figure in a chain: a system or training event that can start one ("cause"), or a
  // consequence one usually sees later (power/utilisation/throughput drops: "symptom").
  std::string kind = "cause";
  std::string text;
  bool during_checkpoint = false;
};

struct PlaybookResult {
  int number = 0;
  std::string
      id;  // hang | heartbeat | oom | hardware | gpu-health | network-health | training-stability
  std::string title;
  std::string verdict;  // see docs/tsdb.md for each playbook's vocabulary
  std::string summary;
  std::vector<std::string> hosts;  // hosts the verdict names
  std::vector<std::string> gpus;   // "host:gpu"
  double window_start = 0;
  double window_end = 0;
  std::vector<Finding> findings;  // graded (info | warning | critical), source "metrics:<id>"
  std::vector<EvidenceTable> tables;
  std::vector<QueryRecord> evidence;
  std::vector<Anomaly> anomalies;
  std::vector<std::string> next_steps;
  std::vector<std::string> notes;

  // Adds a finding of this playbook, at `time` (seconds since the epoch) when known. It is
  // untrusted: the analysis marks it trusted once it knows the metrics came from the cluster.
  void add_finding(Severity severity, std::string text, std::vector<std::string> named_hosts,
                   std::optional<double> time);
};

// A per-host (or per-GPU, per-link) verdict from hardware counters only, never from training
// metrics; usable as a drain recommendation.
struct HardwareVerdict {
  std::string host;
  std::string component;  // "gpu 3", "rdma mlx5_2 port 1", "amdgpu driver", "cooling"
  std::string verdict;    // hardware-fault | driver-fault | link-fault | degrading
  std::string action;     // drain | reboot-at-job-boundary | exclude-from-jobs | watch
  std::string reason;
  std::string metric;  // the counter it rests on
  double value = 0;    // its increase within the job window
  std::optional<double> first_seen;
  std::string basis = "hardware-counter";
  // A job's own prometheus/ lives in a user-writable directory: its counters are evidence to show,
  // not to act on alone. Counters from an admin-run cluster Prometheus are trusted.
  bool source_trusted = false;
};

struct RootCauseChain {
  std::optional<Anomaly> root;
  std::vector<Anomaly> effects;
  std::vector<Anomaly> symptoms;
  std::string text;  // "root → effects → symptoms" in one paragraph
};

struct TimelineSeries {
  std::string name;  // host, or "step"
  bool highlight = false;
  std::vector<Point> points;
};

struct Timeline {
  double start = 0, end = 0;
  std::vector<Point> steps;                             // tb_step (max over hosts)
  std::vector<TimelineSeries> power;                    // mean GPU power per host
  std::vector<TimelineSeries> util;                     // mean GPU utilisation per host
  std::vector<TimelineSeries> clock;                    // mean GPU core clock (MHz) per host
  std::vector<TimelineSeries> temperature;              // mean GPU temperature (C) per host
  std::vector<std::pair<int64_t, double>> checkpoints;  // (step, time)
  std::optional<double> failure_time;
  std::optional<double> hang_start;
  std::string power_unit_note;  // e.g. "MI355X: active ~900 W, busy-wait ~300 W"
  std::optional<double> power_active_w, power_idle_level_w;
};

struct TsdbResult {
  bool available = false;  // metrics were read from some source
  bool refused = false;    // the wrong-database guard stopped the diagnosis
  std::string job_dir;
  std::string triage_class;
  std::string analysis_type;  // the class's playbook ids joined by " + ", or "health-check"

  struct Source {
    std::string kind = "none";  // none | job-tsdb | job-tsdb-blocks | live-head | cluster
    std::string url;            // what was queried (a private server's loopback URL included)
    std::string path;           // the TSDB directory, for job sources
    bool wal_included = false;
    bool trusted = false;                // cluster Prometheus only
    std::optional<double> missing_from;  // live fallback: data after this time is not visible
    double startup_seconds = 0;
    uint64_t copied_bytes = 0;
    std::string host_label = "host";
  } source;

  std::vector<std::string> hosts;            // analysed
  std::vector<std::string> hosts_missing;    // job nodes without any series
  std::vector<std::string> hosts_extra;      // series hosts that are not job nodes
  double start = 0, end = 0;                 // the analysed window
  std::optional<double> data_min, data_max;  // what the TSDB covers
  double scrape_interval_s = 0;
  std::map<std::string, int> families;  // metric-name prefix -> number of metric names
  size_t metric_count = 0;

  struct Gpu {
    std::string model;  // "" when unknown
    std::string basis;  // hint | ray-device-name | vram | none
  } gpu;

  struct Guard {
    std::string status = "skipped";  // match | mismatch | unverified | skipped
    std::string reason;
    std::optional<int64_t> log_step, tsdb_step;
    std::optional<double> log_loss, tsdb_loss;
    std::optional<double> tsdb_step_time;
  } guard;

  std::vector<PlaybookResult> playbooks;
  RootCauseChain chain;
  struct Correlation {
    std::string triage_class;
    std::string stance;  // confirms | refines | refutes | inconclusive | none
    std::string text;
  } correlation;
  std::vector<HardwareVerdict> hardware;
  std::vector<std::string> recommendations;
  std::vector<std::string> notes;
  Timeline timeline;
  int queries = 0;
  double elapsed_s = 0;

  // The `tsdb` object of triage.json.
  nlohmann::json to_json() const;

  struct MarkdownOptions {
    std::string svg_name;  // linked when non-empty (a path relative to the report)
    int heading_level = 2;
  };
  // The TSDB section of triage.md.
  std::string render_markdown(const MarkdownOptions& options) const;

  // The hardware verdicts as common NodeVerdicts (one per host; "drain-recommended" when any
  // verdict asks for a drain, else "degraded"), for the drain-recommendation merge.
  std::vector<NodeVerdict> node_verdicts() const;
};

// Runs the discovery, the guard and the playbooks. Missing pieces (no prometheus/ directory, an
// empty or corrupt TSDB, no prometheus binary, an unreachable server) come back as notes with
// `available == false`; only programming errors throw.
TsdbResult run_tsdb_analysis(const TsdbRequest& request);

// The playbook numbers for a class's playbook ids, plus the full-mode ones (5, 6, 7) in full mode
// or when none of the ids applies. Ids the playbook table does not know go to `unknown`.
std::vector<int> playbooks_for(const std::vector<std::string>& class_playbooks, bool full,
                               std::vector<std::string>* unknown = nullptr);

// An SVG timeline (training step, GPU power and utilisation per host, checkpoints, the failure
// moment). `render_svg_timeline` returns the document; `write_svg_timeline` writes it atomically
// into a directory fd (O_NOFOLLOW, temp + rename). Returns false when there is nothing to draw.
std::string render_svg_timeline(const TsdbResult& result);
bool write_svg_timeline(const TsdbResult& result, int dirfd, const std::string& name);

// Fills the request's environment fields from a parsed config with tsdb_config_keys()
// (common/tsdb_config_keys.h).
void apply_tsdb_config(const KvConfig& config, TsdbRequest& request);

}  // namespace triage::tsdb
