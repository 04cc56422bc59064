// `slurm-triage tsdb`: the TSDB playbooks by hand, on a job directory (or a cluster Prometheus).
#include <sys/stat.h>

#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "analyzer/tsdb/tsdb.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/error.h"
#include "common/hostlist.h"
#include "common/privilege.h"
#include "common/rules_file.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::tsdb {

namespace {

constexpr const char* kUsage =
    "usage: slurm-triage tsdb JOB_DIR [options]\n"
    "\n"
    "Runs the TSDB diagnosis playbooks on a job's metrics: a private read-only copy of\n"
    "JOB_DIR/prometheus/ (or the live job's own Prometheus, or a cluster Prometheus).\n"
    "\n"
    "what triage found:\n"
    "  --class CLASS            the log triage's class; its playbooks are the `playbooks`\n"
    "                           of its [signature] in the rules (none: a health check)\n"
    "  --start T, --end T       the job's window (epoch seconds or ISO 8601)\n"
    "  --failure-time T         when it failed (the error line's time)\n"
    "  --last-step N            last completed step in the log (checked against tb_step)\n"
    "  --last-loss X            its loss (checked against tb_learning_loss)\n"
    "  --last-step-time T       when that step completed (a hang starts there)\n"
    "  --first-step N           first completed step of this run\n"
    "  --hosts HOSTLIST         the job's nodes (Slurm hostlist)\n"
    "  --accused HOSTLIST       heartbeat playbook: hosts of the tasks declared dead\n"
    "  --coordinator HOST       heartbeat playbook: task 0's host\n"
    "  --heartbeat-timeout SEC  jax_distributed_heartbeat_timeout_seconds (default 100)\n"
    "  --checkpoint-period N    checkpoint every N steps; --async-checkpointing\n"
    "  --step-time SEC          steady-state step time from the log\n"
    "  --gpu-model NAME         e.g. MI355X, MI300X, H100 (default: from the TSDB)\n"
    "where the metrics are:\n"
    "  --url URL                a cluster Prometheus (needs --hosts, --start, --end)\n"
    "  --host-label NAME        its node label (default host)\n"
    "  --live | --finished      the job's state (default: finished unless a local process\n"
    "                           holds the TSDB lock)\n"
    "  --head HOST:PORT         a live job's own Prometheus (from the log's tunnel line)\n"
    "  --prometheus PATH        prometheus binary (default: prometheus in $PATH)\n"
    "  --scratch DIR            where the private copy goes (default $TMPDIR or /tmp)\n"
    "what to run and print:\n"
    "  --playbook N[,N...]      run these playbooks (1-7) instead of the class's\n"
    "  --basic                  only the class's playbooks (full mode adds 5, 6, 7)\n"
    "  --rules DIR              an extra thresholds layer (see docs/rules-format.md)\n"
    "  --format md|json         output format (default md)\n"
    "  --svg FILE               also write the SVG timeline to FILE\n"
    "  --timeout SEC            per-query timeout (default 60)\n"
    "  --job-id ID              a name for the report and the scratch directory\n"
    "\n"
    "Run as root, it becomes JOB_DIR's owner before reading anything there.\n"
    "Exit status: 0 diagnosed (or nothing to read: see the notes), 1 refused (wrong database),\n"
    "2 usage error.\n";

double parse_time_arg(const std::string& flag, const std::string& v) {
  if (auto d = parse_double(v)) return *d;
  if (auto us = parse_timestamp_usec(v)) return static_cast<double>(*us) / 1e6;
  throw UsageError(flag + ": '" + v + "' is neither epoch seconds nor an ISO 8601 time");
}

int64_t parse_int_arg(const std::string& flag, const std::string& v) {
  if (auto i = parse_int(v)) return *i;
  throw UsageError(flag + ": '" + v + "' is not a whole number");
}

double parse_num_arg(const std::string& flag, const std::string& v) {
  if (v == "nan" || v == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (auto d = parse_double(v)) return *d;
  throw UsageError(flag + ": '" + v + "' is not a number");
}

// Root reads nothing under the job directory as root: it becomes the directory's owner first.
void become_owner(const std::string& job_dir) {
  if (!running_as_root()) return;
  struct stat st {};
  if (::stat(job_dir.c_str(), &st) != 0) throw_errno("stat " + job_dir, errno);
  if (st.st_uid == 0) return;
  gid_t gid = st.st_gid;
  drop_privileges_permanently(identity_for_uid(st.st_uid, &gid));
}

int run(int argc, char** argv) {
  TsdbRequest req;
  std::string format = "md";
  std::string svg_path;
  std::vector<std::string> extra_rules;
  try {
    ArgCursor args(argc, argv);
    while (args.next()) {
      const std::string& a = args.arg();
      if (args.is_help()) {
        (void)std::fputs(kUsage, stdout);
        return 0;
      } else if (a == "--class") {
        req.triage_class = args.value();
      } else if (a == "--start") {
        req.job_start = parse_time_arg(a, args.value());
      } else if (a == "--end") {
        req.job_end = parse_time_arg(a, args.value());
      } else if (a == "--failure-time") {
        req.failure_time = parse_time_arg(a, args.value());
      } else if (a == "--last-step") {
        req.last_step = parse_int_arg(a, args.value());
      } else if (a == "--last-loss") {
        req.last_loss = parse_num_arg(a, args.value());
      } else if (a == "--last-step-time") {
        req.last_step_time = parse_time_arg(a, args.value());
      } else if (a == "--first-step") {
        req.first_step = parse_int_arg(a, args.value());
      } else if (a == "--hosts") {
        req.hosts = expand_hostlist(args.value(), "--hosts");
      } else if (a == "--accused") {
        req.accused_hosts = expand_hostlist(args.value(), "--accused");
      } else if (a == "--coordinator") {
        req.coordinator_host = args.value();
      } else if (a == "--heartbeat-timeout") {
        req.heartbeat_timeout_s = parse_num_arg(a, args.value());
      } else if (a == "--checkpoint-period") {
        req.checkpoint_period = parse_int_arg(a, args.value());
      } else if (a == "--async-checkpointing") {
        req.async_checkpointing = true;
      } else if (a == "--step-time") {
        req.step_time_s = parse_num_arg(a, args.value());
      } else if (a == "--gpu-model") {
        req.gpu_model = args.value();
      } else if (a == "--url") {
        req.cluster_url = args.value();
      } else if (a == "--host-label") {
        req.host_label = args.value();
      } else if (a == "--live") {
        req.liveness = JobLiveness::kLive;
      } else if (a == "--finished") {
        req.liveness = JobLiveness::kFinished;
      } else if (a == "--head") {
        const std::string v = args.value();
        const auto colon = v.rfind(':');
        const auto port = colon == std::string::npos
                              ? std::nullopt
                              : parse_int(std::string_view(v).substr(colon + 1));
        if (!port || *port <= 0 || *port > 65535 || colon == 0)
          throw UsageError("--head: expected HOST:PORT, got '" + v + "'");
        req.head_host = v.substr(0, colon);
        req.head_port = static_cast<uint16_t>(*port);
      } else if (a == "--prometheus") {
        req.prometheus_binary = args.value();
      } else if (a == "--scratch") {
        req.scratch_dir = args.value();
      } else if (a == "--playbook") {
        const std::string list = args.value();  // split() returns views into it
        for (auto part : split(list, ',')) {
          const auto n = parse_int(trim(part));
          if (!n || *n < 1 || *n > 7) throw UsageError("--playbook: playbooks are numbered 1 to 7");
          req.playbooks.push_back(static_cast<int>(*n));
        }
      } else if (a == "--basic") {
        req.full = false;
      } else if (a == "--rules") {
        extra_rules.push_back(args.value());
      } else if (a == "--format") {
        format = args.value();
        if (format != "md" && format != "json") throw UsageError("--format: md or json");
      } else if (a == "--svg") {
        svg_path = args.value();
      } else if (a == "--timeout") {
        req.query_timeout_s = parse_num_arg(a, args.value());
      } else if (a == "--job-id") {
        req.job_id = args.value();
      } else if (args.is_option()) {
        throw UsageError("unknown option " + a);
      } else if (req.job_dir.empty()) {
        req.job_dir = a;
      } else {
        throw UsageError("one job directory only (got '" + req.job_dir + "' and '" + a + "')");
      }
    }
    if (req.job_dir.empty() && req.cluster_url.empty())
      throw UsageError("a job directory (or --url) is required");
  } catch (const InputError& e) {
    (void)std::fprintf(stderr, "slurm-triage tsdb: %s\n", e.what());
    return 2;
  }
  if (!extra_rules.empty()) req.rule_layers = default_rule_layers(extra_rules);

  try {
    if (!req.job_dir.empty()) become_owner(req.job_dir);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "slurm-triage tsdb: cannot become the owner of %s: %s\n",
                       req.job_dir.c_str(), e.what());
    return 1;
  }
  const TsdbResult res = run_tsdb_analysis(req);
  std::string svg_name;
  if (!svg_path.empty()) {
    try {
      const auto [dir, base] = split_dir_base(svg_path);
      UniqueFd d = open_dir(dir, false);
      if (write_svg_timeline(res, d.get(), base)) {
        svg_name = svg_path;
      } else {
        (void)std::fprintf(stderr, "slurm-triage tsdb: nothing to draw; %s not written\n",
                           svg_path.c_str());
      }
    } catch (const std::exception& e) {
      (void)std::fprintf(stderr, "slurm-triage tsdb: cannot write %s: %s\n", svg_path.c_str(),
                         e.what());
    }
  }
  if (format == "json") {
    std::cout << res.to_json().dump(2) << "\n";
  } else {
    std::cout << res.render_markdown({svg_name, 2});
  }
  return res.refused ? 1 : 0;
}

}  // namespace

}  // namespace triage::tsdb

TRIAGE_CLI_COMMAND(tsdb, "diagnose a job from its metrics (Prometheus TSDB playbooks)",
                   triage::tsdb::run);
