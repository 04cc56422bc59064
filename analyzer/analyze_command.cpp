// `slurm-triage analyze`: locate the job(s), drop to the owner when run as root, analyse, print
// and optionally write the report.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzer/job_analysis.h"
#include "analyzer/job_locator.h"
#include "analyzer/owner_privilege.h"
#include "analyzer/report_render.h"
#include "analyzer/report_writer.h"
#include "analyzer/slowdown_svg.h"
#include "analyzer/tsdb/tsdb.h"
#include "analyzer/tsdb_handoff.h"
#include "common/build_config.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/error.h"
#include "common/rules_file.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage {
namespace {

// Exit codes (documented in --help, docs/analyze.md and the man page).
constexpr int kExitOk = 0;
// 1, the job failed, comes from exit_code_for() (analyzer/diagnosis.h).
constexpr int kExitInput = 3;
constexpr int kExitWrite = 4;
constexpr int kExitRules = 5;

constexpr const char* kHelp = R"(usage: slurm-triage analyze [options] [PATH|JOBID ...]

Explains how a Slurm training job ended: status, primary failure with the log lines that prove it,
what the nodes' kernels saw, training progress and what the failure cost, and what to do next.

PATH may be a log file, a job directory (its 'log' symlink is followed), an outputs/ folder (every
job directory in it; directories without 'log' are skipped), or a Slurm job id (looked up as
outputs/<id>-* under --outputs). One job prints its report; several print a summary table.

options:
  --format md|json      report format on stdout (default md)
  --write               also write triage.md and triage.json (atomically) for each job:
                        into the job directory, else beside the log as triage-<jobid>.md
  --report-path PATH    with --write and one job: write triage.md to PATH (triage.json beside it)
  --outputs DIR         where job ids are looked up (default: ./outputs)
  --evidence FILE|-     node evidence JSON from the slurm-triage agent (see docs/protocol.md)
  --mode basic|full     full also scans rank-*.log and ray_logs/*/worker*.{out,err} and runs the
                        TSDB playbooks on the job's metrics (prometheus/ in the job directory, or
                        --prometheus-url); with --write the timeline goes beside the report as
                        <report>-timeline.svg (default basic)
  --prometheus-url URL  full mode: a cluster Prometheus to query first (scoped to the job's nodes
                        and window: needs --evidence)
  --prometheus PATH     full mode: the prometheus binary that serves the job's own TSDB
                        (default: prometheus in $PATH)
  --config FILE         full mode: read PrometheusURL, PrometheusHostLabel, PrometheusBinary,
                        TsdbScratchDir, TsdbQueryTimeout from FILE (default: the site's
                        triage.conf when it exists); the command line wins
  --slurm-state STATE   the job's Slurm state (RUNNING, COMPLETED, TIMEOUT, ...) for offline use;
                        'none' means do not ask Slurm. Default: the evidence's, else squeue's.
  --now EPOCH           analyse as if the time were EPOCH (seconds): for expected-step and hangs
  --stall-after SECONDS minimum silence before steps count as stopped (default 900)
  --rules DIR           extra rules directory (repeatable; after /etc/slurm/triage.d)
  -q, --quiet           with --write: print nothing but errors (several jobs: no summary)
  -h, --help            this text

When run as root, slurm-triage looks up the owner of each job directory (or log) and becomes that
user (uid, gid, groups) before opening anything in it.

exit status:
  0  analysed; every job completed or is running normally
  1  analysed; at least one job failed, hung, died or was cancelled
  2  usage error
  3  an input could not be read (log, job directory, job id, evidence)
  4  a report could not be written (--write)
  5  the rule catalog has errors (run 'slurm-triage rules check')
)";

struct Options {
  std::string format = "md";
  bool write = false;
  bool quiet = false;
  std::string report_path;
  std::string outputs = "outputs";
  std::string evidence_path;
  std::vector<std::string> rules_dirs;
  std::vector<std::string> paths;
  AnalysisOptions analysis;
  TsdbHandoffOptions tsdb;
  std::string config_path;  // --config; empty: the site's triage.conf when there is one
  bool cli_url = false;
  bool cli_binary = false;
};

Options parse_options(int argc, char** argv) {
  Options o;
  bool now_given = false;
  ArgCursor args(argc, argv);
  while (args.next()) {
    const std::string& a = args.arg();
    if (args.is_help()) {
      (void)std::fputs(kHelp, stdout);
      std::exit(kExitOk);
    } else if (a == "--format") {
      o.format = args.value();
      if (o.format != "md" && o.format != "json") throw UsageError("--format must be md or json");
    } else if (a == "--write") {
      o.write = true;
    } else if (a == "-q" || a == "--quiet") {
      o.quiet = true;
    } else if (a == "--report-path") {
      o.report_path = args.value();
    } else if (a == "--outputs") {
      o.outputs = args.value();
    } else if (a == "--evidence") {
      o.evidence_path = args.value();
    } else if (a == "--mode") {
      o.analysis.mode = args.value();
      if (o.analysis.mode != "basic" && o.analysis.mode != "full")
        throw UsageError("--mode must be basic or full");
    } else if (a == "--prometheus-url") {
      o.tsdb.cluster_url = args.value();
      o.cli_url = true;
      if (o.tsdb.cluster_url.rfind("http://", 0) != 0 &&
          o.tsdb.cluster_url.rfind("https://", 0) != 0)
        throw UsageError("--prometheus-url expects an http:// or https:// URL");
    } else if (a == "--prometheus") {
      o.tsdb.prometheus_binary = args.value();
      o.cli_binary = true;
    } else if (a == "--config") {
      o.config_path = args.value();
    } else if (a == "--slurm-state") {
      o.analysis.slurm_state_option = args.value();
      const auto& s = o.analysis.slurm_state_option;
      const bool ok = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
      });
      if (!ok)
        throw UsageError(
            "--slurm-state expects a Slurm state name such as RUNNING or TIMEOUT, or 'none'");
    } else if (a == "--now") {
      pin_now_usec(args.epoch_seconds() * 1000000);
      now_given = true;
    } else if (a == "--stall-after") {
      o.analysis.stall.min_seconds = args.positive();
    } else if (a == "--rules") {
      o.rules_dirs.push_back(args.value());
    } else if (a == "--") {
      while (args.next())
        o.paths.push_back(args.arg());
    } else if (args.is_option()) {
      throw UsageError("unknown option " + a);
    } else {
      o.paths.push_back(a);
    }
  }
  (void)now_given;
  o.analysis.now_usec = now_usec();
  if (!o.report_path.empty() && !o.write) throw UsageError("--report-path needs --write");
  if (o.quiet && !o.write) throw UsageError("--quiet only makes sense with --write");
  if (!o.rules_dirs.empty()) o.tsdb.rule_layers = default_rule_layers(o.rules_dirs);
  if (o.analysis.mode == "full") {
    // The site's settings for the metrics (a cluster Prometheus, the prometheus binary): an
    // explicit --config must exist; the default file is optional.
    std::string path = o.config_path;
    if (path.empty()) {
      const std::string site = std::string(kSysconfDir) + "/triage.conf";
      if (::access(site.c_str(), R_OK) == 0) path = site;
    }
    if (!path.empty()) {
      for (const InputError& e : apply_site_tsdb_config(path, o.cli_url, o.cli_binary, o.tsdb))
        (void)std::fprintf(stderr, "slurm-triage analyze: %s (TSDB settings ignored)\n", e.what());
    }
  }
  return o;
}

std::optional<Evidence> load_evidence(const std::string& path, int& exit_code) {
  if (path.empty()) return std::nullopt;
  try {
    std::string text;
    bool truncated = false;
    if (path == "-") {
      text = read_fd_limited(STDIN_FILENO, 64u << 20, &truncated);
    } else {
      UniqueFd fd = open_regular_file(path, false);
      text = read_fd_limited(fd.get(), 64u << 20, &truncated);
    }
    if (truncated) throw InputError(path, 0, "evidence is larger than 64 MiB");
    return parse_evidence(text, path == "-" ? "<stdin>" : path);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "slurm-triage analyze: evidence: %s\n", e.what());
    exit_code = kExitInput;
    return std::nullopt;
  }
}

// One job to analyse: how to find it, and whose it is.
struct JobSpec {
  std::string display;
  enum Kind { kPath, kJobId } kind = kPath;
  std::string path;
  uint64_t job_id = 0;
  std::string owner_path;  // stat'ed (never opened) as root to learn the owner
};

JobTarget resolve(const JobSpec& spec, const Options& o) {
  if (spec.kind == JobSpec::kJobId) return resolve_job_id(spec.job_id, o.outputs);
  return resolve_job_path(spec.path);
}

struct JobOutcome {
  std::string display;
  std::string status;
  std::string primary;
  std::string title;
  std::string stage;
  std::string progress;
  std::string first_evidence;
  std::string report;
  std::string error;
  int exit_code = kExitOk;
};

nlohmann::json outcome_json(const JobOutcome& r) {
  return {{"job", r.display},
          {"status", r.status},
          {"primary_failure", r.primary},
          {"title", r.title},
          {"stage", r.stage},
          {"progress", r.progress},
          {"evidence", r.first_evidence},
          {"report", r.report},
          {"error", r.error},
          {"exit", r.exit_code}};
}

JobOutcome outcome_from_json(const std::string& text, const std::string& display) {
  JobOutcome r;
  r.display = display;
  try {
    const auto j = nlohmann::json::parse(text);
    r.status = j.value("status", "");
    r.primary = j.value("primary_failure", "");
    r.title = j.value("title", "");
    r.stage = j.value("stage", "");
    r.progress = j.value("progress", "");
    r.first_evidence = j.value("evidence", "");
    r.report = j.value("report", "");
    r.error = j.value("error", "");
    r.exit_code = j.value("exit", kExitInput);
  } catch (const std::exception& e) {
    r.error = std::string("bad result from the analysis process: ") + e.what();
    r.exit_code = kExitInput;
  }
  return r;
}

// Analyses one job in this process (already running as the right user).
JobOutcome run_job(const JobSpec& spec, const Options& o, const ScanPlan& plan,
                   const Evidence* evidence, bool print_report) {
  JobOutcome out;
  out.display = spec.display;
  JobTarget target = resolve(spec, o);
  if (!target.error.empty() && target.log_path.empty()) {
    out.error = target.error;
    out.exit_code = kExitInput;
    return out;
  }
  // Full mode hands the triage to the TSDB playbooks; basic mode never starts a prometheus.
  AnalysisOptions analysis = o.analysis;
  if (analysis.mode == "full") {
    analysis.tsdb_hook = [&](Triage& tr, int /*job_dir_fd: the playbooks copy by path*/) {
      attach_tsdb_result(
          tr, tsdb::run_tsdb_analysis(tsdb_request_for(tr, plan.catalog(), evidence, o.tsdb)));
    };
  }
  JobReport rep = analyze_job(target, plan, evidence, analysis);
  Triage& t = rep.triage;
  out.status = t.status;
  out.primary = t.primary_failure;
  out.title = t.primary_title;
  out.stage = t.stage;
  if (t.progress.has_steps) {
    out.progress = std::to_string(t.progress.last_step + 1);
    if (t.progress.total_steps) {
      char pct[32];
      (void)std::snprintf(pct, sizeof pct, " (%.0f%%)", t.progress.percent.value_or(0));
      out.progress += "/" + std::to_string(*t.progress.total_steps) + pct;
    }
  }
  if (!t.evidence.empty()) {
    const Finding& f = t.evidence.front();
    out.first_evidence = (f.source == "log" ? "line " + std::to_string(f.line) : f.source) + ": " +
                         std::string(truncate_utf8(printable(strip_ansi(f.text)), 160));
  }
  out.exit_code = rep.input_error ? kExitInput : exit_code_for(t);
  if (rep.input_error && !t.notes.empty()) out.error = t.notes.back();
  std::optional<ReportPlacement> where;
  if (o.write) {
    try {
      where = place_report(target, o.report_path, evidence != nullptr ? evidence->report_path : "");
    } catch (const std::exception& e) {
      (void)std::fprintf(stderr, "slurm-triage analyze: %s: cannot write the report: %s\n",
                         spec.display.c_str(), e.what());
      out.error = std::string("cannot write the report: ") + e.what();
      out.exit_code = std::max(out.exit_code, kExitWrite);
    }
  }
  // The timeline goes first, so that the report never links a picture that is not there.
  if (where && t.tsdb && t.tsdb->available) {
    const std::string svg = tsdb::render_svg_timeline(*t.tsdb);
    if (!svg.empty()) {
      const std::string name = timeline_name_for(where->md_name);
      try {
        write_beside_report(*where, name, svg, report_mode_for(rep.log_mode));
        t.tsdb_timeline_svg = name;
      } catch (const std::exception& e) {
        t.notes.push_back("Could not write the TSDB timeline " + name + ": " + e.what() + ".");
      }
    }
  }
  // Full mode: the job's pace, step time with the slowdown marked and the nodes' GPU clocks.
  if (where && analysis.mode == "full") {
    auto write_picture = [&](const std::string& name, const std::string& svg, std::string& link) {
      if (svg.empty()) return;
      try {
        write_beside_report(*where, name, svg, report_mode_for(rep.log_mode));
        link = name;
      } catch (const std::exception& e) {
        t.notes.push_back("Could not write the picture " + name + ": " + e.what() + ".");
      }
    };
    write_picture(step_time_svg_name(where->md_name),
                  render_step_time_svg(t.step_times, t.slowdown), t.step_time_svg);
    if (t.tsdb && t.tsdb->available) {
      write_picture(clock_strip_svg_name(where->md_name),
                    render_clock_strip_svg(t.tsdb->timeline.clock, t.tsdb->timeline.start,
                                           t.tsdb->timeline.end, t.slowdown),
                    t.clock_strip_svg);
    }
  }
  // The report pass of a --triage-requeue job keeps a copy per attempt (docs/agent.md).
  std::optional<ReportPlacement> attempt_copy;
  if (evidence != nullptr && evidence->requeue) {
    t.requeue = evidence->requeue;
    if (where) {
      attempt_copy = attempt_placement(*where, evidence->requeue->attempt);
      t.attempt_report_path = attempt_copy->md_path();
    }
  }
  if (where) t.report_path = where->md_path();
  const std::string md = render_markdown(t);
  const std::string js = render_json(t);
  if (print_report && !o.quiet)
    (void)std::fputs(o.format == "json" ? js.c_str() : md.c_str(), stdout);
  if (where) {
    try {
      if (attempt_copy) write_report(*attempt_copy, md, js, report_mode_for(rep.log_mode));
      write_report(*where, md, js, report_mode_for(rep.log_mode));
      out.report = where->md_path();
    } catch (const std::exception& e) {
      (void)std::fprintf(stderr, "slurm-triage analyze: %s: cannot write the report: %s\n",
                         spec.display.c_str(), e.what());
      out.error = std::string("cannot write the report: ") + e.what();
      out.exit_code = std::max(out.exit_code, kExitWrite);
    }
  }
  return out;
}

