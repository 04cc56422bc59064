#include "analyzer/line_text.h"

#include <algorithm>
#include <climits>
#include <ctime>
#include <string>

#include "common/time_util.h"

namespace triage {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// Task labels peeled off one line: nesting deeper than this is a message that starts with numbers.
constexpr int kMaxTaskLabels = 4;

// Where a timestamp may start inside a line: after one of these, never inside a word or a number.
bool separates(char c) {
  return c == ' ' || c == '\t' || c == '[' || c == '(' || c == '|' || c == ':' || c == ',';
}

// Digits at s[pos, pos + n) as a number, or -1.
int digits_at(std::string_view s, size_t pos, size_t n) {
  if (pos + n > s.size()) return -1;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (!is_digit(c)) return -1;
    v = v * 10 + (c - '0');
  }
  return v;
}

// A timestamp printed without a zone is the local time of the machine that printed it; this
// machine is on the same cluster, so its zone is the best guess.
// The zone offset is looked up once per hour of log time: logs print the same hour many times.
int64_t naive_local_to_utc(int64_t naive_as_utc_usec) {
  thread_local int64_t cached_hour = INT64_MIN;
  thread_local int64_t cached_offset_usec = 0;
  const int64_t hour = naive_as_utc_usec / 3600000000;
  if (hour != cached_hour) {
    const auto secs = static_cast<time_t>(naive_as_utc_usec / 1000000);
    struct tm tm {};
    if (localtime_r(&secs, &tm) == nullptr) return naive_as_utc_usec;
    cached_hour = hour;
    cached_offset_usec = static_cast<int64_t>(tm.tm_gmtoff) * 1000000;
  }
  return naive_as_utc_usec - cached_offset_usec;
}

// "2026-11-21 12:00:01,123", "2026-11-21T12:00:01.5Z", "2026-11-21T12:00:01+02:00".
std::optional<LineTimestamp> iso_at(std::string_view s) {
  if (s.size() < 19 || digits_at(s, 0, 4) < 0 || s[4] != '-' || digits_at(s, 5, 2) < 0 ||
      s[7] != '-' || digits_at(s, 8, 2) < 0 || (s[10] != 'T' && s[10] != ' ') ||
      digits_at(s, 11, 2) < 0 || s[13] != ':' || digits_at(s, 14, 2) < 0 || s[16] != ':' ||
      digits_at(s, 17, 2) < 0) {
    return std::nullopt;
  }
  size_t p = 19;
  if (p < s.size() && (s[p] == '.' || s[p] == ',')) {
    size_t q = p + 1;
    while (q < s.size() && is_digit(s[q]))
      ++q;
    if (q > p + 1) p = q;
  }
  bool zoned = false;
  if (p < s.size() && s[p] == 'Z') {
    zoned = true;
    ++p;
  } else if (p + 5 <= s.size() && (s[p] == '+' || s[p] == '-') && digits_at(s, p + 1, 2) >= 0) {
    if (p + 6 <= s.size() && s[p + 3] == ':' && digits_at(s, p + 4, 2) >= 0) {
      zoned = true;
      p += 6;
    } else if (digits_at(s, p + 3, 2) >= 0) {
      zoned = true;
      p += 5;
    }
  }
  const auto v = parse_timestamp_usec(s.substr(0, p));
  if (!v) return std::nullopt;
  return LineTimestamp{zoned ? *v : naive_local_to_utc(*v), zoned};
}

