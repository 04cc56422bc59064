// What a live hang costs and what acting on it saved, in GPU-hours: the agent counts the hours
// burnt while a job was stalled (a metric), the analyzer reports what an early cancel saved.
#pragma once

#include <cstdint>
#include <optional>

#include "common/model.h"

namespace triage {

// Contract: GPU-hours of `gpus` GPUs over [from_usec, to_usec]; 0 for an empty or reversed span or
// no GPUs.
double gpu_hours(int64_t gpus, int64_t from_usec, int64_t to_usec);

// Contract: the GPU-hours an early cancel saved against the job's time limit, its GPUs from the
// cancel until start + time limit; nothing unless the agent cancelled the job (without an error)
// and its start, time limit and GPU count are known.
std::optional<double> gpu_hours_saved(const LiveRecord& live, const JobFacts& job);

}  // namespace triage
