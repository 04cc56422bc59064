// One JSON object on one line, built in a fixed buffer. The plugin runs inside slurmstepd and the
// epilog, where it must not allocate its way into trouble or throw: nothing here allocates, and a
// message that would not fit is reported as such instead of being cut mid-token.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace triage::spank {

// The socket protocol's limit for one request line (docs/protocol.md), newline included.
inline constexpr size_t kMaxLineBytes = size_t{64} * 1024;

class JsonLine {
 public:
  JsonLine() noexcept;

  // Strings are escaped for JSON; bytes that are not valid UTF-8 become U+FFFD so that the line
  // always parses (an environment value may hold anything).
  void add(std::string_view key, std::string_view value) noexcept;
  void add(std::string_view key, int64_t value) noexcept;
  void add_unsigned(std::string_view key, uint64_t value) noexcept;
  void add_bool(std::string_view key, bool value) noexcept;

  // The finished line, closing brace and '\n' included; empty when the message did not fit.
  std::string_view finish() noexcept;
  bool overflowed() const noexcept { return overflow_; }

 private:
  void raw(std::string_view s) noexcept;
  void raw_char(char c) noexcept;
  void key(std::string_view k) noexcept;
  void escaped(std::string_view s) noexcept;

  char buf_[kMaxLineBytes];
  size_t len_ = 0;
  bool first_ = true;
  bool overflow_ = false;
  bool finished_ = false;
};

}  // namespace triage::spank
