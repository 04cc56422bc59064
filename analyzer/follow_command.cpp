// `slurm-triage follow`: the live judgement without the agent. Polls one log as it grows, scans
// each run of newly appended complete lines like the agent does (LiveProgress), and prints every
// early warning and every change of the stall verdict as a JSON line. As root it becomes the log's
// owner first, as analyze does.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analyzer/live_pace.h"
#include "analyzer/live_progress.h"
#include "analyzer/log_scanner.h"
#include "analyzer/owner_privilege.h"
#include "analyzer/stall_verdict.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/error.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage {
namespace {

constexpr int kExitOk = 0;
constexpr int kExitStalled = 1;
constexpr int kExitInput = 3;
constexpr int kExitRules = 5;
// One scan reads at most this much; a longer line without a break is scanned in pieces.
constexpr uint64_t kMaxChunk = uint64_t{64} << 20;

constexpr const char* kHelp = R"(usage: slurm-triage follow [options] LOG

Follows a running job's log as it grows and prints, one JSON object per line, every early warning
(the first line of each failure class), every change of the live stall verdict, and every change
of the pace warning (a lasting slowdown or a straggler; never a stall). The rules are those of the
agent's live hang detection (docs/analyze.md, "Live verdicts").

options:
  --interval S          seconds between polls (default 10)
  --stall-min S         HangStallMin: the least silence that can be a stall (default 600)
  --stall-factor X      HangStallFactor: allowed silence in steady step times (default 10)
  --pause-allowance S   extra silence after an announced checkpoint save or evaluation (default 1800)
  --once                read what is there, print the warnings and the verdict, and exit
  --now EPOCH           with --once: judge as if the time were EPOCH (seconds)
  --rules DIR           extra rules directory (repeatable; after /etc/slurm/triage.d)
  -h, --help            this text

When run as root, slurm-triage becomes the owner of LOG (uid, gid, groups) before opening it.

exit status:
  0  followed (with --once: not stalled)
  1  with --once: the job is stalled
  2  usage error
  3  the log could not be read
  5  the rule catalog has errors
)";

struct Options {
  std::string log;
  double interval = 10;
  LiveStallPolicy policy;
  bool once = false;
  std::vector<std::string> rules_dirs;
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
    } else if (a == "--interval") {
      o.interval = args.positive();
    } else if (a == "--stall-min") {
      o.policy.min_seconds = args.positive();
    } else if (a == "--stall-factor") {
      o.policy.factor = args.positive();
    } else if (a == "--pause-allowance") {
      o.policy.pause_allowance_seconds = args.positive();
    } else if (a == "--once") {
      o.once = true;
    } else if (a == "--now") {
      pin_now_usec(args.epoch_seconds() * 1000000);
      now_given = true;
    } else if (a == "--rules") {
      o.rules_dirs.push_back(args.value());
    } else if (args.is_option()) {
      throw UsageError("unknown option " + a);
    } else if (o.log.empty()) {
      o.log = a;
    } else {
      throw UsageError("follows one log");
    }
  }
  if (o.log.empty()) throw UsageError("give the log to follow");
  if (now_given && !o.once) throw UsageError("--now needs --once (a pinned clock never advances)");
  return o;
}

// The end of the last complete line in [from, to), or `from` when there is none yet; a range as
// long as kMaxChunk without a line break is taken whole (a huge line, scanned in pieces).
uint64_t complete_lines_end(int fd, uint64_t from, uint64_t to) {
  std::vector<char> buf(size_t{64} * 1024);
  for (uint64_t end = to; end > from;) {
    const uint64_t start = std::max(from, end > buf.size() ? end - buf.size() : 0);
    const auto want = static_cast<size_t>(end - start);
    const ssize_t got = ::pread(fd, buf.data(), want, static_cast<off_t>(start));
    if (got < 0) throw_errno("pread log", errno);
    if (static_cast<size_t>(got) < want) return from;  // shrank under us: next poll
    for (size_t i = want; i-- > 0;) {
      if (buf[i] == '\n') return start + i + 1;
    }
    end = start;
  }
  return to - from >= kMaxChunk ? to : from;
}

nlohmann::json verdict_json(const StallVerdict& v, int64_t now) {
  return {{"event", "verdict"},
          {"at", format_utc(now)},
          {"stalled", v.stalled},
          {"judged", v.judged},
          {"threshold_s", v.threshold_s},
          {"silence_s", v.silence_s},
          {"last_step", v.last_step},
          {"last_step_line", v.last_step_line},
          {"last_step_at", v.last_step_usec > 0 ? format_utc(v.last_step_usec) : ""},
          {"basis", v.basis},
          {"guards_applied", v.guards_applied}};
}

nlohmann::json warning_json(const EarlyWarning& w) {
  return {{"event", "warning"},       {"class", w.cls},
          {"line", w.line},           {"text", printable(strip_ansi(w.text))},
          {"truncated", w.truncated}, {"arrived", format_utc(w.arrived_usec)}};
}

// The pace warning as it stands: raised (with its line) or cleared.
nlohmann::json pace_json(const PaceWarning& w, int64_t now) {
  nlohmann::json j = {{"event", "pace"},
                      {"at", format_utc(now)},
                      {"warning", !w.line.empty()},
                      {"line", w.line},
                      {"slowdown", w.slowdown.found}};
  nlohmann::json ranks = nlohmann::json::array();
  for (const Straggler& s : w.stragglers)
    ranks.push_back({{"rank", s.rank ? nlohmann::json(*s.rank) : nlohmann::json(nullptr)},
                     {"node", s.node},
                     {"relative_speed", s.relative_speed},
                     {"since", since_text(s.since_usec, s.since_line)},
                     {"basis", s.basis}});
  j["stragglers"] = std::move(ranks);
  if (w.slowdown.found) {
    j["slowdown_since_step"] = w.slowdown.since_step;
    j["slowdown_since"] = since_text(w.slowdown.since_usec, w.slowdown.since_line);
  }
  return j;
}

