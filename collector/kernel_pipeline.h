// The contract between the kernel-log half of the collector and its users (the agent's ingest
// loop, the `slurm-triage kernel` command, tests and benchmarks). A KernelSource yields raw
// records; a KernelClassifier turns them into KernelEvents using the kernel rule catalogs.
//
// Exactly-once across restarts rests on two promises:
//  1. Event ids are a pure function of the records that produced them (boot id + the kmsg
//     sequence number or journal seqnum of the event's first record, see event_id_for()), so
//     replaying records yields the same ids and the agent can drop what it already has.
//  2. safe_resume_position() never moves past a record whose event has not been emitted in full,
//     so a restart that resumes there loses nothing that was still being assembled (multi-line
//     records, folded floods, an Xid that a later Xid 45 may name as its cause).
// The classifier gets the second promise by construction: the safe position only ever advances to
// a record after which it held nothing at all, and since its decisions depend on nothing but the
// records it was fed, a fresh classifier resumed there makes exactly the decisions the old one
// made from that point on (see docs/kernel-events.md, "Exactly once").
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "common/model.h"

namespace triage::collector {

// Which numbering a record's `seq` belongs to; it decides the shape of event ids.
enum class SeqSpace {
  kText,     // line number in a text input: ids "text:<seq>"
  kKmsg,     // the kernel's printk sequence number: ids "<boot>:<seq>"
  kJournal,  // the journal's entry sequence number: ids "<boot>:j<seq_scope>-<seq>"
};

struct KernelRecord {
  std::string text;           // one line of kernel text, without the trailing newline
  size_t message_offset = 0;  // where the kernel's own message starts in `text` (after a dmesg or
                              // journalctl prefix); text sources keep the prefix for the verbatim
                              // lines of events
  int priority = -1;          // syslog priority 0..7, when the source knows it
  int facility = -1;          // syslog facility when known; 0 is the kernel. Lines that userspace
                              // wrote into /dev/kmsg carry another facility and are not classified
  int64_t realtime_usec = 0;  // wall clock; 0 when unknown (plain dmesg without -T)
  int64_t monotonic_usec = -1;  // time since boot, when known ("[  123.456789]", kmsg, journal)
  std::string boot_id;
  uint64_t seq = 0;  // kmsg sequence number, journal seqnum, or a running line number for text
  SeqSpace seq_space = SeqSpace::kText;
  std::string seq_scope;  // what `seq` counts within: the journal's seqnum id (8 hex digits)
  std::string
      position;      // where to resume *after* this record: a journal cursor, "kmsg:<boot>:<seq>"
  std::string host;  // _HOSTNAME when the source knows it
  std::string kernel_device;  // the kmsg dictionary's DEVICE= / journal _KERNEL_DEVICE
                              // ("+pci:0000:c1:00.0")
  int64_t lost_before = 0;    // records the source knows were lost just before this one (kmsg
                              // overrun); -1 = an unknown number may be lost (journal cursor gone)

