// The crashloop stop of --triage-requeue (issue 28 part 5): a job that fails the same way twice in
// a row without getting any further is not requeued again, whatever N allows. The reference
// product (seed 003, "checkpoint-based requeue early stop") stops a job after consecutive failed
// attempts that saved no new checkpoint; here two attempts suffice, and a later step counts as
// progress as well as a later checkpoint, because a job that checkpoints rarely still shows in its
// steps whether a retry helped. Pure: agent/requeue/job_requeue.cpp finds the records.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/history/outcome_record.h"

namespace triage::agent {

struct CrashloopVerdict {
  bool stop = false;
  std::string reason;  // one sentence, for the log, the report and the requeue decision
};

// Contract: stop when `previous` is the attempt just before `current`, both failed (or hung) with
// the same known class, both records know their progress and `current` got no further (no later
// last step and no later checkpoint than `previous`); an absent previous record, an unknown
// class, or a record that does not know its progress (an older agent's) is never called a
// crashloop.
CrashloopVerdict decide_crashloop(const std::optional<OutcomeRecord>& previous,
                                  const OutcomeRecord& current);

// Contract: the newest record among `records` of `current`'s job from an earlier attempt than
// `current` (a lower attempt number when both know theirs, else an earlier end time); nullopt
// when there is none.
std::optional<OutcomeRecord> previous_attempt(const std::vector<OutcomeRecord>& records,
                                              const OutcomeRecord& current);

}  // namespace triage::agent
