// The contract between the kernel-log half of the collector and its users (the agent's ingest
// loop, the `slurm-triage kernel` command, tests and benchmarks). A KernelSource yields raw
// records; a KernelClassifier turns them into KernelEvents using the kernel rule catalogs.
//
// Exactly-once across restarts rests on two promises:
//  1. Event ids are a pure function of the records that produced them (boot id + the sequence
//     number or journal cursor of the event's first record), so replaying records yields the same
//     ids and the agent can drop what it already has.
//  2. safe_resume_position() never moves past a record whose event has not been emitted in full,
//     so a restart that resumes there loses nothing that was still being assembled (multi-line
//     records, folded floods).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/model.h"

namespace triage::collector {

struct KernelRecord {
  std::string text;           // one line of kernel text, without the trailing newline
  int priority = -1;          // syslog priority 0..7, when the source knows it
  int64_t realtime_usec = 0;  // wall clock; 0 when unknown (plain dmesg without -T)
  int64_t monotonic_usec = -1;  // time since boot, when known ("[  123.456789]", kmsg, journal)
  std::string boot_id;
  uint64_t seq = 0;      // kmsg sequence number, or a running line number for text input
  std::string position;  // where to resume *after* this record: a journal cursor, "kmsg:<boot>:<seq>"
  std::string host;      // _HOSTNAME when the source knows it
};

class KernelSource {
 public:
  virtual ~KernelSource() = default;
  // Appends whatever records are available, waiting at most `timeout_ms` for the first one.
  // Returns false once the source is exhausted for good (end of a text file); live sources
  // (journal, kmsg) never return false. Throws std::runtime_error on unrecoverable errors.
  virtual bool read(std::vector<KernelRecord>& out, int timeout_ms) = 0;
  // A file descriptor that becomes readable when records may be available, or -1.
  virtual int wait_fd() const { return -1; }
  // Records the source knows it lost (kmsg overrun), since it was opened.
  virtual uint64_t lost_records() const { return 0; }
  virtual std::string describe() const = 0;
};

struct JournalOptions {
  std::string directory;            // journal directory; empty = the system journal
  std::vector<std::string> files;   // explicit journal files (tests); overrides directory
  std::string resume_after;         // cursor to resume after; empty = from the start (or tail)
  bool start_at_tail = false;       // with no cursor: only new records
};
std::unique_ptr<KernelSource> open_journal_source(const JournalOptions& options);

struct KmsgOptions {
  std::string path = "/dev/kmsg";
  std::string resume_after;  // "kmsg:<boot>:<seq>"; ignored when the boot id differs
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";
};
std::unique_ptr<KernelSource> open_kmsg_source(const KmsgOptions& options);

// Plain text: raw dmesg, dmesg -T, journalctl -k, with or without "kernel:" prefixes. `name` is
// used in messages; fd is read to EOF (not closed).
std::unique_ptr<KernelSource> open_text_source(int fd, const std::string& name);

// The loaded kernel catalogs (kernel-line rules, NVIDIA Xid, AMD RAS blocks).
class KernelRules;
struct KernelRulesLoad {
  std::shared_ptr<const KernelRules> rules;  // null when there were errors
  std::vector<InputError> errors;
};
KernelRulesLoad load_kernel_rules(const std::vector<std::string>& layers);

class KernelClassifier {
 public:
  KernelClassifier(std::shared_ptr<const KernelRules> rules, std::string host);
  ~KernelClassifier();
  KernelClassifier(const KernelClassifier&) = delete;
  KernelClassifier& operator=(const KernelClassifier&) = delete;

  // Feeds one record; appends events that are complete. An event that may still grow (a call
  // trace, a flood) is held until it ends or flush() is called.
  void feed(const KernelRecord& record, std::vector<KernelEvent>& out);
  // Emits held events whose last record is older than `idle_usec` (monotonic since the last
  // feed), or all of them when idle_usec is 0.
  void flush(std::vector<KernelEvent>& out, int64_t idle_usec = 0);
  // Where a restart must resume so that nothing held is lost (see the file comment). Empty when
  // nothing has been fed.
  std::string safe_resume_position() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace triage::collector
