// Training jobs' stdout for the live-follower benchmarks: Megatron-style iteration lines (the step
// lines the live progress reads), one per write, at a steady rate, from a process of their own so
// that the writing is not counted as the follower's CPU.
#pragma once

#include <sys/types.h>

#include <ctime>
#include <optional>
#include <string>
#include <vector>

namespace triage::bench {

// `t` moved on by `ns` nanoseconds.
timespec add_ns(timespec t, long ns);

// Sleeps until `t` on CLOCK_MONOTONIC, through signals.
void sleep_until(const timespec& t);

// Forks a writer that appends one step line to every one of `logs` (which must exist) `rate`
// times a second until it is killed; with `as_uid`, it drops to that uid and gid first, as the
// job's own processes write as its owner. Returns the writer's pid.
pid_t start_training_log_writer(const std::vector<std::string>& logs, int rate,
                                std::optional<uid_t> as_uid = std::nullopt,
                                std::optional<gid_t> as_gid = std::nullopt);

}  // namespace triage::bench
