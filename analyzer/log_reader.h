// Reads a log in large fixed-size blocks so that memory stays flat whatever the log's size. Blocks
// end on a line break; a line longer than the buffer is handed out in overlapping pieces (each
// piece says where its text may start matching), and a final line without a line break is handed
// out at the end. A log that is still being written is read up to the size it had when it was
// opened.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace triage {

struct LogBlock {
  const char* data = nullptr;
  size_t size = 0;
  uint64_t offset = 0;  // file offset of data[0]
  // Matches must start before this offset inside the block (the rest is repeated at the start of
  // the next block, for pieces of an over-long line). Equal to `size` for ordinary blocks.
  size_t accept_end = 0;
  // True when data[0] is the start of a line (false for the second and later pieces of a long
  // line).
  bool starts_line = true;
  // True when the block ends inside a line (a piece of a long line, or the final unterminated line
  // at EOF).
  bool ends_inside_line = false;
  bool at_eof = false;
};

class BlockReader {
 public:
  // `overlap` is how much of a long line's piece is repeated in the next piece; it must exceed the
  // longest literal the scanner searches for.
  BlockReader(int fd, uint64_t limit, size_t block_size, size_t overlap);

  // The next block, or false at the end. The previous block's memory is reused.
  bool next(LogBlock& out);

  uint64_t bytes_read() const { return consumed_; }
  // ANSI escapes removed from blocks shrink them: bytes_read() still counts file bytes.
  char* mutable_data() { return buf_.data(); }

 private:
  bool fill();

  int fd_;
  uint64_t limit_;
  size_t overlap_;
  std::vector<char> buf_;
  size_t have_ = 0;          // bytes valid in buf_
  size_t keep_from_ = 0;     // start of the bytes the previous block did not consume
  uint64_t buf_offset_ = 0;  // file offset of buf_[0]
  uint64_t consumed_ = 0;    // file bytes read so far
  bool eof_ = false;
  bool in_long_line_ = false;
  bool done_ = false;
};

// A copy of one line for evidence: at most `max_copy` bytes of it, and its full length.
struct LineCopy {
  int64_t number = 0;  // 1-based
  std::string text;
  uint64_t length = 0;
  bool truncated = false;
};

// The last `count` lines before `end` (a file offset), read backwards with pread. `total_lines` is
// the number of line starts before `end` (used for numbering). Gives up after scanning `max_scan`
// bytes backwards (lines of many megabytes), returning what it found.
std::vector<LineCopy> read_tail_lines(int fd, uint64_t end, int64_t total_lines, size_t count,
                                      size_t max_copy, uint64_t max_scan);

}  // namespace triage
