// What the agent's live record (common/model.h LiveRecord, in the evidence) means for a report:
// while the job still runs and its stall is flagged, the report is the interim hang report (status
// hanging, rendered "hang (live)"); after the job, the post-mortem says when the stall was flagged,
// at which step, what was done, and for an early cancel the GPU-hours it saved against the job's
// time limit. The record is the agent's (trusted) observation of the user's log: its early
// warnings quote the log and are shown as such.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/model.h"

namespace triage {

struct LiveSection {
  LiveRecord record;
  bool interim = false;  // the job runs and its stall is flagged: this is the interim report
  std::optional<double> hours_saved;      // an agent cancel: the time limit it left unused
  std::optional<double> gpu_hours_saved;  // ... times the job's GPUs, when slurmctld listed them
  std::string summary;  // one or two sentences for "What happened" and the status basis
};

// Contract: the report's view of `record` for a job that is `alive` (Slurm says it has not ended);
// interim only for a flagged stall that did not resume; the summary names the flag time, the
// step and line, the action and its outcome, and the GPU-hours an agent cancel saved.
LiveSection live_section(const LiveRecord& record, const JobFacts& job, bool alive);

}  // namespace triage