// absl/glog: "I1121 12:00:01.123456" (severity letter, month, day, time).
std::optional<LineTimestamp> glog_at(std::string_view s, int year) {
  if (s.size() < 14 || (s[0] != 'I' && s[0] != 'W' && s[0] != 'E' && s[0] != 'F'))
    return std::nullopt;
  const int mo = digits_at(s, 1, 2);
  const int d = digits_at(s, 3, 2);
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || s[5] != ' ') return std::nullopt;
  if (digits_at(s, 6, 2) < 0 || s[8] != ':' || digits_at(s, 9, 2) < 0 || s[11] != ':' ||
      digits_at(s, 12, 2) < 0) {
    return std::nullopt;
  }
  size_t p = 14;
  std::string frac;
  if (p < s.size() && s[p] == '.') {
    size_t q = p + 1;
    while (q < s.size() && is_digit(s[q]))
      ++q;
    if (q > p + 1) frac = std::string(s.substr(p, q - p));
  }
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%s%s", year, mo, d,
                      std::string(s.substr(6, 8)).c_str(), frac.c_str());
  const auto v = parse_timestamp_usec(buf);
  if (!v) return std::nullopt;
  return LineTimestamp{naive_local_to_utc(*v), false};
}

// Open MPI's and PRRTE's output tag, as mpirun --tag-output and --timestamp-output write it
// (orte/mca/iof/base/iof_base_output.c, prrte src/mca/iof/base/iof_base_output.c):
// "[jobid,rank]<stdout>:", after ctime's "Mon Jul  2 19:35:38 2018" when timestamped, or the
// timestamp alone before "<stderr>:". Returns the tag's length (0: none) and the rank in `rank`.
size_t mpirun_tag(std::string_view t, int64_t* rank) {
  size_t i = 0;
  // ctime(3): "Www Mmm dd hh:mm:ss yyyy", the day padded with a space.
  if (t.size() > 24 && t[3] == ' ' && t[7] == ' ' && t[10] == ' ' && t[13] == ':' && t[16] == ':' &&
      t[19] == ' ' && (t[24] == '[' || t[24] == '<') && digits_at(t, 20, 4) >= 0 &&
      digits_at(t, 14, 2) >= 0)
    i = 24;
  size_t j = i;
  int64_t vpid = -1;
  if (j < t.size() && t[j] == '[') {
    size_t k = j + 1;
    while (k < t.size() && k - j <= 10 && is_digit(t[k]))
      ++k;
    if (k == j + 1 || k >= t.size() || t[k] != ',') return 0;
    size_t m = ++k;
    int64_t v = 0;
    while (m < t.size() && m - k < 9 && is_digit(t[m]))
      v = v * 10 + (t[m++] - '0');
    if (m == k || m >= t.size() || t[m] != ']') return 0;
    vpid = v;
    j = m + 1;
  } else if (i == 0) {
    return 0;
  }
  for (const std::string_view suffix : {"<stdout>:", "<stderr>:", "<stddiag>:"}) {
    if (t.substr(j, suffix.size()) == suffix) {
      if (vpid >= 0) *rank = vpid;
      return j + suffix.size();
    }
  }
  return 0;
}

// Ray's driver prints each line a worker, task or actor wrote behind its origin
// (python/ray/_private/worker.py, print_worker_logs, Ray 2.x): "(pid=4711) ", "(Trainer pid=4711) "
// for an actor or task, with ", ip=10.0.0.7" when the worker runs on another node. Returns the
// prefix's length with the space after it (0: none). Only the shape with "pid=" counts: the
// raylet's and the autoscaler's own "(raylet) " lines carry no worker output.
size_t ray_worker_prefix(std::string_view t) {
  constexpr size_t kMaxPrefix = 200;  // an actor's name, its pid and its node's address
  if (t.size() < 8 || t.front() != '(') return 0;
  const size_t close = t.substr(0, kMaxPrefix).find(") ");
  if (close == std::string_view::npos) return 0;
  const std::string_view inside = t.substr(1, close - 1);
  size_t pid = inside.rfind("pid=");
  if (pid == std::string_view::npos || (pid > 0 && inside[pid - 1] != ' ') ||
      inside.substr(0, pid).find_first_of("()") != std::string_view::npos)
    return 0;
  size_t d = pid + 4;
  const size_t digits = d;
  while (d < inside.size() && is_digit(inside[d]))
    ++d;
  if (d == digits) return 0;
  const std::string_view rest = inside.substr(d);
  if (!rest.empty() &&
      (rest.substr(0, 5) != ", ip=" || rest.find(' ', 5) != std::string_view::npos))
    return 0;
  return close + 2;
}

}  // namespace

