#include "collector/line_splitter.h"

namespace triage::collector {

void LineSplitter::compact() {
  if (start_ > 0 && (start_ == buf_.size() || start_ > size_t{64} * 1024)) {
    buf_.erase(0, start_);
    start_ = 0;
  }
}

bool LineSplitter::next(std::string& line, bool& truncated) {
  while (true) {
    const size_t nl = buf_.find('\n', start_);
    if (skipping_) {
      if (nl == std::string::npos) {
        buf_.clear();
        start_ = 0;
        return false;
      }
      start_ = nl + 1;
      skipping_ = false;
      continue;
    }
    if (nl == std::string::npos) {
      if (buf_.size() - start_ > max_line_) {
        line.assign(buf_, start_, max_line_);
        truncated = true;
        skipping_ = true;
        buf_.clear();
        start_ = 0;
        return true;
      }
      compact();
      return false;
    }
    size_t end = nl;
    if (end > start_ && buf_[end - 1] == '\r') --end;
    truncated = end - start_ > max_line_;
    line.assign(buf_, start_, truncated ? max_line_ : end - start_);
    start_ = nl + 1;
    compact();
    return true;
  }
}

bool LineSplitter::finish(std::string& line, bool& truncated) {
  if (skipping_ || start_ >= buf_.size()) {
    buf_.clear();
    start_ = 0;
    skipping_ = false;
    return false;
  }
  size_t end = buf_.size();
  if (end > start_ && buf_[end - 1] == '\r') --end;
  truncated = end - start_ > max_line_;
  line.assign(buf_, start_, truncated ? max_line_ : end - start_);
  buf_.clear();
  start_ = 0;
  return true;
}

}  // namespace triage::collector
