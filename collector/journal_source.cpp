// Kernel records from the systemd journal (_TRANSPORT=kernel only), resumable from a cursor.
//
// Resuming: the saved cursor names the last record handed out. If that entry is still in the
// journal we continue right after it: no gap, no duplicate. If rotation and vacuuming removed it,
// we continue with the oldest kernel entry after its wall-clock time and mark that first record
// with lost_before = -1, because entries between may have been vacuumed with it.
#include <systemd/sd-journal.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

#include "collector/journal_cursor.h"
#include "collector/kernel_pipeline.h"
#include "common/boot_id.h"
#include "common/text.h"

namespace triage::collector {

namespace {

constexpr size_t kBatch = 4096;

[[noreturn]] void throw_sd(const std::string& what, int r) {
  throw std::runtime_error("journal: " + what + ": " + std::strerror(-r));
}

class JournalSource final : public KernelSource {
 public:
  explicit JournalSource(const JournalOptions& o) {
    try {
      open(o);
    } catch (...) {
      sd_journal_close(j_);
      throw;
    }
  }

  ~JournalSource() override { sd_journal_close(j_); }
  JournalSource(const JournalSource&) = delete;
  JournalSource& operator=(const JournalSource&) = delete;

  bool read(std::vector<KernelRecord>& out, int timeout_ms) override {
    const size_t before = out.size();
    drain(out);
    if (out.size() == before) {
      const uint64_t usec =
          timeout_ms < 0 ? static_cast<uint64_t>(-1) : static_cast<uint64_t>(timeout_ms) * 1000;
      const int r = timeout_ms == 0 ? sd_journal_process(j_) : sd_journal_wait(j_, usec);
      if (r < 0 && r != -EINVAL) throw_sd("wait", r);
      drain(out);
    }
    return true;
  }

  int wait_fd() const override { return fd_; }
  std::string describe() const override { return what_; }

 private:
  void open(const JournalOptions& o) {
    int r = 0;
    if (!o.files.empty()) {
      std::vector<const char*> paths;
      for (const auto& f : o.files)
        paths.push_back(f.c_str());
      paths.push_back(nullptr);
      r = sd_journal_open_files(&j_, paths.data(), 0);
      what_ = "journal files " + o.files.front() + (o.files.size() > 1 ? " ..." : "");
    } else if (!o.directory.empty()) {
      r = sd_journal_open_directory(&j_, o.directory.c_str(), 0);
      what_ = "journal " + o.directory;
    } else {
      r = sd_journal_open(&j_, SD_JOURNAL_LOCAL_ONLY | SD_JOURNAL_SYSTEM);
      what_ = "system journal";
    }
    if (r < 0) throw_sd("open " + what_, r);
    r = sd_journal_add_match(j_, "_TRANSPORT=kernel", 0);
    if (r < 0) throw_sd("add match", r);
    // Sets up inotify, so that rotated-in files are noticed by sd_journal_process().
    fd_ = sd_journal_get_fd(j_);
    position(o);
  }

  void position(const JournalOptions& o) {
    if (!o.resume_after.empty()) {
      if (sd_journal_seek_cursor(j_, o.resume_after.c_str()) >= 0 && sd_journal_next(j_) > 0 &&
          sd_journal_test_cursor(j_, o.resume_after.c_str()) > 0) {
        return;  // on the last record handed out; next() continues right after it
      }
      // The entry is gone (or the cursor is unreadable): go on after its time.
      const auto c = parse_journal_cursor(o.resume_after);
      if (c) {
        skip_ = *c;
        if (sd_journal_seek_realtime_usec(j_, c->realtime_usec) < 0) sd_journal_seek_head(j_);
      } else {
        sd_journal_seek_head(j_);
      }
      mark_loss_ = true;
      return;
    }
    if (o.start_at_tail) {
      sd_journal_seek_tail(j_);
      sd_journal_previous(j_);
      return;
    }
    sd_journal_seek_head(j_);
  }

  std::string field(const char* name) {
    const void* data = nullptr;
    size_t len = 0;
    if (sd_journal_get_data(j_, name, &data, &len) < 0) return {};
    const size_t prefix = std::strlen(name) + 1;  // "NAME="
    if (len < prefix) return {};
    return std::string(static_cast<const char*>(data) + prefix, len - prefix);
  }

  static int int_field(const std::string& s) {
    const auto v = parse_int(s);
    return v && *v >= 0 && *v < 1024 ? static_cast<int>(*v) : -1;
  }

  void drain(std::vector<KernelRecord>& out) {
    size_t n = 0;
    while (n < kBatch) {
      const int r = sd_journal_next(j_);
      if (r < 0) throw_sd("next", r);
      if (r == 0) return;
      char* cursor = nullptr;
      if (sd_journal_get_cursor(j_, &cursor) < 0 || cursor == nullptr) continue;
      std::string pos(cursor);
      std::free(cursor);
      const auto c = parse_journal_cursor(pos);
      if (!c) continue;
      if (skip_ && before_or_at(*c, *skip_)) continue;
      skip_.reset();

      KernelRecord rec;
      rec.text = field("MESSAGE");
      rec.priority = int_field(field("PRIORITY"));
      rec.facility = int_field(field("SYSLOG_FACILITY"));
      uint64_t rt = 0;
      if (sd_journal_get_realtime_usec(j_, &rt) >= 0) rec.realtime_usec = static_cast<int64_t>(rt);
      // The kernel's own timestamp beats the time journald received the record.
      if (const auto src = parse_int(field("_SOURCE_MONOTONIC_TIMESTAMP")); src && *src >= 0) {
        rec.monotonic_usec = *src;
      } else {
        uint64_t mono = 0;
        sd_id128_t boot{};
        if (sd_journal_get_monotonic_usec(j_, &mono, &boot) >= 0) {
          rec.monotonic_usec = static_cast<int64_t>(mono);
        }
      }
      rec.boot_id = normalize_boot_id(field("_BOOT_ID"));
      if (rec.boot_id.empty()) rec.boot_id = normalize_boot_id(c->boot_id);
      rec.host = field("_HOSTNAME");
      rec.kernel_device = field("_KERNEL_DEVICE");
      rec.seq = c->seqnum;
      rec.seq_scope = c->seqnum_id.substr(0, 8);
      rec.seq_space = SeqSpace::kJournal;
      rec.position = std::move(pos);
      if (mark_loss_) {
        rec.lost_before = -1;
        mark_loss_ = false;
      }
      out.push_back(std::move(rec));
      ++n;
    }
  }

  // Whether `e` was handed out before (at or before the vanished cursor `c`).
  static bool before_or_at(const JournalCursor& e, const JournalCursor& c) {
    if (e.seqnum_id == c.seqnum_id) return e.seqnum <= c.seqnum;
    return e.realtime_usec <= c.realtime_usec;
  }

  sd_journal* j_ = nullptr;
  int fd_ = -1;
  std::string what_;
  std::optional<JournalCursor> skip_;
  bool mark_loss_ = false;
};

}  // namespace

std::unique_ptr<KernelSource> open_journal_source(const JournalOptions& options) {
  return std::make_unique<JournalSource>(options);
}

}  // namespace triage::collector