LineText split_line(std::string_view raw) {
  LineText lt;
  if (!raw.empty() && raw.back() == '\r') raw.remove_suffix(1);
  lt.raw = raw;
  std::string_view t = raw;
  // srun -l: optional padding spaces, the task id, ": ". A step launched by a labelled srun that
  // itself prints through `srun -l` (or a wrapper that labels again) carries several.
  for (int label = 0; label < kMaxTaskLabels; ++label) {
    size_t i = 0;
    while (i < t.size() && i < 8 && t[i] == ' ')
      ++i;
    size_t j = i;
    while (j < t.size() && j - i < 7 && is_digit(t[j]))
      ++j;
    if (j == i || j + 1 >= t.size() || t[j] != ':' || t[j + 1] != ' ') break;
    int64_t v = 0;
    for (size_t k = i; k < j; ++k)
      v = v * 10 + (t[k] - '0');
    if (lt.rank < 0) lt.rank = v;
    t.remove_prefix(j + 2);
  }
  // mpirun's output tag (the rank is the tag's own when no srun label came first).
  if (!t.empty() && (t[0] == '[' || t.size() > 24)) {
    int64_t v = -1;
    if (const size_t n = mpirun_tag(t, &v); n > 0) {
      if (lt.rank < 0) lt.rank = v;
      t.remove_prefix(n);
    }
  }
  // A Ray worker's line as the driver relays it (the worker may be a torch rank, so this comes
  // first).
  t.remove_prefix(ray_worker_prefix(t));
  // PyTorch: "[rank3]:" before a C++ log line ("[rank3]:[E1121 ..."), "[rank3]: " before a line
  // Python printed, so that a traceback keeps its own indentation after the one space: its frames
  // ("[rank3]:   File ...") stay indented and its exception line ("[rank3]: RuntimeError: ...")
  // opens the text.
  if (t.size() > 7 && t.substr(0, 5) == "[rank") {
    size_t k = 5;
    int64_t v = 0;
    while (k < t.size() && k < 12 && is_digit(t[k]))
      v = v * 10 + (t[k++] - '0');
    if (k > 5 && k + 1 < t.size() && t[k] == ']' && t[k + 1] == ':') {
      if (lt.rank < 0) lt.rank = v;
      t.remove_prefix(k + 2);
      if (!t.empty() && t.front() == ' ') t.remove_prefix(1);
    }
  }
  lt.text = t;
  return lt;
}

std::optional<int64_t> leading_timestamp_usec(std::string_view text, int year_hint) {
  const auto t = leading_timestamp(text, year_hint);
  if (!t) return std::nullopt;
  return t->usec;
}

std::optional<LineTimestamp> leading_timestamp(std::string_view text, int year_hint) {
  size_t i = 0;
  while (i < text.size() && i < 4 && (text[i] == ' ' || text[i] == '[' || text[i] == '\t'))
    ++i;
  const std::string_view s = text.substr(i, 48);
  if (s.empty()) return std::nullopt;
  if (is_digit(s[0])) return iso_at(s);
  if (year_hint == 0) year_hint = utc_year(now_usec());
  return glog_at(s, year_hint);
}

std::optional<LineTimestamp> timestamp_before(std::string_view text, size_t end, int year_hint) {
  constexpr size_t kPrefixBytes = 160;
  end = std::min({end, text.size(), kPrefixBytes});
  if (auto t = leading_timestamp(text.substr(0, end), year_hint)) return t;
  for (size_t p = 1; p < end; ++p) {
    const char c = text[p];
    if (!separates(text[p - 1]) || !(is_digit(c) || c == 'I' || c == 'W' || c == 'E' || c == 'F'))
      continue;
    if (auto t = leading_timestamp(text.substr(p, end - p), year_hint)) return t;
  }
  return std::nullopt;
}

int utc_year(int64_t usec) {
  const auto secs = static_cast<time_t>(usec / 1000000);
  struct tm tm {};
  gmtime_r(&secs, &tm);
  return tm.tm_year + 1900;
}

}  // namespace triage
