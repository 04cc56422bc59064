// Which of the node's events belong to a job:
//   1. the kernel named the job: the event's cgroup path holds job_<id> (an OOM kill's
//      task_memcg), so it is that job's and no other's;
//   2. the event names a pid the plugin registered for one of the job's tasks, while that task ran;
//   3. a node-wide event (a GPU UE, an Xid, a ring timeout, a stuck sysfs read...) that names no
//      job and no registered process belongs to every job on the node at the time (from the job's
//      start to its end plus a grace period).
// An OOM kill that names neither a job nor a registered pid belongs to nobody: it was some other
// process.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "agent/node/event_store.h"
#include "agent/node/job_table.h"
#include "common/model.h"

namespace triage::agent {

struct AttributionWindow {
  int64_t start_usec = 0;  // 0: unknown
  int64_t end_usec = 0;    // 0: still running
};

// How much work one attribution did; lets tests and the soak bench show that answering for one
// job does not walk the node's whole history.
struct AttributionStats {
  size_t events_examined = 0;  // events the rules were applied to
  size_t tasks_examined = 0;   // registered tasks compared against an event's pid
};

struct AttributionOptions {
  int64_t grace_usec = 60LL * 1000000;
  int64_t now_usec = 0;
  AttributionStats* stats = nullptr;  // counts the work when set
};

// The job's window on this node: its first start message to its end, widened by `hint` (times
// slurmctld gave the leader) when the node saw less.
AttributionWindow job_window(const JobRecord& job, const AttributionWindow& hint = {});

// The window a caller who is not root or SlurmUser may ask about (GET /v1/jobs/<id>/events as the
// job's owner): `asked` (a bound of 0 means the job's own) kept inside the job's own span on this
// node, its first start to its end (now while it runs), each widened by `margin_usec` (the
// EvidenceSettleDelay the job-end path waits for the kernel's last lines). A job whose start this
// node never saw has no span: the answer is then the job's own window alone. Node-wide events
// outside the span (other users' processes among them) are never the owner's to read.
AttributionWindow owner_window(const JobRecord& job, const AttributionWindow& asked,
                               int64_t margin_usec, int64_t now_usec);

// The job a registered pid belonged to at `time_usec`, if any.
std::optional<uint64_t> job_of_pid(const JobTable& jobs, int64_t pid, int64_t time_usec,
                                   int64_t grace_usec, AttributionStats* stats = nullptr);

bool belongs_to_job(const KernelEvent& e, const JobRecord& job, const AttributionWindow& window,
                    const JobTable& jobs, const AttributionOptions& options);

// The job's events among `events`, by time. Applies the rules to every event given.
std::vector<KernelEvent> events_for_job(const std::vector<KernelEvent>& events,
                                        const JobRecord& job, const AttributionWindow& window,
                                        const JobTable& jobs, const AttributionOptions& options);

// The same answer from the node's store, applying the rules only to the events its indexes say
// could be the job's (those naming it or its pids, or active in its window).
std::vector<KernelEvent> events_for_job(const EventStore& store, const JobRecord& job,
                                        const AttributionWindow& window, const JobTable& jobs,
                                        const AttributionOptions& options);

}  // namespace triage::agent
