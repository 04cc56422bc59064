#include "analyzer/log_facts.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>

#include "common/text.h"
#include "common/time_util.h"

namespace triage {

namespace {

constexpr size_t kMaxKeptText = 1024;
constexpr size_t kMaxHosts = 8192;
// Bounds that keep memory flat on hostile logs (at most a few MiB of facts whatever the input).
constexpr size_t kMaxSrunFacts = 512;
constexpr size_t kMaxRanksPerFact = 1024;
constexpr size_t kMaxAccused = 4096;
constexpr size_t kMaxSelfReports = 65536;
constexpr size_t kMaxTracebacks = 64;
constexpr size_t kMaxOpenTracebacks = 64;
constexpr size_t kMaxEarlierSegments = 8;
// Ranks x process groups whose watchdog numbers are kept: thousands of ranks in a few groups.
constexpr size_t kMaxCollectiveFacts = 16384;
constexpr int64_t kSummaryWindow = 40;
constexpr int64_t kHeartbeatWindow = 12;
constexpr int64_t kTracebackWindow = 400;
// Ranks print the same step at slightly different moments; only a drop larger than this is a
// restart of training within the same log.
constexpr int64_t kRestartDrop = 2;

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

std::optional<int64_t> leading_int(std::string_view s, size_t* used = nullptr) {
  size_t i = 0;
  bool neg = false;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) {
    neg = s[i] == '-';
    ++i;
  }
  const size_t start = i;
  int64_t v = 0;
  while (i < s.size() && is_digit(s[i]) && i - start < 18)
    v = v * 10 + (s[i++] - '0');
  if (i == start) return std::nullopt;
  if (used != nullptr) *used = i;
  return neg ? -v : v;
}

std::string_view skip_spaces(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  return s;
}

std::string bounded(std::string_view s) {
  return std::string(truncate_utf8(s, kMaxKeptText));
}

// "0-3,5" -> {0,1,2,3,5}, at most kMaxRanksPerFact values.
std::vector<int64_t> expand_ranks(std::string_view list) {
  std::vector<int64_t> out;
  for (const auto part : split(list, ',')) {
    const auto p = trim(part);
    const size_t dash = p.find('-');
    const auto a = parse_int(p.substr(0, dash));
    if (!a || *a < 0) return {};
    int64_t b = *a;
    if (dash != std::string_view::npos) {
      const auto bb = parse_int(p.substr(dash + 1));
      if (!bb || *bb < *a) return {};
      b = *bb;
    }
    for (int64_t r = *a; r <= b && out.size() < kMaxRanksPerFact; ++r)
      out.push_back(r);
  }
  return out;
}

std::optional<bool> truthy(std::string_view v) {
  const std::string l = to_lower(trim(v));
  if (l == "true" || l == "1" || l == "yes") return true;
  if (l == "false" || l == "0" || l == "no") return false;
  return std::nullopt;
}

// The run settings a log can state both in PASSTHROUGH_ARGS and on "Config param" lines; both
// spellings mean the same. False when `key` is none of them.
bool apply_run_setting(RunConfigFacts& c, std::string_view key, std::string_view value) {
  if (key == "checkpoint_period") {
    if (const auto v = parse_int(value); v && *v > 0) c.checkpoint_period = *v;
  } else if (key == "enable_checkpointing") {
    if (const auto b = truthy(value)) c.enable_checkpointing = *b;
  } else if (key == "async_checkpointing") {
    if (const auto b = truthy(value)) c.async_checkpointing = *b;
  } else if (key == "jax_distributed_heartbeat_timeout_seconds") {
    if (const auto v = parse_double(value); v && *v > 0) c.heartbeat_timeout_s = *v;
  } else {
    return false;
  }
  return true;
}

// The step time a step line states after its step number ("seconds: 9.512"), or -1. Parsed only
// for a step seen first: every rank prints each step, so most step lines repeat one.
double step_seconds(std::string_view after_step) {
  const size_t sp = after_step.find("seconds:");
  if (sp == std::string_view::npos) return -1;
  std::string_view v = skip_spaces(after_step.substr(sp + 8));
  size_t n = 0;
  while (n < v.size() && n < 32 &&
         (is_digit(v[n]) || v[n] == '.' || v[n] == 'e' || v[n] == '-' || v[n] == '+'))
    ++n;
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + n, d);
  return ec == std::errc() && end == v.data() + n && d >= 0 && d < 1e9 ? d : -1;
}

}  // namespace

