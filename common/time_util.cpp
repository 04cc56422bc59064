#include "common/time_util.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

#include "common/text.h"

namespace triage {

namespace {
std::atomic<int64_t> g_pinned{INT64_MIN};

int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
  // Howard Hinnant's algorithm: proleptic Gregorian date -> days since 1970-01-01.
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const auto yoe = static_cast<unsigned>(y - era * 400);
  const unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + static_cast<int64_t>(doe) - 719468;
}

bool digits(std::string_view s, size_t pos, size_t n, int& out) {
  if (pos + n > s.size()) return false;
  int v = 0;
  for (size_t i = 0; i < n; ++i) {
    const char c = s[pos + i];
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  out = v;
  return true;
}

int month_index(std::string_view m) {
  static const char* names[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  for (int i = 0; i < 12; ++i) {
    if (m == names[i]) return i + 1;
  }
  return 0;
}

std::optional<int64_t> make_usec(int y, int mo, int d, int h, int mi, int s, int64_t frac_usec,
                                 int64_t offset_sec) {
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60) return std::nullopt;
  const int64_t days = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d));
  const int64_t secs = days * 86400 + int64_t{h} * 3600 + int64_t{mi} * 60 + s - offset_sec;
  return secs * 1000000 + frac_usec;
}

}  // namespace

int64_t now_usec() {
  const int64_t p = g_pinned.load(std::memory_order_relaxed);
  if (p != INT64_MIN) return p;
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void pin_now_usec(std::optional<int64_t> usec) {
  g_pinned.store(usec.value_or(INT64_MIN));
}

int64_t monotonic_usec() {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::string format_utc(int64_t usec, bool micros) {
  const int64_t secs = usec >= 0 ? usec / 1000000 : (usec - 999999) / 1000000;
  const auto t = static_cast<time_t>(secs);
  struct tm tm {};
  gmtime_r(&t, &tm);
  char buf[64];
  if (micros) {
    (void)std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06lldZ", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                        static_cast<long long>(usec - secs * 1000000));
  } else {
    (void)std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900,
                        tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
  }
  return buf;
}

std::optional<int64_t> parse_timestamp_usec(std::string_view s) {
  s = trim(s);
  int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
  // ISO-ish: YYYY-MM-DD[T ]HH:MM:SS[.,frac][Z|±HH:MM|±HHMM]
  if (digits(s, 0, 4, y) && s.size() >= 19 && s[4] == '-' && digits(s, 5, 2, mo) && s[7] == '-' &&
      digits(s, 8, 2, d) && (s[10] == 'T' || s[10] == ' ') && digits(s, 11, 2, h) && s[13] == ':' &&
      digits(s, 14, 2, mi) && s[16] == ':' && digits(s, 17, 2, sec)) {
    size_t p = 19;
    int64_t frac = 0;
    if (p < s.size() && (s[p] == '.' || s[p] == ',')) {
      ++p;
      int64_t scale = 100000;
      size_t nd = 0;
      while (p < s.size() && s[p] >= '0' && s[p] <= '9') {
        if (nd < 6) frac += (s[p] - '0') * scale, scale /= 10;
        ++nd;
        ++p;
      }
      if (nd == 0) return std::nullopt;
    }
    int64_t offset = 0;
    if (p < s.size()) {
      if (s[p] == 'Z') {
        ++p;
      } else if (s[p] == '+' || s[p] == '-') {
        const int sign = s[p] == '-' ? -1 : 1;
        int oh = 0, om = 0;
        if (!digits(s, p + 1, 2, oh)) return std::nullopt;
        size_t q = p + 3;
        if (q < s.size() && s[q] == ':') ++q;
        if (!digits(s, q, 2, om)) return std::nullopt;
        offset = int64_t{sign} * (oh * 3600 + om * 60);
        p = q + 2;
      }
    }
    if (p != s.size()) return std::nullopt;
    return make_usec(y, mo, d, h, mi, sec, frac, offset);
  }
  // dmesg -T: "Sat Nov 21 12:00:01 2026"
  if (s.size() >= 24 && s[3] == ' ' && s[7] == ' ') {
    mo = month_index(s.substr(4, 3));
    size_t p = 8;
    if (s[p] == ' ') ++p;  // day padded with a space
    size_t dl = (p < s.size() && p + 1 < s.size() && s[p + 1] >= '0' && s[p + 1] <= '9') ? 2 : 1;
    if (mo == 0 || !digits(s, p, dl, d)) return std::nullopt;
    p += dl;
    if (p >= s.size() || s[p] != ' ') return std::nullopt;
    ++p;
    if (!digits(s, p, 2, h) || s[p + 2] != ':' || !digits(s, p + 3, 2, mi) || s[p + 5] != ':' ||
        !digits(s, p + 6, 2, sec)) {
      return std::nullopt;
    }
    p += 8;
    if (p >= s.size() || s[p] != ' ' || !digits(s, p + 1, 4, y) || p + 5 != s.size())
      return std::nullopt;
    return make_usec(y, mo, d, h, mi, sec, 0, 0);
  }
  return std::nullopt;
}

}  // namespace triage
