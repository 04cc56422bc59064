#include "collector/kernel_line_parser.h"

#include <array>
#include <cstdio>
#include <ctime>

#include "common/time_util.h"

namespace triage::collector {

namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

bool starts_with(std::string_view s, std::string_view p) {
  return s.substr(0, p.size()) == p;
}

// "123.456789" (one or more fraction digits) -> microseconds.
bool parse_seconds(std::string_view s, int64_t& usec) {
  size_t i = 0;
  int64_t whole = 0;
  if (s.empty() || !is_digit(s[0])) return false;
  while (i < s.size() && is_digit(s[i])) {
    if (whole > INT64_MAX / 10 / 1000000) return false;
    whole = whole * 10 + (s[i] - '0');
    ++i;
  }
  // The kernel always prints a fraction; "[    777]" is an OOM task table row, not a time.
  int64_t frac = 0;
  if (i >= s.size() || s[i] != '.') return false;
  {
    ++i;
    int64_t scale = 100000;
    size_t digits = 0;
    while (i < s.size() && is_digit(s[i])) {
      if (digits < 6) frac += (s[i] - '0') * scale;
      scale /= 10;
      ++digits;
      ++i;
    }
    if (digits == 0) return false;
  }
  if (i != s.size()) return false;
  usec = whole * 1000000 + frac;
  return true;
}

// "[  123.456789]", optionally with a dmesg -d delta ("[  123.456789 <    0.000123>]").
bool parse_monotonic_bracket(std::string_view s, size_t& consumed, int64_t& usec) {
  if (s.empty() || s[0] != '[') return false;
  const size_t close = s.find(']');
  if (close > 48) return false;  // also when there is none (npos)
  std::string_view inner = s.substr(1, close - 1);
  const size_t lt = inner.find('<');
  if (lt != std::string_view::npos) inner = inner.substr(0, lt);
  while (!inner.empty() && inner.front() == ' ')
    inner.remove_prefix(1);
  while (!inner.empty() && inner.back() == ' ')
    inner.remove_suffix(1);
  if (!parse_seconds(inner, usec)) return false;
  consumed = close + 1;
  return true;
}

// "[Sat Nov 21 12:00:01 2026]"
bool parse_ctime_bracket(std::string_view s, size_t& consumed, int64_t& usec) {
  if (s.size() < 26 || s[0] != '[' || s[4] != ' ') return false;
  const size_t close = s.find(']');
  if (close > 32) return false;
  const auto t = parse_timestamp_usec(s.substr(1, close - 1));
  if (!t) return false;
  usec = *t;
  consumed = close + 1;
  return true;
}

// "2026-11-21T12:00:01,123456+00:00" up to the next space.
bool parse_iso_token(std::string_view s, size_t& consumed, int64_t& usec) {
  if (s.size() < 19 || !is_digit(s[0]) || s[4] != '-' || s[10] != 'T') return false;
  const size_t sp = s.find(' ');
  const std::string_view token = s.substr(0, sp);
  const auto t = parse_timestamp_usec(token);
  if (!t) return false;
  usec = *t;
  consumed = token.size();
  return true;
}

int month_number(std::string_view m) {
  static constexpr std::array<std::string_view, 12> kMonths = {
      "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (size_t i = 0; i < kMonths.size(); ++i) {
    if (kMonths[i] == m) return static_cast<int>(i) + 1;
  }
  return 0;
}

// dmesg -H (--human): "[Nov21 12:00]" on a minute's first line, then "[  +0.000049]" deltas.
// Neither says when the line was printed, so they are only removed.
bool parse_human_bracket(std::string_view s, size_t& consumed) {
  if (s.size() < 4 || s[0] != '[') return false;
  const size_t close = s.find(']');
  if (close > 24) return false;  // also when there is none (npos)
  std::string_view inner = s.substr(1, close - 1);
  while (!inner.empty() && inner.front() == ' ')
    inner.remove_prefix(1);
  int64_t ignored = 0;
  const bool delta =
      !inner.empty() && inner.front() == '+' && parse_seconds(inner.substr(1), ignored);
  // "Nov21 12:00" or "Nov 1 12:00"
  const auto is_clock = [](std::string_view c) {
    return c.size() == 5 && is_digit(c[0]) && is_digit(c[1]) && c[2] == ':' && is_digit(c[3]) &&
           is_digit(c[4]);
  };
  const size_t sp = inner.rfind(' ');
  bool minute = false;
  if (!delta && inner.size() >= 10 && sp != std::string_view::npos &&
      is_clock(inner.substr(sp + 1))) {
    std::string_view day = inner.substr(3, sp - 3);
    while (!day.empty() && day.front() == ' ')
      day.remove_prefix(1);
    minute = month_number(inner.substr(0, 3)) != 0 && !day.empty() && day.size() <= 2 &&
             is_digit(day.front()) && is_digit(day.back());
  }
  if (!delta && !minute) return false;
  consumed = close + 1;
  return true;
}

int year_of(int64_t usec) {
  const auto t = static_cast<time_t>(usec / 1000000);
  struct tm tm {};
  gmtime_r(&t, &tm);
  return tm.tm_year + 1900;
}

// "Nov 21 12:00:01" or "Nov  1 12:00:01.123456" (journalctl short / short-precise, syslog).
bool parse_syslog_time(std::string_view s, int64_t now, size_t& consumed, int64_t& usec) {
  if (s.size() < 15 || s[3] != ' ') return false;
  const int month = month_number(s.substr(0, 3));
  if (month == 0) return false;
  size_t i = 4;
  if (s[i] == ' ') ++i;
  int day = 0;
  while (i < s.size() && is_digit(s[i]) && day < 100)
    day = day * 10 + (s[i++] - '0');
  if (day < 1 || day > 31 || i >= s.size() || s[i] != ' ') return false;
  ++i;
  if (i + 8 > s.size() || s[i + 2] != ':' || s[i + 5] != ':') return false;
  size_t end = i + 8;
  while (end < s.size() && (is_digit(s[end]) || s[end] == '.'))
    ++end;
  const std::string_view clock = s.substr(i, end - i);
  char buf[64];
  for (int year : {year_of(now), year_of(now) - 1}) {
    const int n = std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%.*s", year, month, day,
                                static_cast<int>(clock.size()), clock.data());
    if (n <= 0 || static_cast<size_t>(n) >= sizeof buf) return false;
    const auto t = parse_timestamp_usec(std::string_view(buf, static_cast<size_t>(n)));
    if (!t) return false;
    // Syslog lines carry no year: take the one that does not put the line in the future.
    if (*t <= now + 86400LL * 1000000 || year != year_of(now)) {
      usec = *t;
      consumed = end;
      return true;
    }
  }
  return false;
}

