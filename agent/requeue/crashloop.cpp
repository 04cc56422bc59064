#include "agent/requeue/crashloop.h"

namespace triage::agent {

namespace {

bool failed(const OutcomeRecord& r) {
  return r.status == "failed" || r.status == "hanging";
}

// Whether `now` is further than `before`: a value where there was none, or a larger one.
bool further(const std::optional<int64_t>& now, const std::optional<int64_t>& before) {
  return now && (!before || *now > *before);
}

std::string where(const OutcomeRecord& r) {
  std::string s = r.last_step ? "step " + std::to_string(*r.last_step) : "no step seen";
  s += r.last_checkpoint ? ", checkpoint " + std::to_string(*r.last_checkpoint) : ", no checkpoint";
  return s;
}

std::string attempt_name(const OutcomeRecord& r) {
  return r.attempt ? "attempt " + std::to_string(*r.attempt) : "the attempt";
}

bool earlier_attempt(const OutcomeRecord& r, const OutcomeRecord& current) {
  if (r.attempt && current.attempt) return *r.attempt < *current.attempt;
  return r.end_time < current.end_time;
}

}  // namespace

CrashloopVerdict decide_crashloop(const std::optional<OutcomeRecord>& previous,
                                  const OutcomeRecord& current) {
  if (!previous) return {false, "no record of an earlier attempt"};
  const OutcomeRecord& p = *previous;
  if (!failed(p) || !failed(current)) return {false, "not two failures in a row"};
  if (p.attempt && current.attempt && *p.attempt + 1 != *current.attempt) {
    return {false, "no record of the attempt just before this one"};
  }
  if (!p.cls || !current.cls) return {false, "a failure of unknown class"};
  if (*p.cls != *current.cls) {
    return {false, "a different failure (" + *p.cls + ", then " + *current.cls + ")"};
  }
  if (!p.progress_known || !current.progress_known) {
    return {false, "the earlier attempt's record does not say how far it got"};
  }
  if (further(current.last_step, p.last_step) ||
      further(current.last_checkpoint, p.last_checkpoint)) {
    return {false, "progress since " + attempt_name(p) + " (" + where(p) + ", now " +
                       where(current) + ")"};
  }
  return {true, "not requeued: the same failure twice without progress (" + *current.cls + " in " +
                    attempt_name(p) + " at " + where(p) + ", and again in " +
                    attempt_name(current) + " at " + where(current) + ")"};
}

std::optional<OutcomeRecord> previous_attempt(const std::vector<OutcomeRecord>& records,
                                              const OutcomeRecord& current) {
  const OutcomeRecord* best = nullptr;
  for (const OutcomeRecord& r : records) {
    if (r.job_id != current.job_id || !earlier_attempt(r, current)) continue;
    if (best == nullptr || r.end_time > best->end_time) best = &r;
  }
  if (best == nullptr) return std::nullopt;
  return *best;
}

}  // namespace triage::agent
