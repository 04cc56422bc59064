// Kernel text for offline use: whatever dmesg or journalctl printed, read to the end.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "collector/kernel_line_parser.h"
#include "collector/kernel_pipeline.h"
#include "collector/line_splitter.h"
#include "common/safe_io.h"
#include "common/time_util.h"

namespace triage::collector {

namespace {

constexpr size_t kBatch = 4096;
constexpr size_t kChunk = size_t{64} * 1024;

class TextSource final : public KernelSource {
 public:
  TextSource(int fd, std::string name, bool follow)
      : fd_(fd), name_(std::move(name)), follow_(follow), now_(now_usec()) {}

  bool read(std::vector<KernelRecord>& out, int timeout_ms) override {
    const size_t before = out.size();
    std::string line;
    bool truncated = false;
    while (out.size() - before < kBatch) {
      if (splitter_.next(line, truncated)) {
        add(std::move(line), out);
        continue;
      }
      if (eof_) {
        if (!follow_ && splitter_.finish(line, truncated)) add(std::move(line), out);
        return false;
      }
      // Wait only for the first batch; after that, hand back what we have.
      if (out.size() > before) return true;
      if (!fill(timeout_ms)) return true;
    }
    return true;
  }

  int wait_fd() const override { return fd_; }
  std::string describe() const override { return "text " + name_; }

 private:
  // Reads one chunk; false when nothing arrived within the timeout.
  bool fill(int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    const int r = ::poll(&p, 1, timeout_ms < 0 ? -1 : timeout_ms);
    if (r < 0 && errno != EINTR) throw_errno("poll " + name_, errno);
    if (r <= 0) return false;
    char buf[kChunk];
    while (true) {
      const ssize_t n = ::read(fd_, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && errno == EAGAIN) return false;
      if (n < 0) throw_errno("read " + name_, errno);
      if (n == 0) {
        eof_ = true;
      } else {
        splitter_.append(std::string_view(buf, static_cast<size_t>(n)));
      }
      return true;
    }
  }

  void add(std::string&& text, std::vector<KernelRecord>& out) {
    ++line_no_;
    const ParsedLine p = parse_kernel_line(text, now_);
    if (p.kind == LineKind::kBoot) {
      boot_id_ = std::string(p.boot_id);
      return;
    }
    if (p.kind == LineKind::kAnnotation) return;
    KernelRecord r;
    r.message_offset = p.message_offset;
    r.priority = p.priority;
    r.facility = p.facility;
    r.realtime_usec = p.realtime_usec;
    r.monotonic_usec = p.monotonic_usec;
    r.host = std::string(p.host);
    r.boot_id = boot_id_;
    r.seq = line_no_;
    r.seq_space = SeqSpace::kText;
    r.position = "text:" + std::to_string(line_no_);
    r.text = std::move(text);
    out.push_back(std::move(r));
  }

  int fd_;
  std::string name_;
  bool follow_;
  int64_t now_;
  LineSplitter splitter_;
  bool eof_ = false;
  uint64_t line_no_ = 0;
  std::string boot_id_;
};

}  // namespace

std::unique_ptr<KernelSource> open_text_source(int fd, const std::string& name, bool follow) {
  return std::make_unique<TextSource>(fd, name, follow);
}

}  // namespace triage::collector