// "kern  :err   : " (dmesg -x): facility and level names, space padded.
bool parse_decode_prefix(std::string_view s, size_t& consumed, int& facility, int& priority) {
  static constexpr std::array<std::string_view, 24> kFacilities = {
      "kern",   "user",   "mail",     "daemon", "auth",   "syslog", "lpr",    "news",
      "uucp",   "cron",   "authpriv", "ftp",    "",       "",       "",       "",
      "local0", "local1", "local2",   "local3", "local4", "local5", "local6", "local7"};
  static constexpr std::array<std::string_view, 8> kLevels = {"emerg", "alert",  "crit", "err",
                                                              "warn",  "notice", "info", "debug"};
  const size_t c1 = s.find(':');
  if (c1 > 10) return false;
  std::string_view fac = s.substr(0, c1);
  while (!fac.empty() && fac.back() == ' ')
    fac.remove_suffix(1);
  const size_t c2 = s.find(':', c1 + 1);
  if (c2 == std::string_view::npos || c2 - c1 > 9 || c2 + 1 >= s.size() || s[c2 + 1] != ' ') {
    return false;
  }
  std::string_view lvl = s.substr(c1 + 1, c2 - c1 - 1);
  while (!lvl.empty() && lvl.back() == ' ')
    lvl.remove_suffix(1);
  int f = -1;
  for (size_t i = 0; i < kFacilities.size(); ++i) {
    if (!kFacilities[i].empty() && kFacilities[i] == fac) f = static_cast<int>(i);
  }
  int p = -1;
  for (size_t i = 0; i < kLevels.size(); ++i) {
    if (kLevels[i] == lvl) p = static_cast<int>(i);
  }
  if (f < 0 || p < 0) return false;
  facility = f;
  priority = p;
  consumed = c2 + 2;
  return true;
}