const std::vector<FactTrigger>& fact_triggers() {
  static const std::vector<FactTrigger> t = [] {
    std::vector<FactTrigger> v = {
        {std::string(kStepMarker), FactKind::kStep},
        {"job summary", FactKind::kSummary},
        {"passthrough_args", FactKind::kPassthrough},
        {"config param ", FactKind::kConfigParam},
        {"node_exit", FactKind::kNodeExit},
        {"[prometheus] started on port", FactKind::kPrometheusPort},
        {"stopped sending heartbeats", FactKind::kHeartbeat},
        {"polled error from coordination service", FactKind::kPolledError},
        {"terminating process because the jax distributed service", FactKind::kTerminating},
        {"traceback (most recent call last)", FactKind::kTraceback},
        {"srun: error: ", FactKind::kSrunError},
        {"no existing checkpoints found", FactKind::kFreshStart},
        {"restoring from this run's directory step", FactKind::kRestore},
        // Pauses: announced before the pause where the framework says so (HF Trainer, Megatron,
        // DeepSpeed, generic loops); MaxText only says so after a synchronous save.
        {"saving checkpoint", FactKind::kCheckpointSave},
        {"saving model checkpoint", FactKind::kCheckpointSave},
        {"is about to be saved", FactKind::kCheckpointSave},
        {"saved a checkpoint", FactKind::kCheckpointSave},
        {"running evaluation", FactKind::kEvaluation},
        {"running validation", FactKind::kEvaluation},
        {"starting validation", FactKind::kEvaluation},
        {"evaluating iter", FactKind::kEvaluation},
        {"completed eval step", FactKind::kEvaluation},
        {"***** evaluating ", FactKind::kEvaluation},
        // PyTorch's NCCL watchdog, every 2.x wording (collective_progress.h): "last enqueued NCCL
        // work: E" (and "Last ..."), 2.7+ "last enqueued work: E", and the timeout line that
        // alone carries the sequence number in 2.0-2.2.
        {"nqueued nccl work: ", FactKind::kCollective},
        {"last enqueued work: ", FactKind::kCollective},
        {"watchdog caught collective operation timeout", FactKind::kCollective},
        // Each rank's own pace (rank_rhythm.h): a straggler report's scores, Megatron's per-rank
        // timers.
        {"gpu relative performance:", FactKind::kRhythmBlock},
        {"times across ranks (ms):", FactKind::kRhythmBlock},
    };
    // "ssh -L <port>:..." or "ssh -L localhost:...": spelled out so that every trigger literal is
    // at least 8 bytes long (the literal search samples every min_length - 3 bytes).
    for (const char* tail : {"1", "2", "3", "4", "5", "6", "7", "8", "9", "l"}) {
      v.push_back({std::string("ssh -l ") + tail, FactKind::kSshTunnel});
    }
    return v;
  }();
  return t;
}

std::map<std::string, std::string> parse_key_values(std::string_view text) {
  std::map<std::string, std::string> out;
  std::string token;
  auto flush = [&] {
    const size_t eq = token.find('=');
    if (eq != std::string::npos && eq > 0) {
      std::string key = token.substr(0, eq);
      std::string value = token.substr(eq + 1);
      while (!key.empty() && (key.front() == '-'))
        key.erase(0, 1);
      if (!key.empty() && out.size() < 512) out[key] = value;
    }
    token.clear();
  };
  for (const char c : text) {
    if (c == ' ' || c == '\t' || c == ',' || c == ';') {
      flush();
    } else if (c != '"' && c != '\'' && c != '[' && c != ']') {
      token += c;
    }
    if (token.size() > 4096) token.clear();
  }
  flush();
  return out;
}

FactCollector::FactCollector(int year_hint)
    : year_hint_(year_hint != 0 ? year_hint : utc_year(now_usec())) {}

