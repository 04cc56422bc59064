// Whether the job Slurm shows now is still the attempt the agent analysed (issue 30, case 5): a
// requeue acts on Slurm's job as it stands, and if Slurm, the user or the hang path requeued it
// since, `scontrol requeuehold` would kill the healthy new attempt and use up one of N.
#pragma once

#include <cstdint>
#include <string>

#include "common/model.h"

namespace triage::agent {

// Contract: whether `shown` is the attempt of its job that has `restart_count` and started at
// `start_time`: the same restart count (Slurm's Restarts) and, when both start times are known
// (not 0), the same start time. The one notion of "the same attempt" both action checks use: the
// post-mortem requeue's below, which also wants it ended, and the live actions' (attempt_mismatch,
// agent/live_decision.h), which want it running.
bool same_attempt(int restart_count, int64_t start_time, const JobFacts& shown);

// Contract: "" when `now` (slurmctld's record, SlurmClient::load_job) is the ended attempt
// `analysed` describes: the same job id and array task, the same restart count, the same start
// time (when the analysed facts came from slurmctld too; the epilog's is the agent's own clock),
// and an ended state rather than the PENDING, RUNNING or SUSPENDED of a next attempt. Otherwise
// one sentence saying what differs.
std::string attempt_changed(const JobFacts& analysed, const JobFacts& now);

}  // namespace triage::agent
