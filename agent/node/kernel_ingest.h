// The agent's kernel-log reader: one thread that turns the configured kernel source (journal,
// /dev/kmsg, a text file) into node events and hands them to the agent together with the position
// they cover.
//
// It owns no durable state. Every (re)start of a source resumes after the agent's durable position
// and feeds a fresh KernelClassifier whose initial position is that same position, so a restart of
// the thread, of the agent, or a kill -9 between two batches neither loses nor repeats an event
// (the two promises in collector/kernel_pipeline.h). A source that fails (no journal, an unreadable
// /dev/kmsg, broken rules) is logged once and retried with backoff; the agent keeps serving.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "collector/kernel_pipeline.h"
#include "common/model.h"
#include "common/safe_io.h"

namespace triage::agent {

struct KernelIngestOptions {
  std::string source;  // journal | kmsg | file
  std::string path;    // KernelPath: journal directory, kmsg device or text file; "" = default
  std::vector<std::string> rule_layers;  // the kernel rule layers, lowest first
  std::string host;                      // this node's name, for the events
  std::string boot_id_path = "/proc/sys/kernel/random/boot_id";  // for kmsg positions
  // Whether this machine has a systemd journal to read. When it has none and no journal
  // directory was configured, `journal` reads `kmsg_fallback` instead.
  bool journal_available = true;
  std::string kmsg_fallback = "/dev/kmsg";
  // Held events (floods, traces) idle this long on our clock go out; longer than the classifier's
  // fold window, so that wall-clock flushing does not split a flood the records would keep whole.
  int64_t flush_idle_usec = 5'000'000;
  int poll_ms = 1000;            // longest wait for records between flushes
  int64_t retry_min_ms = 1000;   // backoff after a source failure...
  int64_t retry_max_ms = 60000;  // ...doubling up to this
  int64_t reopen_ms = 1000;      // a file read to its end is looked at again this often
  collector::KernelClassifierOptions classifier;
};

// What the ingest thread is doing; shown by the agent's health report and metrics.
struct KernelIngestStatus {
  std::string source;      // what is (or was last) read: "kmsg /dev/kmsg", "system journal", ...
  std::string state;       // starting | reading | waiting | retrying | stopped
  std::string last_error;  // the latest source failure ("" once a source opened again)
  uint64_t source_errors = 0;  // failed opens and reads
  uint64_t records = 0;        // kernel records read
  uint64_t lost_records = 0;   // records the sources reported lost (kmsg overruns)
  uint64_t loss_gaps = 0;      // places where an unknown number may be lost (a vacuumed cursor)
  uint64_t events = 0;         // events handed to the agent
  uint64_t undelivered = 0;    // hand-overs the agent could not make durable yet
  bool fallback = false;       // `journal` configured, kmsg read because there is no journal
  // Monotonic start of the latest look at the source that found nothing more to read, once what
  // it had read was handed to the agent (0: none yet). The job-end pipeline waits for this to
  // pass the job's end (agent/job_end/job_end.h evidence_settled).
  int64_t caught_up_usec = 0;
};
void to_json(nlohmann::json& j, const KernelIngestStatus& s);

class KernelIngest {
 public:
  // Makes `events` durable together with the position they cover (Agent::ingest).
  using Deliver = std::function<bool(std::vector<KernelEvent> events, std::string position)>;
  // The durable position to resume after (Agent::kernel_position).
  using Position = std::function<std::string()>;

  KernelIngest(KernelIngestOptions options, Deliver deliver, Position position);
  ~KernelIngest();
  KernelIngest(const KernelIngest&) = delete;
  KernelIngest& operator=(const KernelIngest&) = delete;

  void start();
  // Asks the thread to end and returns at once; the destructor (or join()) waits for it.
  void stop();
  void join();
  // Asks the thread to look at its source again now (rather than at its next poll), so that
  // caught_up_usec soon passes the present.
  void look_again();

  KernelIngestStatus status() const;

 private:
  struct Opened;
  void run();
  // Reads one source until it is exhausted (true) or the thread stops (false). Throws when the
  // source cannot be opened or read.
  bool read_source();
  Opened open_source(const std::string& resume);
  bool deliver(std::vector<KernelEvent>& events, const std::string& position);
  // Waits up to `ms` for `fd` (if >= 0) or a stop request; false when stopping.
  bool wait(int fd, int64_t ms);
  void set_state(const std::string& state);
  void fail(const std::string& error);
  void caught_up(int64_t look_usec);

  KernelIngestOptions opts_;
  Deliver deliver_;
  Position position_;
  std::shared_ptr<const collector::KernelRules> rules_;
  UniqueFd stop_fd_;  // eventfd, readable once stop() was called
  UniqueFd wake_fd_;  // eventfd, readable after look_again()
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  std::string delivered_position_;
  // The file an exhausted session read (kmsg record file, text file) as it was when the session
  // opened it: it is read again only once its size or identity changed.
  struct FileState {
    std::string path;
    uint64_t dev = 0, ino = 0;
    int64_t size = -1;
  } file_state_;
  bool file_changed() const;
  std::string logged_error_;
  std::string announced_;  // the source the log last said it reads

  mutable std::mutex mu_;
  KernelIngestStatus status_;
};

}  // namespace triage::agent