void FactCollector::on_line(const LineText& lt, int64_t line_no, uint32_t kinds) {
  auto has = [kinds](FactKind k) { return (kinds & (1u << static_cast<unsigned>(k))) != 0; };
  // Windows first: a line can both continue an open window and trigger a new one.
  if (summary_lines_left_ > 0) {
    --summary_lines_left_;
    on_summary_window_line(lt, line_no);
  }
  if (heartbeat_lines_left_ > 0) {
    --heartbeat_lines_left_;
    on_heartbeat_text(lt.text);
  }
  if (!open_tracebacks_.empty() && !has(FactKind::kTraceback))
    on_traceback_window_line(lt, line_no);
  if (rank_rhythm_ && rhythm_.lines_wanted() > 0) rhythm_.on_block_line(lt, line_no);
  if (kinds == 0) return;

  if (has(FactKind::kStep)) on_step(lt, line_no);
  if (has(FactKind::kSummary) && lt.text.find("JOB SUMMARY") != std::string_view::npos) {
    facts_.summary = JobSummaryFacts{};
    facts_.summary.found = true;
    facts_.summary.line = line_no;
    summary_lines_left_ = kSummaryWindow;
    on_summary_window_line(lt, line_no);
  }
  if (has(FactKind::kPassthrough)) on_passthrough(lt, line_no);
  if (has(FactKind::kConfigParam)) on_config_param(lt);
  if (has(FactKind::kNodeExit)) on_node_exit(lt, line_no);
  if (has(FactKind::kSshTunnel)) on_ssh_tunnel(lt, line_no);
  if (has(FactKind::kPrometheusPort)) on_prometheus_port(lt, line_no);
  if (has(FactKind::kHeartbeat)) {
    if (facts_.heartbeat.line == 0) facts_.heartbeat.line = line_no;
    on_heartbeat_text(lt.text);
    heartbeat_lines_left_ = kHeartbeatWindow;
  }
  if ((has(FactKind::kPolledError) || has(FactKind::kTerminating)) && lt.rank >= 0) {
    auto it = facts_.self_reported_death.find(lt.rank);
    if (it == facts_.self_reported_death.end()) {
      if (facts_.self_reported_death.size() < kMaxSelfReports)
        facts_.self_reported_death.emplace(lt.rank, line_no);
    }
  }
  if (has(FactKind::kTraceback)) {
    // A new traceback of a rank replaces that rank's open one (chained exceptions).
    open_tracebacks_.erase(
        std::remove_if(open_tracebacks_.begin(), open_tracebacks_.end(),
                       [&](const OpenTraceback& o) { return o.rank == lt.rank; }),
        open_tracebacks_.end());
    if (open_tracebacks_.size() < kMaxOpenTracebacks) {
      OpenTraceback o;
      o.rank = lt.rank;
      o.start_line = line_no;
      o.lines_left = kTracebackWindow;
      o.fact_index = SIZE_MAX;
      if (facts_.tracebacks.size() < kMaxTracebacks) {
        o.fact_index = facts_.tracebacks.size();
        facts_.tracebacks.push_back(TracebackFact{line_no, lt.rank, 0, {}});
      }
      open_tracebacks_.push_back(o);
    }
  }
  if (has(FactKind::kSrunError)) on_srun_error(lt, line_no);
  if (has(FactKind::kFreshStart)) on_restore(lt, line_no, true);
  if (has(FactKind::kRestore)) on_restore(lt, line_no, false);
  if (has(FactKind::kCheckpointSave)) on_pause(facts_.checkpoint_save, lt, line_no);
  if (has(FactKind::kEvaluation)) on_pause(facts_.evaluation, lt, line_no);
  if (has(FactKind::kCollective)) on_collective(lt, line_no);
  if (rank_rhythm_ && has(FactKind::kRhythmBlock)) rhythm_.on_block_start(lt, line_no);
}

void FactCollector::on_collective(const LineText& lt, int64_t line_no) {
  auto p = parse_collective_line(lt);
  if (!p) return;
  p->line = line_no;
  auto key = std::make_pair(p->pg, p->rank);
  auto it = collective_index_.find(key);
  if (it == collective_index_.end()) {
    if (facts_.collectives.size() >= kMaxCollectiveFacts) return;
    collective_index_.emplace(std::move(key), facts_.collectives.size());
    facts_.collectives.push_back(std::move(*p));
    return;
  }
  // A line states some of the numbers; the others keep what earlier lines said.
  CollectiveProgress& c = facts_.collectives[it->second];
  if (p->last_enqueued != kSeqUnknown) c.last_enqueued = p->last_enqueued;
  if (p->last_completed != kSeqUnknown) c.last_completed = p->last_completed;
  if (p->timed_out != kSeqUnknown) c.timed_out = p->timed_out;
  if (p->dump_from_rank >= 0) c.dump_from_rank = p->dump_from_rank;
  c.line = line_no;
}