void print(const nlohmann::json& j) {
  (void)std::printf("%s\n",
                    j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  (void)std::fflush(stdout);
}

class Follower {
 public:
  Follower(const Options& o, const ScanPlan& plan)
      : o_(o),
        plan_(plan),
        fd_(open_regular_file(o.log, false)),
        progress_(plan.catalog(), dating(o)) {}

  // Reads what was appended since the last poll; prints new warnings and a changed verdict.
  StallVerdict poll() {
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw_errno("stat " + o_.log, errno);
    const auto size = static_cast<uint64_t>(st.st_size);
    if (size < offset_) {
      print({{"event", "truncated"}, {"at", format_utc(now_usec())}, {"size", size}});
      progress_ = LiveProgress(plan_.catalog(), dating(o_));
      offset_ = 0;
      warnings_printed_ = 0;
      pace_generation_ = UINT64_MAX;  // judged again: a warning of the old log clears
    }
    const uint64_t end =
        complete_lines_end(fd_.get(), offset_, std::min(size, offset_ + kMaxChunk));
    const LiveInstant read = clocks(o_);
    if (end > offset_) absorb(end, read);
    last_read_mono_ = read.mono_usec;
    for (; warnings_printed_ < progress_.warnings().size(); ++warnings_printed_)
      print(warning_json(progress_.warnings()[warnings_printed_]));
    const LiveInstant now = clocks(o_);
    StallVerdict v = judge_stall(progress_, now, o_.policy);
    std::string key = v.stalled ? "stalled" : "not stalled";
    for (const auto& g : v.guards_applied)
      key += "," + g;
    if (o_.once || key != last_key_) print(verdict_json(v, now.wall_usec));
    last_key_ = key;
    report_pace(now.wall_usec);
    return v;
  }

 private:
  void absorb(uint64_t end, const LiveInstant& read) {
    if (::lseek(fd_.get(), static_cast<off_t>(offset_), SEEK_SET) < 0)
      throw_errno("seek " + o_.log, errno);
    ScanOptions opt = progress_.next_scan_options();
    opt.max_bytes = end - offset_;
    const ScanResult chunk = scan_log(fd_.get(), plan_, opt);
    progress_.absorb(chunk, read, last_read_mono_);
    offset_ = end;
  }

  // Judged again only when the read added step times or rank samples (a poll of a quiet log costs
  // nothing); printed when the warning appears, changes what it is about, or clears.
  void report_pace(int64_t now) {
    const LivePace& pace = progress_.pace();
    if (pace.generation() == pace_generation_) return;
    pace_generation_ = pace.generation();
    const PaceWarning w = judge_pace(pace.steps(), pace.rhythm());
    if (w.key == pace_key_) return;
    pace_key_ = w.key;
    print(pace_json(w, now));
  }

  // --once reads a log at one moment (perhaps --now, long after it was written): the lines' own
  // timestamps are all it has. Polling dates them by its reads, as the agent does.
  static LineDating dating(const Options& o) {
    return o.once ? LineDating::kByOwnStamps : LineDating::kByReads;
  }
  // --once: one moment, the (perhaps pinned) wall clock on both; polling: the real clocks.
  static LiveInstant clocks(const Options& o) {
    return o.once ? LiveInstant{now_usec(), now_usec()} : live_now();
  }

  const Options& o_;
  const ScanPlan& plan_;
  UniqueFd fd_;
  LiveProgress progress_;
  uint64_t offset_ = 0;
  int64_t last_read_mono_ = 0;  // the previous poll's read (0: none yet)
  size_t warnings_printed_ = 0;
  std::string last_key_;
  uint64_t pace_generation_ = 0;
  std::string pace_key_;  // what the printed pace warning is about ("": none)
};

int follow(const Options& o, const ScanPlan& plan) {
  Follower f(o, plan);
  for (;;) {
    const StallVerdict v = f.poll();
    if (o.once) return v.stalled ? kExitStalled : kExitOk;
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(o.interval);
    ts.tv_nsec = static_cast<long>((o.interval - static_cast<double>(ts.tv_sec)) * 1e9);
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}

int run_follow(int argc, char** argv) {
  const Options o = parse_options(argc, argv);
  std::vector<InputError> rule_errors;
  const SignatureCatalog catalog = SignatureCatalog::load(o.rules_dirs, rule_errors);
  if (!rule_errors.empty()) {
    for (const auto& e : rule_errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    return kExitRules;
  }
  const ScanPlan plan(catalog);
  try {
    if (running_as_root()) {
      // Root never opens a path the user controls: become the log's owner first, for good.
      std::string err;
      const auto owner = path_owner(o.log, &err);
      if (!owner) throw std::runtime_error(err);
      become(*owner);
    }
    return follow(o, plan);
  } catch (const std::exception& e) {
    (void)std::fprintf(stderr, "slurm-triage follow: %s: %s\n", o.log.c_str(), e.what());
    return kExitInput;
  }
}

}  // namespace

TRIAGE_CLI_COMMAND(follow, "follow a running job's log: early warnings and live stall verdicts",
                   run_follow);

}  // namespace triage
