// slurm-triage kernel: classify a node's kernel log by hand.
//
//   dmesg | slurm-triage kernel -
//   journalctl -k -b -1 | slurm-triage kernel - --format md
//   slurm-triage kernel --journal /var/log/journal --kmsg /dev/kmsg
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "collector/health/node_health.h"
#include "collector/kernel_pipeline.h"
#include "collector/kernel_report.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/rules_file.h"
#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::collector {

namespace {

constexpr const char* kUsage =
    "usage: slurm-triage kernel [FILE|-] [options]\n"
    "\n"
    "Classifies kernel log text (dmesg, dmesg -T, journalctl -k, kern.log) into kernel events:\n"
    "OOM kills, GPU RAS/CPER/ACA errors, NVIDIA Xids, GPU resets and faults, hung tasks, machine\n"
    "checks, PCIe AER, NFS/Lustre trouble, link failures; and judges the node from them\n"
    "(healthy, degraded or drain-recommended, with the agent's default thresholds).\n"
    "\n"
    "options:\n"
    "  --format json|md     output format (default md on a terminal, json otherwise)\n"
    "  --rules DIR          an extra rule layer (repeatable), after the shipped and /etc ones\n"
    "  --host NAME          the node the log came from (default: as printed, or this host for\n"
    "                       --journal/--kmsg)\n"
    "  --journal DIR|FILE   read kernel records from a journal directory or file (repeatable)\n"
    "  --kmsg PATH          read kmsg records (/dev/kmsg, or a file of saved records)\n"
    "  -h, --help           this text\n"
    "\n"
    "Exit status: 0 when classified, 2 on bad usage, unreadable input or broken rules.\n";

struct Options {
  std::string format;
  std::vector<std::string> rule_dirs;
  std::string host;
  std::vector<std::string> text_inputs;
  std::vector<std::string> journal_dirs;
  std::vector<std::string> journal_files;
  std::string kmsg;
};

// Input files may be regular files or pipes (`<(dmesg)`); never devices or directories, which
// could block or make no sense.
UniqueFd open_input(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!fd) throw_errno("open " + path, errno);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat " + path, errno);
  if (!S_ISREG(st.st_mode) && !S_ISFIFO(st.st_mode)) {
    throw std::runtime_error(path + ": not a regular file or a pipe");
  }
  // Back to blocking reads; O_NONBLOCK only kept open() from waiting on a FIFO writer.
  const int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  return fd;
}

std::string local_hostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "";
  return buf;
}

// Everything the source has now (live sources) or until its end (files).
void drain(KernelSource& source, KernelClassifier& classifier, std::vector<KernelEvent>& events) {
  std::vector<KernelRecord> batch;
  while (true) {
    batch.clear();
    const bool more = source.read(batch, 0);
    for (const auto& r : batch)
      classifier.feed(r, events);
    if (!more || batch.empty()) break;
  }
  classifier.flush(events);
}

// The node's verdict as the agent would give it with its default thresholds (HealthPolicy's
// defaults are triage.conf's). The health window ends at the log's last event rather than now, so
// that a log from last week is judged as it was then.
NodeVerdict judge(const std::vector<KernelEvent>& events, const std::string& host) {
  int64_t end = 0;
  for (const auto& e : events)
    end = std::max({end, e.time_usec, e.last_usec});
  HealthInputs in;
  in.host = host;
  in.now_usec = end > 0 ? end : now_usec();
  in.events = &events;
  return evaluate_node_health(in, HealthPolicy{});
}

// Reads the command line into `o`; false when it asked for --help (printed).
bool parse_args(int argc, char** argv, Options& o) {
  ArgCursor args(argc, argv);
  while (args.next()) {
    const std::string& a = args.arg();
    if (args.is_help()) {
      (void)std::fputs(kUsage, stdout);
      return false;
    }
    if (a == "--format") {
      o.format = args.value();
    } else if (a == "--rules") {
      o.rule_dirs.push_back(args.value());
    } else if (a == "--host") {
      o.host = args.value();
    } else if (a == "--kmsg") {
      o.kmsg = args.value();
    } else if (a == "--journal") {
      std::string v = args.value();
      struct stat st {};
      const bool dir = ::stat(v.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      (dir ? o.journal_dirs : o.journal_files).push_back(std::move(v));
    } else if (args.is_option()) {
      throw UsageError("unknown option " + a);
    } else {
      o.text_inputs.push_back(a);
    }
  }
  if (o.text_inputs.empty() && o.journal_dirs.empty() && o.journal_files.empty() && o.kmsg.empty())
    throw UsageError("nothing to read: give FILE, - (stdin), --journal or --kmsg");
  if (o.format.empty()) o.format = ::isatty(STDOUT_FILENO) ? "md" : "json";
  if (o.format != "json" && o.format != "md") throw UsageError("--format must be json or md");
  return true;
}

int run_kernel(int argc, char** argv) {
  Options o;
  if (!parse_args(argc, argv, o)) return 0;

  const KernelRulesLoad load = load_kernel_rules(default_rule_layers(o.rule_dirs));
  if (!load.rules) {
    for (const auto& e : load.errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    (void)std::fprintf(stderr, "slurm-triage kernel: the kernel rules have errors\n");
    return 2;
  }
  const bool live = !o.journal_dirs.empty() || !o.journal_files.empty() || !o.kmsg.empty();
  KernelReportInfo info;
  info.host = !o.host.empty() ? o.host : (live ? local_hostname() : "");
  KernelClassifier classifier(load.rules, info.host);
  std::vector<KernelEvent> events;
  try {
    auto read = [&](std::unique_ptr<KernelSource> src) {
      info.sources.push_back(src->describe());
      drain(*src, classifier, events);
    };
    for (const auto& path : o.text_inputs) {
      UniqueFd fd;
      if (path != "-") fd = open_input(path);
      read(open_text_source(path == "-" ? STDIN_FILENO : fd.get(), path == "-" ? "stdin" : path));
    }
    for (const auto& dir : o.journal_dirs) {
      JournalOptions jo;
      jo.directory = dir;
      read(open_journal_source(jo));
    }
    if (!o.journal_files.empty()) {
      JournalOptions jo;
      jo.files = o.journal_files;
      read(open_journal_source(jo));
    }
    if (!o.kmsg.empty()) {
      KmsgOptions ko;
      ko.path = o.kmsg;
      read(open_kmsg_source(ko));
    }
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "slurm-triage kernel: %s\n", e.what());
    return 2;
  }
  info.stats = classifier.stats();
  sort_events(events);
  if (info.host.empty()) {
    for (const auto& e : events) {
      if (!e.host.empty()) {
        info.host = e.host;
        break;
      }
    }
  }
  info.verdict = judge(events, info.host);
  if (o.format == "json") {
    std::printf("%s\n", kernel_report_json(events, info)
                            .dump(2, ' ', false, nlohmann::json::error_handler_t::replace)
                            .c_str());
  } else {
    (void)std::fputs(kernel_report_markdown(events, info).c_str(), stdout);
  }
  return 0;
}

}  // namespace

TRIAGE_CLI_COMMAND(kernel, "classify kernel log text (dmesg, journalctl -k) into node events",
                   run_kernel);

}  // namespace triage::collector