void FactCollector::continue_steps(const StepSegment& seg) {
  facts_.steps = seg;
}

void FactCollector::on_pause(PauseAnnouncement& pause, const LineText& lt, int64_t line_no) {
  pause.line = line_no;
  pause.time_usec = leading_timestamp_usec(lt.text, year_hint_).value_or(0);
  ++pause.count;
  pause.text = bounded(lt.raw);
}

int64_t FactCollector::lines_wanted() const {
  int64_t w = std::max({summary_lines_left_, heartbeat_lines_left_, rhythm_.lines_wanted()});
  for (const auto& o : open_tracebacks_)
    w = std::max(w, o.lines_left);
  return w;
}

size_t FactCollector::take_block_lines(const char* data, size_t size, int64_t first_line,
                                       int64_t* lines) {
  *lines = 0;
  if (!rank_rhythm_ || summary_lines_left_ > 0 || heartbeat_lines_left_ > 0 ||
      !open_tracebacks_.empty())
    return 0;
  return rhythm_.take_block_lines(data, size, first_line, lines);
}

int64_t FactCollector::open_traceback(int64_t rank) const {
  for (const auto& o : open_tracebacks_) {
    if (o.rank == rank) return o.start_line;
  }
  return 0;
}

std::optional<LineTimestamp> step_line_timestamp(std::string_view text, int year_hint) {
  return timestamp_before(text, text.find(kStepMarker), year_hint);
}

void FactCollector::on_step(const LineText& lt, int64_t line_no) {
  const size_t at = lt.text.find(kStepMarker);
  if (at == std::string_view::npos) return;
  std::string_view rest = skip_spaces(lt.text.substr(at + kStepMarker.size()));
  size_t used = 0;
  const auto step = leading_int(rest, &used);
  if (!step || *step < 0) return;
  rest.remove_prefix(used);
  // The per-rank reader's unit comes after the step number.
  const auto past_step = static_cast<size_t>(rest.data() - lt.text.data());
  StepSegment& seg = facts_.steps;
  if (seg.first_step >= 0 && *step < seg.last_step - kRestartDrop) {
    // Training started over in the same log (a requeue or an in-job restart).
    finish_segment(seg);
    facts_.earlier.push_back(seg);
    if (facts_.earlier.size() > kMaxEarlierSegments) facts_.earlier.erase(facts_.earlier.begin());
    ++facts_.restarts;
    seg = StepSegment{};
  }
  if (seg.first_step >= 0 && *step <= seg.last_step) {
    // The same step printed by another rank, or a lagging rank: only its own pace is new.
    if (rank_rhythm_) rhythm_.on_step_line(lt, *step, line_no, past_step);
    return;
  }
  if (seg.first_step < 0) {
    facts_.step_times.clear();
    facts_.step_times_stride = 1;
    seg.first_step = *step;
    seg.last_step = *step;
    seg.first_line = line_no;
    seg.last_line = line_no;
    const auto stamp = step_line_timestamp(lt.text, year_hint_);
    seg.first_time_usec = stamp ? stamp->usec : 0;
    seg.last_time_usec = seg.first_time_usec;
    seg.distinct_steps = 1;
    seg.first_seconds = step_seconds(rest);
    seg.last_text = bounded(lt.raw);
    if (rank_rhythm_) {
      record_step_time(lt, *step, seg.first_seconds, line_no);
      rhythm_.on_step_line(lt, *step, line_no, past_step);
    }
    return;
  }
  const double seconds = step_seconds(rest);
  if (rank_rhythm_) {
    record_step_time(lt, *step, seconds, line_no);
    rhythm_.on_step_line(lt, *step, line_no, past_step);
  }
  seg.last_step = *step;
  seg.last_line = line_no;
  // Only the last step's time matters: it is read from last_text when the segment is finished.
  seg.last_time_usec = -1;
  seg.last_text = bounded(lt.raw);
  ++seg.distinct_steps;
  if (seconds >= 0) {
    if (*step >= seg.first_step + kWarmUpSteps) {
      seg.steady_seconds_sum += seconds;
      ++seg.steady_count;
    } else {
      seg.warm_seconds_sum += seconds;
      ++seg.warm_count;
    }
  }
}

