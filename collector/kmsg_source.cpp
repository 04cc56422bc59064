// The kernel's own record stream, /dev/kmsg, for nodes without a journal. The device hands out one
// record per read(); a reader that falls behind the ring buffer gets EPIPE once and then continues
// from the oldest record still there, so losses show up as a gap in the sequence numbers. The same
// reader also takes a regular file or a pipe of records (tests, saved captures), where records are
// lines and dictionary lines start with a space.
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>
#include <stdexcept>

#include "collector/kernel_pipeline.h"
#include "collector/kmsg_record.h"
#include "collector/line_splitter.h"
#include "common/boot_id.h"
#include "common/safe_io.h"
#include "common/text.h"

namespace triage::collector {

namespace {

constexpr size_t kBatch = 4096;
constexpr size_t kRecordBuffer = size_t{16} * 1024;  // above the kernel's largest record (8 KiB)

int64_t clock_usec(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

struct ResumePoint {
  std::string boot_id;
  uint64_t seq = 0;
};

std::optional<ResumePoint> parse_resume(const std::string& position) {
  // kmsg:<boot>:<seq>
  const auto parts = split(position, ':');
  if (parts.size() != 3 || parts[0] != "kmsg") return std::nullopt;
  const auto seq = parse_uint(parts[2]);
  std::string boot = normalize_boot_id(parts[1]);
  if (!seq || boot.empty()) return std::nullopt;
  return ResumePoint{std::move(boot), *seq};
}

class KmsgSource final : public KernelSource {
 public:
  explicit KmsgSource(const KmsgOptions& o)
      : path_(o.path),
        read_fn_(o.read_fn),
        follow_(o.follow),
        boot_id_(read_boot_id(o.boot_id_path)) {
    if (!o.resume_after.empty()) {
      const auto r = parse_resume(o.resume_after);
      if (!r)
        throw std::runtime_error("kmsg resume position '" + o.resume_after +
                                 "' is not kmsg:<boot>:<seq>");
      // A position from another boot says nothing about this boot's numbering.
      if (r->boot_id == boot_id_) {
        last_seq_ = r->seq;
        have_last_ = true;
      }
    }
    fd_.reset(::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
    if (!fd_) throw_errno("open " + path_, errno);
    struct stat st {};
    if (::fstat(fd_.get(), &st) != 0) throw_errno("stat " + path_, errno);
    device_ = S_ISCHR(st.st_mode);
    fifo_ = S_ISFIFO(st.st_mode);
    // kmsg timestamps count from boot; the wall clock of boot turns them into wall time.
    boot_realtime_ = clock_usec(CLOCK_REALTIME) - clock_usec(CLOCK_MONOTONIC);
  }

  bool read(std::vector<KernelRecord>& out, int timeout_ms) override {
    const size_t before = out.size();
    bool waited = false;
    while (out.size() - before < kBatch) {
      const bool more = device_ ? read_device(out) : read_stream(out);
      if (!more) {
        if (eof_) return false;
        if (out.size() > before || waited || timeout_ms == 0) return true;
        pollfd p{fd_.get(), POLLIN, 0};
        const int r = ::poll(&p, 1, timeout_ms);
        if (r < 0 && errno != EINTR) throw_errno("poll " + path_, errno);
        waited = true;
      }
    }
    return true;
  }

  int wait_fd() const override { return fd_.get(); }
  uint64_t lost_records() const override { return lost_; }
  std::string describe() const override { return "kmsg " + path_; }

 private:
  ssize_t do_read(void* buf, size_t len) {
    return read_fn_ ? read_fn_(fd_.get(), buf, len) : ::read(fd_.get(), buf, len);
  }

  // One read(): the byte count, 0 at the end, -1 when nothing is there right now. An overrun is
  // counted and read past: the next read continues from the oldest record still in the ring, and
  // the gap in sequence numbers tells how many were lost.
  ssize_t read_once(char* buf, size_t len) {
    while (true) {
      const ssize_t n = do_read(buf, len);
      if (n >= 0) return n;
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return -1;
      if (errno == EPIPE) {
        ++overruns_;
        continue;
      }
      throw_errno("read " + path_, errno);
    }
  }

  // One record per read(); false when none is available right now.
  bool read_device(std::vector<KernelRecord>& out) {
    char buf[kRecordBuffer];
    const ssize_t n = read_once(buf, sizeof buf);
    if (n <= 0) return false;
    take(std::string_view(buf, static_cast<size_t>(n)), out);
    return true;
  }

  // Lines from a file or pipe; a record is complete once the next header (or EOF) is seen.
  bool read_stream(std::vector<KernelRecord>& out) {
    std::string line;
    bool truncated = false;
    bool produced = false;
    while (splitter_.next(line, truncated)) {
      produced |= add_stream_line(line, out);
    }
    if (produced) return true;
    char buf[size_t{64} * 1024];
    const ssize_t n = read_once(buf, sizeof buf);
    if (n > 0) {
      splitter_.append(std::string_view(buf, static_cast<size_t>(n)));
      got_data_ = true;
      return true;
    }
    // A FIFO reads as empty until its writer has opened it; that is not the end.
    if (n < 0 || (fifo_ && !got_data_)) return false;
    if (!follow_ && splitter_.finish(line, truncated)) add_stream_line(line, out);
    if (!pending_.empty()) take(pending_, out);
    pending_.clear();
    eof_ = true;
    return false;
  }

  bool add_stream_line(const std::string& line, std::vector<KernelRecord>& out) {
    if (!line.empty() && line[0] == ' ') {
      if (!pending_.empty()) pending_.append("\n").append(line);
      return false;
    }
    bool produced = false;
    if (!pending_.empty()) {
      const size_t n = out.size();
      take(pending_, out);
      produced = out.size() > n;
    }
    pending_ = line;
    return produced;
  }

  void take(std::string_view raw, std::vector<KernelRecord>& out) {
    std::string error;
    auto rec = parse_kmsg_record(raw, &error);
    if (!rec) {
      ++malformed_;
      return;
    }
    if (have_last_ && rec->seq <= last_seq_) return;  // already delivered before the resume
    int64_t lost = 0;
    if (have_last_ && rec->seq > last_seq_ + 1)
      lost = static_cast<int64_t>(rec->seq - last_seq_ - 1);
    lost_ += static_cast<uint64_t>(lost);
    last_seq_ = rec->seq;
    have_last_ = true;
    KernelRecord r;
    r.text = std::move(rec->message);
    r.priority = rec->priority;
    r.facility = rec->facility;
    r.monotonic_usec = rec->usec;
    r.realtime_usec = boot_realtime_ + rec->usec;
    r.boot_id = boot_id_;
    r.seq = rec->seq;
    r.seq_space = SeqSpace::kKmsg;
    r.position = "kmsg:" + boot_id_ + ":" + std::to_string(rec->seq);
    r.kernel_device = std::move(rec->device);
    r.lost_before = lost;
    out.push_back(std::move(r));
  }

  std::string path_;
  std::function<ssize_t(int, void*, size_t)> read_fn_;
  bool follow_ = false;
  UniqueFd fd_;
  bool device_ = false;
  bool fifo_ = false;
  bool got_data_ = false;
  bool eof_ = false;
  std::string boot_id_;
  int64_t boot_realtime_ = 0;
  uint64_t last_seq_ = 0;
  bool have_last_ = false;
  uint64_t lost_ = 0;
  uint64_t overruns_ = 0;
  uint64_t malformed_ = 0;
  LineSplitter splitter_{kRecordBuffer};
  std::string pending_;
};

}  // namespace

std::unique_ptr<KernelSource> open_kmsg_source(const KmsgOptions& options) {
  return std::make_unique<KmsgSource>(options);
}

}  // namespace triage::collector
