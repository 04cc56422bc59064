// Cuts a byte stream into lines with a hard length limit, so that a line without an end (binary
// junk, a log still being written) can never make a reader hold unbounded memory.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace triage::collector {

class LineSplitter {
 public:
  explicit LineSplitter(size_t max_line = size_t{64} * 1024) : max_line_(max_line) {}

  void append(std::string_view bytes) { buf_.append(bytes); }
  // The next complete line (without "\n" or "\r\n"), or false when none is complete yet. A line
  // longer than the limit is returned cut at the limit (and `truncated` set); the rest of it, up
  // to its newline, is dropped.
  bool next(std::string& line, bool& truncated);
  // At end of input: the unterminated last line, if any.
  bool finish(std::string& line, bool& truncated);
  size_t buffered() const { return buf_.size() - start_; }

 private:
  void compact();

  size_t max_line_;
  std::string buf_;
  size_t start_ = 0;
  bool skipping_ = false;  // dropping the tail of an over-long line
};

}  // namespace triage::collector