void FactCollector::finish_segment(StepSegment& seg) const {
  if (seg.last_time_usec < 0) {
    const auto stamp = step_line_timestamp(split_line(seg.last_text).text, year_hint_);
    seg.last_time_usec = stamp ? stamp->usec : 0;
  }
}

void FactCollector::record_step_time(const LineText& lt, int64_t step, double seconds,
                                     int64_t line_no) {
  auto& v = facts_.step_times;
  const int64_t first = facts_.steps.first_step;
  if ((step - first) % facts_.step_times_stride != 0) return;
  const auto stamp = step_line_timestamp(lt.text, year_hint_);
  StepPace st{step, seconds, stamp ? stamp->usec : 0, line_no};
  if (stamp) rhythm_.saw_time(stamp->usec);
  if (st.seconds < 0 && st.time_usec > 0 && !v.empty() && v.back().time_usec > 0 &&
      step > v.back().step && st.time_usec >= v.back().time_usec) {
    st.seconds = static_cast<double>(st.time_usec - v.back().time_usec) / 1e6 /
                 static_cast<double>(step - v.back().step);
  }
  v.push_back(st);
  if (v.size() >= kMaxStepTimes) {
    // Keep every other one: the stride doubles and the series still spans the whole segment.
    facts_.step_times_stride *= 2;
    size_t out = 0;
    for (const StepPace& s : v) {
      if ((s.step - first) % facts_.step_times_stride == 0) v[out++] = s;
    }
    v.resize(out);
  }
}

LogFacts FactCollector::take() {
  finish_segment(facts_.steps);
  facts_.rhythm = rhythm_.take();
  return std::move(facts_);
}

void FactCollector::on_summary_window_line(const LineText& lt, int64_t line_no) {
  const std::string_view t = lt.text;
  const size_t st = t.find("Status:");
  if (st != std::string_view::npos) {
    std::string_view rest = skip_spaces(t.substr(st + 7));
    size_t n = 0;
    while (n < rest.size() && ((rest[n] >= 'A' && rest[n] <= 'Z') || rest[n] == '_'))
      ++n;
    if (n > 0) {
      facts_.summary.status_word = std::string(rest.substr(0, n));
      facts_.summary.status_line = line_no;
      facts_.summary.status_text = bounded(lt.raw);
    }
    const size_t ex = rest.find("exit");
    if (ex != std::string_view::npos) {
      std::string_view v = rest.substr(ex + 4);
      while (!v.empty() &&
             (v.front() == ' ' || v.front() == '=' || v.front() == ':' || v.front() == 'c' ||
              v.front() == 'o' || v.front() == 'd' || v.front() == 'e')) {
        v.remove_prefix(1);
      }
      if (const auto code = leading_int(v)) facts_.summary.exit_code = static_cast<int>(*code);
    }
    return;
  }
  for (const std::string_view key :
       {std::string_view("Finished:"), std::string_view("End time:"), std::string_view("Ended:")}) {
    const size_t at = t.find(key);
    if (at != std::string_view::npos) {
      if (const auto when = leading_timestamp_usec(t.substr(at + key.size()), year_hint_)) {
        facts_.summary.finished_usec = *when;
      }
    }
  }
  for (const std::string_view key :
       {std::string_view("Exit code:"), std::string_view("Exit status:")}) {
    const size_t at = t.find(key);
    if (at != std::string_view::npos) {
      if (const auto code = leading_int(skip_spaces(t.substr(at + key.size())))) {
        facts_.summary.exit_code = static_cast<int>(*code);
      }
    }
  }
}

void FactCollector::on_passthrough(const LineText& lt, int64_t line_no) {
  const size_t at = lt.text.find("PASSTHROUGH_ARGS");
  if (at == std::string_view::npos) return;
  std::string_view rest = lt.text.substr(at + 16);
  while (!rest.empty() && (rest.front() == '=' || rest.front() == ':' || rest.front() == ' '))
    rest.remove_prefix(1);
  auto& c = facts_.config;
  c.passthrough = bounded(rest);
  c.passthrough_line = line_no;
  const auto kv = parse_key_values(rest);
  if (auto it = kv.find("steps"); it != kv.end()) {
    if (const auto v = parse_int(it->second); v && *v > 0) {
      c.total_steps = *v;
      c.total_steps_source = "PASSTHROUGH_ARGS";
    }
  }
  for (const auto& [key, value] : kv)
    apply_run_setting(c, key, value);
}

