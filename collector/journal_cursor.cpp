#include "collector/journal_cursor.h"

#include <charconv>

#include "common/text.h"

namespace triage::collector {

namespace {

std::optional<uint64_t> parse_hex(std::string_view s) {
  if (s.empty() || s.size() > 16) return std::nullopt;
  uint64_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v, 16);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

std::optional<JournalCursor> parse_journal_cursor(std::string_view cursor) {
  JournalCursor c;
  bool have_seqnum = false;
  bool have_realtime = false;
  for (const auto part : split(cursor, ';')) {
    if (part.size() < 2 || part[1] != '=') continue;
    const std::string_view value = part.substr(2);
    switch (part[0]) {
      case 's':
        c.seqnum_id = std::string(value);
        break;
      case 'b':
        c.boot_id = std::string(value);
        break;
      case 'i': {
        const auto v = parse_hex(value);
        if (!v) return std::nullopt;
        c.seqnum = *v;
        have_seqnum = true;
        break;
      }
      case 'm': {
        const auto v = parse_hex(value);
        if (!v) return std::nullopt;
        c.monotonic_usec = *v;
        break;
      }
      case 't': {
        const auto v = parse_hex(value);
        if (!v) return std::nullopt;
        c.realtime_usec = *v;
        have_realtime = true;
        break;
      }
      default:
        break;
    }
  }
  if (!have_seqnum || !have_realtime) return std::nullopt;
  return c;
}

}  // namespace triage::collector
