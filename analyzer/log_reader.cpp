#include "analyzer/log_reader.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "common/safe_io.h"

namespace triage {

BlockReader::BlockReader(int fd, uint64_t limit, size_t block_size, size_t overlap)
    : fd_(fd), limit_(limit), overlap_(overlap), buf_(block_size) {
  if (block_size < 4 * overlap || overlap == 0)
    throw std::invalid_argument("block size must exceed 4x the overlap");
}

bool BlockReader::fill() {
  while (have_ < buf_.size() && !eof_) {
    const uint64_t left = limit_ - consumed_;
    if (left == 0) {
      eof_ = true;
      break;
    }
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf_.size() - have_, left));
    const ssize_t n = ::read(fd_, buf_.data() + have_, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read", errno);
    }
    if (n == 0) {
      // The file shrank or we reached its end early; either way there is nothing more to read.
      eof_ = true;
      break;
    }
    have_ += static_cast<size_t>(n);
    consumed_ += static_cast<uint64_t>(n);
  }
  return have_ > 0;
}

bool BlockReader::next(LogBlock& out) {
  if (done_) return false;
  if (keep_from_ > 0) {
    std::memmove(buf_.data(), buf_.data() + keep_from_, have_ - keep_from_);
    buf_offset_ += keep_from_;
    have_ -= keep_from_;
    keep_from_ = 0;
  }
  if (!fill()) {
    done_ = true;
    return false;
  }
  out = LogBlock{};
  out.data = buf_.data();
  out.offset = buf_offset_;
  out.starts_line = !in_long_line_;
  const void* nl = ::memrchr(buf_.data(), '\n', have_);
  if (nl != nullptr) {
    const size_t end = static_cast<size_t>(static_cast<const char*>(nl) - buf_.data()) + 1;
    out.size = end;
    out.accept_end = end;
    keep_from_ = end;
    in_long_line_ = false;
    out.at_eof = eof_ && end == have_;
    if (out.at_eof) done_ = true;
    return true;
  }
  if (eof_) {
    // The last line has no line break (the job was killed mid-line, or it is still writing).
    out.size = have_;
    out.accept_end = have_;
    out.ends_inside_line = true;
    out.at_eof = true;
    keep_from_ = have_;
    done_ = true;
    return true;
  }
  // A line longer than the whole buffer: hand it out in pieces that overlap by `overlap_` bytes,
  // so a signature straddling two pieces is still seen whole in the second.
  out.size = have_;
  out.accept_end = have_ - overlap_;
  out.ends_inside_line = true;
  keep_from_ = have_ - overlap_;
  in_long_line_ = true;
  return true;
}

namespace {

size_t pread_some(int fd, char* buf, size_t len, uint64_t off) {
  size_t got = 0;
  while (got < len) {
    const ssize_t n = ::pread(fd, buf + got, len - got, static_cast<off_t>(off + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("pread", errno);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  return got;
}

}  // namespace

std::vector<LineCopy> read_tail_lines(int fd, uint64_t end, int64_t total_lines, size_t count,
                                      size_t max_copy, uint64_t max_scan) {
  std::vector<LineCopy> out;
  if (end == 0 || count == 0) return out;
  // Line ends, newest first: the end of the last line is `end` (minus its line break, if any).
  std::vector<uint64_t> starts;  // line starts found, newest first
  constexpr size_t kChunk = size_t{64} * 1024;
  std::vector<char> chunk(kChunk);
  uint64_t pos = end;
  uint64_t scanned = 0;
  bool reached_start = false;
  bool skip_final_break = true;
  while (starts.size() < count && !reached_start && scanned < max_scan) {
    const uint64_t from = pos > kChunk ? pos - kChunk : 0;
    const size_t len = static_cast<size_t>(pos - from);
    const size_t got = pread_some(fd, chunk.data(), len, from);
    if (got < len) break;  // the file shrank under us; keep what we have
    for (size_t i = len; i-- > 0;) {
      if (chunk[i] != '\n') continue;
      if (skip_final_break && from + i + 1 == end) {
        skip_final_break = false;
        continue;
      }
      starts.push_back(from + i + 1);
      if (starts.size() == count) break;
    }
    skip_final_break = false;
    scanned += len;
    pos = from;
    if (from == 0) reached_start = true;
  }
  if (starts.size() < count && reached_start) starts.push_back(0);
  if (starts.empty()) return out;
  // Oldest first; each line ends where the next begins (minus its line break).
  std::reverse(starts.begin(), starts.end());
  out.reserve(starts.size());
  for (size_t i = 0; i < starts.size(); ++i) {
    const bool last_line = i + 1 == starts.size();
    uint64_t line_end = last_line ? end : starts[i + 1] - 1;
    if (last_line && line_end > starts[i]) {
      char last = 0;
      if (pread_some(fd, &last, 1, end - 1) == 1 && last == '\n') line_end = end - 1;
    }
    LineCopy lc;
    lc.number = total_lines - static_cast<int64_t>(starts.size() - 1 - i);
    lc.length = line_end - starts[i];
    const size_t take = static_cast<size_t>(std::min<uint64_t>(lc.length, max_copy));
    lc.text.resize(take);
    lc.text.resize(pread_some(fd, lc.text.data(), take, starts[i]));
    lc.truncated = lc.length > take;
    if (!lc.text.empty() && lc.text.back() == '\r') lc.text.pop_back();
    out.push_back(std::move(lc));
  }
  return out;
}

}  // namespace triage