void FactCollector::on_config_param(const LineText& lt) {
  const size_t at = lt.text.find("Config param ");
  if (at == std::string_view::npos) return;
  const std::string_view rest = lt.text.substr(at + 13);
  const size_t colon = rest.find(':');
  if (colon == std::string_view::npos) return;
  const std::string_view key = trim(rest.substr(0, colon));
  const std::string_view value = trim(rest.substr(colon + 1));
  auto& c = facts_.config;
  if (apply_run_setting(c, key, value)) return;
  if (key == "steps" && !c.total_steps) {
    if (const auto v = parse_int(value); v && *v > 0) {
      c.total_steps = *v;
      c.total_steps_source = "Config param steps";
    }
  }
}

void FactCollector::on_node_exit(const LineText& lt, int64_t line_no) {
  const size_t at = lt.text.find("NODE_EXIT");
  if (at == std::string_view::npos) return;
  const auto kv = parse_key_values(lt.text.substr(at + 9));
  const auto host = kv.find("host");
  const auto ex = kv.find("exit");
  if (host == kv.end() || ex == kv.end() || host->second.empty()) return;
  const auto code = parse_int(ex->second);
  if (!code) return;
  NodeExitFact f{bounded(host->second), static_cast<int>(*code), line_no};
  for (auto& existing : facts_.node_exits) {
    if (existing.host == f.host) {
      existing = std::move(f);
      return;
    }
  }
  if (facts_.node_exits.size() < kMaxHosts) facts_.node_exits.push_back(std::move(f));
}

void FactCollector::on_ssh_tunnel(const LineText& lt, int64_t line_no) {
  if (!facts_.tunnel.command.empty()) return;  // the first one, printed when training starts
  const size_t at = lt.text.find("ssh -L");
  if (at == std::string_view::npos) return;
  std::string_view cmd = trim(lt.text.substr(at));
  while (!cmd.empty() && (cmd.back() == '\'' || cmd.back() == '"' || cmd.back() == '`'))
    cmd.remove_suffix(1);
  auto& tu = facts_.tunnel;
  tu.command = bounded(cmd);
  tu.line = line_no;
  std::vector<std::string_view> words;
  for (const auto w : split(cmd, ' ')) {
    if (!trim(w).empty()) words.push_back(trim(w));
  }
  std::string spec_host;
  std::string destination;
  for (size_t i = 1; i < words.size(); ++i) {
    const std::string_view w = words[i];
    if (w == "-L" && i + 1 < words.size()) {
      const auto parts = split(words[++i], ':');
      // [bind:]lport:host:rport
      if (parts.size() >= 3) {
        const auto rport = parse_int(parts.back());
        const std::string_view host = parts[parts.size() - 2];
        if (rport && *rport > 0 && *rport < 65536)
          tu.forwarded_ports.push_back(static_cast<int>(*rport));
        if (spec_host.empty() && host != "localhost" && host != "127.0.0.1")
          spec_host = std::string(host);
      }
    } else if (w.size() == 2 && w[0] == '-' &&
               std::string_view("JpiloFEbcDemOQRSw").find(w[1]) != std::string_view::npos) {
      ++i;  // an option with an argument
    } else if (!w.empty() && w[0] != '-') {
      destination = std::string(w);
      break;
    }
  }
  if (const size_t atsign = destination.find('@'); atsign != std::string::npos)
    destination.erase(0, atsign + 1);
  tu.head_host = !spec_host.empty() ? spec_host : destination;
  if (!tu.prometheus_port) {
    for (const int p : tu.forwarded_ports) {
      if (p != 8265 && p != 6006) {
        tu.prometheus_port = p;
        tu.prometheus_port_source = "tunnel";
        break;
      }
    }
  }
}

void FactCollector::on_prometheus_port(const LineText& lt, int64_t line_no) {
  const size_t at = lt.text.find("Started on port");
  if (at == std::string_view::npos) return;
  const auto port = leading_int(skip_spaces(lt.text.substr(at + 15)));
  if (!port || *port <= 0 || *port >= 65536) return;
  facts_.tunnel.prometheus_port = static_cast<int>(*port);
  facts_.tunnel.prometheus_port_source = "prometheus-log";
  facts_.tunnel.prometheus_line = line_no;
}

