// Text helpers shared by every component: trimming and splitting, number parsing, and making
// untrusted bytes safe to show (UTF-8 repair, ANSI stripping, Markdown escaping).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage {

std::string_view trim(std::string_view s);
std::vector<std::string_view> split(std::string_view s, char sep);
std::string to_lower(std::string_view s);
bool iequals(std::string_view a, std::string_view b);

// Strict whole-string parses: no leading/trailing junk, no overflow.
std::optional<int64_t> parse_int(std::string_view s);
std::optional<uint64_t> parse_uint(std::string_view s);
std::optional<double> parse_double(std::string_view s);

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool is_valid_utf8(std::string_view s);

// Repairs `s` for display: invalid UTF-8 becomes U+FFFD, C0 controls other than tab (and DEL)
// become "\xNN". The result is always valid UTF-8 and holds no line breaks.
std::string printable(std::string_view s);

// Untrusted text (a job's log line, name or path, a comment, another program's stderr) for one of
// our own log lines: printable() (so no C0 control: no line break, no carriage return, no ESC that
// could start an ANSI sequence), plus, written as a backslash, 'u' and the code point in braces,
// the characters some terminals and log viewers still act on: C1 controls (U+0080-U+009F, NEL and
// the 8-bit CSI among them), the Unicode line and paragraph separators, and the bidirectional
// marks, overrides and isolates that reorder what is shown.
// Longer text is cut at `max_bytes` (on a character boundary) and says how much was left out.
// The logger (common/logging.h) applies it to every message as well.
inline constexpr size_t kLogTextMax = 1024;
std::string log_text(std::string_view s, size_t max_bytes = kLogTextMax);

// Removes ANSI escape sequences (CSI "ESC [ ... final", OSC "ESC ] ... BEL|ST", and two-byte
// escapes). Bytes that are not part of an escape are kept as they are.
std::string strip_ansi(std::string_view s);

// Markdown for untrusted text. `md_inline` is for prose positions: printable() plus backslash
// escapes for every character Markdown or HTML gives meaning to. `md_code_span` wraps text in a
// backtick code span long enough that nothing inside can close it. `md_table_cell` is md_inline
// for a table cell (pipes escaped too). `md_code_block` fences lines with a fence longer than any
// backtick run inside them.
std::string md_inline(std::string_view s);
std::string md_code_span(std::string_view s);
std::string md_table_cell(std::string_view s);
std::string md_code_block(const std::vector<std::string>& lines, std::string_view info = "");

// Markdown for prose that may hold untrusted words: printable() plus a backslash before every
// character that can open markup inline (\ ` * _ [ ] < > | & ~ #  and ! before [). Lighter than
// md_inline: ordinary punctuation stays readable in the raw file.
std::string md_prose(std::string_view s);

// Cuts `s` to at most `max_bytes` bytes without splitting a UTF-8 sequence.
std::string_view truncate_utf8(std::string_view s, size_t max_bytes);

// "1h 02m", "3m 05s", "42s", "850ms": durations as people read them in a report.
std::string format_duration(double seconds);

}  // namespace triage