  std::string_view message() const;
};

// The id of an event whose first record is `r` (promise 1 above).
std::string event_id_for(const KernelRecord& r);

class KernelSource {
 public:
  virtual ~KernelSource() = default;
  // Appends whatever records are available, waiting at most `timeout_ms` for the first one.
  // Returns false once the source is exhausted for good (end of a text file, of a kmsg record
  // file or pipe); live sources (journal, /dev/kmsg) never return false. Throws
  // std::runtime_error on unrecoverable errors.
  virtual bool read(std::vector<KernelRecord>& out, int timeout_ms) = 0;
  // A file descriptor that becomes readable when records may be available, or -1.
  virtual int wait_fd() const { return -1; }
  // Records the source knows it lost (kmsg overrun), since it was opened. The first record after
  // a loss also says so in `lost_before`, which the classifier turns into a records-lost event.
  virtual uint64_t lost_records() const { return 0; }
  virtual std::string describe() const = 0;
};

struct JournalOptions {
  std::string directory;           // journal directory; empty = the system journal
  std::vector<std::string> files;  // explicit journal files (tests); overrides directory
  std::string resume_after;        // cursor to resume after; empty = from the start (or tail)
  bool start_at_tail = false;      // with no cursor: only new records
};
std::unique_ptr<KernelSource> open_journal_source(const JournalOptions& options);

struct KmsgOptions {
  std::string path = "/dev/kmsg";  // the device, or a regular file / pipe holding kmsg records
  std::string resume_after;        // "kmsg:<boot>:<seq>"; ignored when the boot id differs
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
  // A file that is still being written (the agent following it): an unterminated last line at the
  // end is not a record yet; it is read complete on the next open.
  bool follow = false;
  // Replaces ::read() on the opened descriptor (tests inject EPIPE overruns through it).
  std::function<ssize_t(int fd, void* buf, size_t len)> read_fn;
};
std::unique_ptr<KernelSource> open_kmsg_source(const KmsgOptions& options);

// Plain text: raw dmesg, dmesg -T, dmesg --time-format iso, journalctl -k (short, short-iso,
// short-precise, short-monotonic), kern.log, with or without "kernel:" prefixes. `name` is used in
// messages; fd is read to EOF (not closed). Syslog timestamps without a year get the year that
// puts them closest before now_usec() (pin it for reproducible output). With `follow` (a file still
// being written), an unterminated last line is left for the next open instead of read.
std::unique_ptr<KernelSource> open_text_source(int fd, const std::string& name,
                                               bool follow = false);

// The loaded kernel catalogs (kernel-line rules, NVIDIA Xid, AMD RAS blocks).
class KernelRules;
struct KernelRulesLoad {
  std::shared_ptr<const KernelRules> rules;  // null when there were errors
  std::vector<InputError> errors;
};
KernelRulesLoad load_kernel_rules(const std::vector<std::string>& layers);

struct KernelClassifierOptions {
  // A folded flood is emitted once no repeat came for this long (record time)...
  int64_t fold_quiet_usec = 2'000'000;
  // ...or once it spans this long, after which the next repeat starts a new event.
  int64_t fold_max_span_usec = 300'000'000;
  // If the classifier has held something without a break for this long (record time), it emits
  // everything it holds, so that the safe resume position cannot lag further behind.
  int64_t max_hold_usec = 600'000'000;
};

struct KernelClassifierStats {
  uint64_t records = 0;     // records fed
  uint64_t not_kernel = 0;  // skipped: written by userspace (facility != kernel)
  uint64_t harmless = 0;    // matched a known-harmless pattern
  uint64_t events = 0;      // events emitted
  uint64_t folded = 0;      // occurrences merged into an earlier event of the same flood
  uint64_t lost = 0;        // records the sources said were lost
};

class KernelClassifier {
 public:
  KernelClassifier(std::shared_ptr<const KernelRules> rules, std::string host,
                   const KernelClassifierOptions& options = {});
  ~KernelClassifier();
  KernelClassifier(const KernelClassifier&) = delete;
  KernelClassifier& operator=(const KernelClassifier&) = delete;

  // The position the records will be read after (the saved resume position); it is what
  // safe_resume_position() answers while the very first records fed are still held.
  void set_initial_position(std::string position);

  // Feeds one record; appends events that are complete. An event that may still grow (a call
  // trace, a flood) is held until it ends or flush() is called.
  void feed(const KernelRecord& record, std::vector<KernelEvent>& out);
  // Emits held events whose last record was fed at least `idle_usec` ago (monotonic clock), or
  // all of them when idle_usec is 0 (end of input).
  void flush(std::vector<KernelEvent>& out, int64_t idle_usec = 0);
  // Where a restart must resume so that nothing held is lost (see the file comment). Empty when
  // nothing has been fed and no initial position was set.
  std::string safe_resume_position() const;

  KernelClassifierStats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether an event counts toward hw_dmesg_gpu_errors_total (GPU and GPU-driver kinds).
bool is_gpu_error(const KernelEvent& e);

}  // namespace triage::collector