void FactCollector::on_heartbeat_text(std::string_view text) {
  auto& acc = facts_.heartbeat.accused;  // kept sorted
  size_t pos = 0;
  while (acc.size() < kMaxAccused && (pos = text.find("task:", pos)) != std::string_view::npos) {
    pos += 5;
    if (const auto id = leading_int(text.substr(pos)); id && *id >= 0) {
      const auto it = std::lower_bound(acc.begin(), acc.end(), *id);
      if (it == acc.end() || *it != *id) acc.insert(it, *id);
    }
  }
}

void FactCollector::on_srun_error(const LineText& lt, int64_t line_no) {
  const size_t at = lt.text.find("srun: error: ");
  if (at == std::string_view::npos || facts_.srun_tasks.size() >= kMaxSrunFacts) return;
  const std::string_view rest = lt.text.substr(at + 13);
  const size_t c1 = rest.find(": task");
  if (c1 == std::string_view::npos || c1 == 0 ||
      rest.substr(0, c1).find(' ') != std::string_view::npos)
    return;
  std::string_view tail = rest.substr(c1 + 6);
  if (!tail.empty() && tail.front() == 's') tail.remove_prefix(1);
  tail = skip_spaces(tail);
  const size_t c2 = tail.find(':');
  if (c2 == std::string_view::npos) return;
  SrunTaskFact f;
  f.host = bounded(rest.substr(0, c1));
  f.tasks = bounded(trim(tail.substr(0, c2)));
  f.ranks = expand_ranks(f.tasks);
  f.outcome = bounded(trim(tail.substr(c2 + 1)));
  f.line = line_no;
  facts_.srun_tasks.push_back(std::move(f));
}

void FactCollector::on_traceback_window_line(const LineText& lt, int64_t line_no) {
  for (auto it = open_tracebacks_.begin(); it != open_tracebacks_.end();) {
    --it->lines_left;
    bool close = it->lines_left <= 0;
    if (!close && it->rank == lt.rank) {
      const std::string_view t = lt.text;
      const bool continuation = t.empty() || t.front() == ' ' || t.front() == '\t' ||
                                t.substr(0, 9) == "Traceback" || t.substr(0, 3) == "^^^" ||
                                t.front() == '~';
      if (continuation && it->fact_index != SIZE_MAX) {
        // '  File "train.py", line 3, in <module>': the latest frame is the innermost.
        const std::string_view frame = skip_spaces(t);
        constexpr std::string_view kFile = "File \"";
        if (frame.substr(0, kFile.size()) == kFile) {
          const std::string_view path = frame.substr(kFile.size());
          const size_t end = path.find('"');
          if (end != std::string_view::npos && end > 0)
            facts_.tracebacks[it->fact_index].raised_in = bounded(path.substr(0, end));
        }
      }
      if (!continuation) {
        if (it->fact_index != SIZE_MAX) {
          auto& f = facts_.tracebacks[it->fact_index];
          f.exception_line = line_no;
          f.exception_text = bounded(lt.raw);
        }
        close = true;
      }
    }
    it = close ? open_tracebacks_.erase(it) : it + 1;
  }
}

void FactCollector::on_restore(const LineText& lt, int64_t line_no, bool fresh) {
  auto& r = facts_.restore;
  if (fresh) {
    if (lt.text.find("No existing checkpoints found") == std::string_view::npos) return;
    if (!r.restored_step) {
      r.fresh = true;
      r.line = line_no;
      r.source = "log";
    }
    return;
  }
  const std::string_view key = "restoring from this run's directory step";
  const size_t at = lt.text.find(key);
  if (at == std::string_view::npos) return;
  if (const auto step = leading_int(skip_spaces(lt.text.substr(at + key.size())))) {
    r.restored_step = *step;
    r.fresh = false;
    r.line = line_no;
    r.source = "log";
  }
}

void FactCollector::on_header_line(std::string_view text) {
  size_t pos = 0;
  while ((pos = text.find("RAY=", pos)) != std::string_view::npos) {
    const bool word_start = pos == 0 || !((text[pos - 1] >= 'A' && text[pos - 1] <= 'Z') ||
                                          text[pos - 1] == '_' || is_digit(text[pos - 1]));
    const std::string_view v = text.substr(pos + 4, 4);
    if (word_start && (v.substr(0, 1) == "1" || to_lower(v) == "true")) facts_.ray_enabled = true;
    pos += 4;
  }
}

}  // namespace triage