std::optional<Identity> owner_for(const JobSpec& spec, const Evidence* evidence, std::string& err) {
  if (evidence != nullptr && evidence->job.uid) {
    try {
      gid_t gid = evidence->job.gid.value_or(0);
      return identity_for_uid(*evidence->job.uid, evidence->job.gid ? &gid : nullptr);
    } catch (const std::exception& e) {
      err = e.what();
      return std::nullopt;
    }
  }
  return path_owner(spec.owner_path, &err);
}

void progress_bar(size_t done, size_t total, const std::string& name) {
  constexpr size_t kWidth = 30;
  const size_t filled = total == 0 ? kWidth : done * kWidth / total;
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  std::string shown(truncate_utf8(printable(name), 40));
  (void)std::fprintf(stderr, "\r[%s] %zu/%zu %-40s", bar.c_str(), done, total, shown.c_str());
  (void)std::fflush(stderr);
}

void print_summary(const std::vector<JobOutcome>& rows, const Options& o,
                   const std::vector<std::string>& skipped) {
  if (o.format == "json") {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& r : rows)
      arr.push_back(outcome_json(r));
    nlohmann::json j = {{"jobs", arr}, {"skipped", skipped}};
    (void)std::fputs(
        (j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n").c_str(), stdout);
    return;
  }
  size_t wj = 3;
  size_t wp = 15;
  size_t ws = 5;
  for (const auto& r : rows) {
    wj = std::max(wj, std::min<size_t>(r.display.size(), 48));
    wp = std::max(wp, r.primary.size());
    ws = std::max(ws, std::min<size_t>(r.stage.size(), 20));
  }
  (void)std::printf("%-*s  %-9s  %-*s  %-*s  %s\n", static_cast<int>(wj), "JOB", "STATUS",
                    static_cast<int>(wp), "PRIMARY FAILURE", static_cast<int>(ws), "STAGE",
                    "PROGRESS");
  for (const auto& r : rows) {
    (void)std::printf("%-*s  %-9s  %-*s  %-*s  %s\n", static_cast<int>(wj),
                      printable(r.display).c_str(), r.status.empty() ? "error" : r.status.c_str(),
                      static_cast<int>(wp), r.primary.empty() ? "-" : r.primary.c_str(),
                      static_cast<int>(ws),
                      r.stage.empty() ? "-" : printable(truncate_utf8(r.stage, 20)).c_str(),
                      r.progress.empty() ? "-" : r.progress.c_str());
  }
  bool header = false;
  for (const auto& r : rows) {
    if (r.primary.empty() && r.error.empty()) continue;
    if (!header) {
      (void)std::printf("\n");
      header = true;
    }
    (void)std::printf("%s: ", printable(r.display).c_str());
    if (!r.primary.empty()) {
      (void)std::printf("%s (%s)", r.primary.c_str(), r.title.c_str());
      if (!r.first_evidence.empty()) std::printf(", %s", r.first_evidence.c_str());
    } else {
      (void)std::printf("%s", printable(r.error).c_str());
    }
    (void)std::printf("\n");
  }
  if (!skipped.empty()) {
    (void)std::printf("\nskipped (no 'log' entry, e.g. shared checkpoint directories): ");
    for (size_t i = 0; i < skipped.size(); ++i)
      (void)std::printf("%s%s", i > 0 ? ", " : "", printable(skipped[i]).c_str());
    (void)std::printf("\n");
  }
  for (const auto& r : rows) {
    if (!r.report.empty()) {
      (void)std::printf("\nreports written beside each job (triage.md, triage.json)\n");
      break;
    }
  }
}

int run_analyze(int argc, char** argv) {
  Options o = parse_options(argc, argv);
  int worst = kExitOk;

  std::vector<InputError> rule_errors;
  const SignatureCatalog catalog = SignatureCatalog::load(o.rules_dirs, rule_errors);
  if (!rule_errors.empty()) {
    for (const auto& e : rule_errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    (void)std::fprintf(
        stderr, "slurm-triage analyze: the rule catalog has errors (slurm-triage rules check)\n");
    return kExitRules;
  }
  const ScanPlan plan(catalog);

  std::optional<Evidence> evidence = load_evidence(o.evidence_path, worst);
  if (worst != kExitOk) return worst;
  const Evidence* ev = evidence ? &*evidence : nullptr;

  if (o.paths.empty()) {
    if (ev == nullptr || ev->job.stdout_path.empty()) {
      throw UsageError(
          "give a log file, job directory, outputs/ folder or job id (or --evidence with the job's "
          "stdout)");
    }
    o.paths.push_back(ev->job.stdout_path);
  }

  std::vector<JobSpec> jobs;
  std::vector<std::string> skipped;
  bool folder_mode = false;
  for (const auto& p : o.paths) {
    switch (classify_argument(p)) {
      case ArgumentKind::kLogFile:
      case ArgumentKind::kJobDir:
        jobs.push_back(JobSpec{p, JobSpec::kPath, p, 0, p});
        break;
      case ArgumentKind::kJobId:
        jobs.push_back(JobSpec{p, JobSpec::kJobId, "", parse_uint(p).value_or(0), o.outputs});
        break;
      case ArgumentKind::kOutputsFolder: {
        folder_mode = true;
        std::vector<std::string> names;
        std::vector<std::string> skipped_here;
        auto list = [&](std::string& out) {
          const auto found = list_job_dirs(p, &skipped_here);
          nlohmann::json j = {{"jobs", found}, {"skipped", skipped_here}};
          out = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          return 0;
        };
        std::string listing;
        try {
          if (running_as_root()) {
            // Even listing is done as the folder's owner.
            std::string err;
            const auto owner = path_owner(p, &err);
            if (!owner) throw std::runtime_error(err);
            const ChildOutcome c = run_in_child_as(*owner, list);
            if (!c.ok || c.exit_status != 0)
              throw std::runtime_error(c.error.empty() ? "cannot list" : c.error);
            listing = c.output;
          } else {
            list(listing);
          }
          const auto j = nlohmann::json::parse(listing);
          names = j.at("jobs").get<std::vector<std::string>>();
          for (const auto& s : j.at("skipped"))
            skipped.push_back(p + "/" + s.get<std::string>());
        } catch (const std::exception& e) {
          (void)std::fprintf(stderr, "slurm-triage analyze: %s: %s\n", p.c_str(), e.what());
          worst = std::max(worst, kExitInput);
          continue;
        }
        if (names.empty()) {
          (void)std::fprintf(
              stderr, "slurm-triage analyze: %s: no job directories (none has a 'log' entry)\n",
              p.c_str());
          worst = std::max(worst, kExitInput);
        }
        for (const auto& n : names) {
          std::string full = p;
          if (full.back() != '/') full += '/';
          full += n;
          jobs.push_back(JobSpec{n, JobSpec::kPath, full, 0, full});
        }
        break;
      }
      case ArgumentKind::kMissing:
        (void)std::fprintf(
            stderr, "slurm-triage analyze: %s: no such log file, directory or job id\n", p.c_str());
        worst = std::max(worst, kExitInput);
        break;
    }
  }
  const bool single = jobs.size() == 1 && !folder_mode;
  if (!o.report_path.empty() && !single) throw UsageError("--report-path needs exactly one job");

  if (single) {
    const JobSpec& spec = jobs.front();
    if (running_as_root()) {
      std::string err;
      const auto who = owner_for(spec, ev, err);
      if (!who) {
        (void)std::fprintf(stderr, "slurm-triage analyze: %s: cannot tell whose job this is: %s\n",
                           spec.display.c_str(), err.c_str());
        return std::max(worst, kExitInput);
      }
      become(*who);
    }
    const JobOutcome r = run_job(spec, o, plan, ev, true);
    if (!r.error.empty() && r.status.empty())
      (void)std::fprintf(stderr, "slurm-triage analyze: %s\n", r.error.c_str());
    return std::max(worst, r.exit_code);
  }

  std::vector<JobOutcome> rows;
  const bool tty = ::isatty(STDERR_FILENO) == 1 && !o.quiet;
  for (size_t i = 0; i < jobs.size(); ++i) {
    const JobSpec& spec = jobs[i];
    if (tty) progress_bar(i, jobs.size(), spec.display);
    JobOutcome r;
    if (running_as_root()) {
      std::string err;
      const auto who = owner_for(spec, ev, err);
      if (!who) {
        r.display = spec.display;
        r.error = "cannot tell whose job this is: " + err;
        r.exit_code = kExitInput;
      } else {
        const ChildOutcome c = run_in_child_as(*who, [&](std::string& out) {
          out = outcome_json(run_job(spec, o, plan, ev, false))
                    .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
          return 0;
        });
        if (c.ok) {
          r = outcome_from_json(c.output, spec.display);
        } else {
          r.display = spec.display;
          r.error = "analysis failed: " + c.error;
          r.exit_code = kExitInput;
        }
      }
    } else {
      r = run_job(spec, o, plan, ev, false);
    }
    worst = std::max(worst, r.exit_code);
    rows.push_back(std::move(r));
  }
  if (tty) {
    progress_bar(jobs.size(), jobs.size(), "");
    (void)std::fprintf(stderr, "\n");
  }
  // Nothing to summarise (every argument was missing): the errors on stderr are the whole answer.
  if (!o.quiet && !(rows.empty() && skipped.empty())) print_summary(rows, o, skipped);
  return worst;
}

}  // namespace
}  // namespace triage

TRIAGE_CLI_COMMAND(
    analyze, "explain how a job ended: status, primary failure, evidence, progress, next steps",
    triage::run_analyze);