// "host kernel: " / "kernel: " / "host kernel[123]: "; returns the host (may be empty).
bool parse_kernel_tag(std::string_view s, size_t& consumed, std::string_view& host) {
  auto tag_at = [&](size_t pos, size_t& after) {
    if (!starts_with(s.substr(pos), "kernel")) return false;
    size_t i = pos + 6;
    if (i < s.size() && s[i] == '[') {
      const size_t close = s.find(']', i);
      if (close == std::string_view::npos) return false;
      i = close + 1;
    }
    if (i >= s.size() || s[i] != ':') return false;
    ++i;
    if (i < s.size() && s[i] == ' ') ++i;
    after = i;
    return true;
  };
  size_t after = 0;
  // syslogd's console broadcast indents the tag: " kernel:[405108.698255] watchdog: ..."
  const size_t lead = s.find_first_not_of(' ');
  if (lead <= 2 && tag_at(lead, after)) {
    host = {};
    consumed = after;
    return true;
  }
  const size_t sp = s.find(' ');
  if (sp == std::string_view::npos || sp == 0 || sp > 255) return false;
  size_t tag = sp + 1;
  // Templates that print the severity before the tag: "host INFO kernel: ..." (SONiC's rsyslog).
  static constexpr std::array<std::string_view, 9> kSeverities = {
      "EMERG ", "ALERT ", "CRIT ", "ERR ", "WARNING ", "WARN ", "NOTICE ", "INFO ", "DEBUG "};
  for (const auto sev : kSeverities) {
    if (starts_with(s.substr(tag), sev)) {
      tag += sev.size();
      break;
    }
  }
  if (tag_at(tag, after)) {
    host = s.substr(0, sp);
    consumed = after;
    return true;
  }
  return false;
}

// printk caller ids: "[  T1234] " or "[    C3] ".
bool parse_caller_id(std::string_view s, size_t& consumed) {
  if (s.size() < 4 || s[0] != '[') return false;
  size_t i = 1;
  while (i < s.size() && s[i] == ' ')
    ++i;
  if (i >= s.size() || (s[i] != 'T' && s[i] != 'C')) return false;
  ++i;
  const size_t digits = i;
  while (i < s.size() && is_digit(s[i]))
    ++i;
  if (i == digits || i >= s.size() || s[i] != ']') return false;
  ++i;
  if (i < s.size() && s[i] == ' ') ++i;
  consumed = i;
  return true;
}

size_t skip_one_space(std::string_view s, size_t pos) {
  return pos < s.size() && s[pos] == ' ' ? pos + 1 : pos;
}

}  // namespace

ParsedLine parse_kernel_line(std::string_view line, int64_t now_usec) {
  ParsedLine out;
  if (starts_with(line, "-- ") && line.size() >= 6 && line.substr(line.size() - 3) == " --") {
    const std::string_view inner = line.substr(3, line.size() - 6);
    if (starts_with(inner, "Boot ") && inner.find(' ', 5) == std::string_view::npos) {
      out.kind = LineKind::kBoot;
      out.boot_id = inner.substr(5);
    } else if (inner == "Reboot") {
      out.kind = LineKind::kBoot;
    } else {
      out.kind = LineKind::kAnnotation;
    }
    out.message_offset = line.size();
    return out;
  }

  size_t pos = 0;
  size_t n = 0;
  // dmesg -r: "<6>"
  if (line.size() > 3 && line[0] == '<') {
    size_t i = 1;
    int v = 0;
    while (i < line.size() && is_digit(line[i]) && v < 1024)
      v = v * 10 + (line[i++] - '0');
    if (i > 1 && i < line.size() && line[i] == '>') {
      out.priority = v & 7;
      out.facility = v >> 3;
      pos = i + 1;
    }
  }
  if (parse_decode_prefix(line.substr(pos), n, out.facility, out.priority)) pos += n;

  bool timestamped = false;
  int64_t t = 0;
  const std::string_view rest = line.substr(pos);
  if (parse_monotonic_bracket(rest, n, t)) {
    out.monotonic_usec = t;
    timestamped = true;
  } else if (parse_ctime_bracket(rest, n, t) || parse_iso_token(rest, n, t) ||
             parse_syslog_time(rest, now_usec, n, t)) {
    out.realtime_usec = t;
    timestamped = true;
  }
  if (timestamped || parse_human_bracket(rest, n)) pos = skip_one_space(line, pos + n);

  std::string_view host;
  if (parse_kernel_tag(line.substr(pos), n, host)) {
    // Only a timestamp or nothing may precede a host; a bare message that happens to contain
    // "word kernel:" after its first word must stay intact.
    if (timestamped || host.empty()) {
      out.host = host;
      pos += n;
      // kern.log keeps the kernel's own timestamp after the tag.
      if (parse_monotonic_bracket(line.substr(pos), n, t)) {
        out.monotonic_usec = t;
        pos = skip_one_space(line, pos + n);
      }
    }
  }
  if (parse_caller_id(line.substr(pos), n)) pos += n;
  out.message_offset = pos;
  return out;
}

}  // namespace triage::collector
