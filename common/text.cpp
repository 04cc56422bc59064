#include "common/text.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace triage {

std::string_view trim(std::string_view s) {
  const char* ws = " \t\r\n\v\f";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  const size_t e = s.find_last_not_of(ws);
  return s.substr(b, e - b + 1);
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::optional<int64_t> parse_int(std::string_view s) {
  if (s.empty()) return std::nullopt;
  int64_t v = 0;
  const char* first = s.data();
  if (*first == '+') ++first;
  const auto [p, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> parse_uint(std::string_view s) {
  if (s.empty() || s.front() == '-') return std::nullopt;
  uint64_t v = 0;
  const char* first = s.data();
  if (*first == '+') ++first;
  const auto [p, ec] = std::from_chars(first, s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

std::optional<double> parse_double(std::string_view s) {
  if (s.empty() || s.size() > 64) return std::nullopt;
  // std::from_chars for double is available in libstdc++ 11+, but strtod is locale-safe enough for
  // the "C" locale our programs run in and handles every form the logs print.
  std::string tmp(s);
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(tmp.c_str(), &end);
  if (end != tmp.c_str() + tmp.size() || errno == ERANGE || !std::isfinite(v)) return std::nullopt;
  return v;
}

namespace {

// Length of the valid UTF-8 sequence starting at s[i], or 0 when it is invalid.
size_t utf8_seq_len(std::string_view s, size_t i) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return 1;
  size_t n = 0;
  uint32_t cp = 0;
  if ((b0 & 0xE0) == 0xC0) {
    n = 2;
    cp = b0 & 0x1Fu;
  } else if ((b0 & 0xF0) == 0xE0) {
    n = 3;
    cp = b0 & 0x0Fu;
  } else if ((b0 & 0xF8) == 0xF0) {
    n = 4;
    cp = b0 & 0x07u;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3Fu);
  }
  if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000)) return 0;
  if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

void append_hex_escape(std::string& out, unsigned char c) {
  static const char* hex = "0123456789abcdef";
  out += "\\x";
  out += hex[c >> 4];
  out += hex[c & 0xF];
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_seq_len(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_seq_len(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
      continue;
    }
    const auto c = static_cast<unsigned char>(s[i]);
    if (n == 1 && ((c < 0x20 && c != '\t') || c == 0x7F)) {
      append_hex_escape(out, c);
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  return out;
}

namespace {

// The characters besides C0 that can move, break or reorder a line when it is shown.
bool acts_on_display(uint32_t cp) {
  return (cp >= 0x80 && cp <= 0x9F) ||                  // C1 controls (NEL, CSI, OSC, ...)
         cp == 0x2028 || cp == 0x2029 ||                // line and paragraph separators
         (cp >= 0x202A && cp <= 0x202E) ||              // bidi embeddings and overrides
         (cp >= 0x2066 && cp <= 0x2069) ||              // bidi isolates
         cp == 0x200E || cp == 0x200F || cp == 0x061C;  // bidi marks
}

uint32_t code_point(std::string_view seq) {
  const auto b0 = static_cast<unsigned char>(seq[0]);
  if (seq.size() == 1) return b0;
  uint32_t cp = seq.size() == 2 ? (b0 & 0x1Fu) : seq.size() == 3 ? (b0 & 0x0Fu) : (b0 & 0x07u);
  for (size_t k = 1; k < seq.size(); ++k)
    cp = (cp << 6) | (static_cast<unsigned char>(seq[k]) & 0x3Fu);
  return cp;
}

}  // namespace

std::string log_text(std::string_view s, size_t max_bytes) {
  const std::string_view kept = truncate_utf8(s, max_bytes);
  const std::string p = printable(kept);
  std::string out;
  out.reserve(p.size());
  for (size_t i = 0; i < p.size();) {
    const size_t n = utf8_seq_len(p, i);  // printable() left only well-formed sequences
    const uint32_t cp = code_point(std::string_view(p).substr(i, n));
    if (n > 1 && acts_on_display(cp)) {
      char buf[16];
      (void)std::snprintf(buf, sizeof buf, "\\u{%04X}", static_cast<unsigned>(cp));
      out += buf;
    } else {
      out.append(p, i, n);
    }
    i += n;
  }
  if (kept.size() < s.size())
    out += "... (" + std::to_string(s.size() - kept.size()) + " more bytes)";
  return out;
}

std::string strip_ansi(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\x1b') {
      out += s[i];
      continue;
    }
    if (i + 1 >= s.size()) break;  // a lone trailing ESC carries nothing
    const char kind = s[i + 1];
    if (kind == '[') {
      // CSI: parameters and intermediates, then one final byte in 0x40..0x7E.
      size_t j = i + 2;
      while (j < s.size() && !(s[j] >= 0x40 && s[j] <= 0x7E))
        ++j;
      i = j;  // loop's ++i steps past the final byte
    } else if (kind == ']') {
      // OSC: ends at BEL or at ST (ESC \).
      size_t j = i + 2;
      while (j < s.size() && s[j] != '\x07' &&
             !(s[j] == '\x1b' && j + 1 < s.size() && s[j + 1] == '\\'))
        ++j;
      if (j < s.size() && s[j] == '\x1b') ++j;
      i = j;
    } else {
      i += 1;  // two-byte escape such as ESC ( B
    }
  }
  return out;
}

std::string md_inline(std::string_view s) {
  const std::string p = printable(s);
  std::string out;
  out.reserve(p.size() + 8);
  for (const char c : p) {
    switch (c) {
      case '\\':
      case '`':
      case '*':
      case '_':
      case '{':
      case '}':
      case '[':
      case ']':
      case '(':
      case ')':
      case '#':
      case '+':
      case '-':
      case '.':
      case '!':
      case '|':
      case '~':
      case '>':
      case '<':
      case '&':
      case '"':
      case '\'':
        out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

namespace {
size_t longest_backtick_run(std::string_view s) {
  size_t best = 0;
  size_t cur = 0;
  for (const char c : s) {
    cur = (c == '`') ? cur + 1 : 0;
    best = std::max(best, cur);
  }
  return best;
}
}  // namespace

std::string md_prose(std::string_view s) {
  const std::string p = printable(s);
  std::string out;
  out.reserve(p.size() + 8);
  for (size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    switch (c) {
      case '\\':
      case '`':
      case '*':
      case '_':
      case '[':
      case ']':
      case '<':
      case '>':
      case '|':
      case '&':
      case '~':
      case '#':
        out += '\\';
        out += c;
        break;
      case '!':
        if (i + 1 < p.size() && p[i + 1] == '[') out += '\\';
        out += c;
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string md_code_span(std::string_view s) {
  const std::string p = printable(s);
  const std::string ticks(longest_backtick_run(p) + 1, '`');
  // Padding spaces keep a leading or trailing backtick from touching the delimiter.
  return ticks + " " + p + " " + ticks;
}

std::string md_table_cell(std::string_view s) {
  return md_inline(s);
}

std::string md_code_block(const std::vector<std::string>& lines, std::string_view info) {
  std::vector<std::string> clean;
  clean.reserve(lines.size());
  size_t run = 0;
  for (const auto& l : lines) {
    clean.push_back(printable(l));
    run = std::max(run, longest_backtick_run(clean.back()));
  }
  const std::string fence(std::max<size_t>(3, run + 1), '`');
  std::string out = fence;
  out += info;
  out += '\n';
  for (const auto& l : clean) {
    out += l;
    out += '\n';
  }
  out += fence;
  out += '\n';
  return out;
}

std::string_view truncate_utf8(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t cut = max_bytes;
  // Step back over continuation bytes so we never end inside a sequence.
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80)
    --cut;
  return s.substr(0, cut);
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "unknown";
  const bool neg = seconds < 0;
  double a = std::fabs(seconds);
  char buf[64];
  if (a < 1.0) {
    (void)std::snprintf(buf, sizeof buf, "%s%.0fms", neg ? "-" : "", a * 1000.0);
    return buf;
  }
  auto total = static_cast<long long>(std::llround(a));
  const long long d = total / 86400;
  const long long h = (total % 86400) / 3600;
  const long long m = (total % 3600) / 60;
  const long long s = total % 60;
  if (d > 0) {
    (void)std::snprintf(buf, sizeof buf, "%s%lldd %02lldh %02lldm", neg ? "-" : "", d, h, m);
  } else if (h > 0) {
    (void)std::snprintf(buf, sizeof buf, "%s%lldh %02lldm", neg ? "-" : "", h, m);
  } else if (m > 0) {
    (void)std::snprintf(buf, sizeof buf, "%s%lldm %02llds", neg ? "-" : "", m, s);
  } else {
    (void)std::snprintf(buf, sizeof buf, "%s%llds", neg ? "-" : "", s);
  }
  return buf;
}

}  // namespace triage
