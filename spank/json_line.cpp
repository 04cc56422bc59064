#include "spank/json_line.h"

#include <cstdio>
#include <cstring>

#include "spank/slice.h"

namespace triage::spank {

namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when it is not one (overlongs,
// surrogates and code points above U+10FFFF are not well-formed).
size_t utf8_sequence_length(std::string_view s, size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  size_t n = 0;
  unsigned lo = 0x80;
  unsigned hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    n = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    n = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    n = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned first_lo = k == 1 ? lo : 0x80;
    const unsigned first_hi = k == 1 ? hi : 0xBF;
    if (b < first_lo || b > first_hi) return 0;
  }
  return n;
}

}  // namespace

JsonLine::JsonLine() noexcept : buf_{} {
  raw_char('{');
}

void JsonLine::raw(std::string_view s) noexcept {
  if (overflow_) return;
  // Two bytes stay reserved for the closing "}\n".
  if (s.size() > sizeof(buf_) - 2 - len_) {
    overflow_ = true;
    return;
  }
  std::memcpy(buf_ + len_, s.data(), s.size());
  len_ += s.size();
}

void JsonLine::raw_char(char c) noexcept {
  raw(std::string_view(&c, 1));
}

void JsonLine::key(std::string_view k) noexcept {
  if (!first_) raw_char(',');
  first_ = false;
  escaped(k);
  raw_char(':');
}

void JsonLine::escaped(std::string_view s) noexcept {
  raw_char('"');
  size_t i = 0;
  while (i < s.size() && !overflow_) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_sequence_length(s, i);
      if (n == 0) {
        raw("\\ufffd");
        ++i;
      } else {
        raw(slice(s, i, n));
        i += n;
      }
      continue;
    }
    switch (c) {
      case '"':
        raw("\\\"");
        break;
      case '\\':
        raw("\\\\");
        break;
      case '\n':
        raw("\\n");
        break;
      case '\r':
        raw("\\r");
        break;
      case '\t':
        raw("\\t");
        break;
      case '\b':
        raw("\\b");
        break;
      case '\f':
        raw("\\f");
        break;
      default:
        if (c < 0x20 || c == 0x7F) {
          char esc[8];
          (void)std::snprintf(esc, sizeof(esc), "\\u%04x", static_cast<unsigned>(c));
          raw(esc);
        } else {
          raw_char(static_cast<char>(c));
        }
    }
    ++i;
  }
  raw_char('"');
}

void JsonLine::add(std::string_view k, std::string_view value) noexcept {
  key(k);
  escaped(value);
}

void JsonLine::add(std::string_view k, int64_t value) noexcept {
  key(k);
  char num[24];
  const int n = std::snprintf(num, sizeof(num), "%lld", static_cast<long long>(value));
  raw(std::string_view(num, static_cast<size_t>(n)));
}

void JsonLine::add_unsigned(std::string_view k, uint64_t value) noexcept {
  key(k);
  char num[24];
  const int n = std::snprintf(num, sizeof(num), "%llu", static_cast<unsigned long long>(value));
  raw(std::string_view(num, static_cast<size_t>(n)));
}

void JsonLine::add_bool(std::string_view k, bool value) noexcept {
  key(k);
  raw(value ? "true" : "false");
}

std::string_view JsonLine::finish() noexcept {
  if (overflow_) return {};
  if (!finished_) {
    // Space for these two bytes was reserved by raw().
    buf_[len_++] = '}';
    buf_[len_++] = '\n';
    finished_ = true;
  }
  return {buf_, len_};
}

}  // namespace triage::spank
