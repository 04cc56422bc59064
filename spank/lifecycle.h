// The pieces every lifecycle message shares (docs/protocol.md, "Local socket"): its op, a msg_id
// unique to this sender, the host and the wall-clock time; plus the strict parsing of the numbers
// Slurm hands the epilog in its environment.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "spank/json_line.h"

namespace triage::spank {

inline constexpr size_t kMaxMsgIdBytes = 320;

// This node's Slurm name: SLURMD_NODENAME (set by slurmd and slurmstepd) or the host name.
void node_name(char* out, size_t len) noexcept;

int64_t wall_clock_usec() noexcept;

// Starts a message: {"op":..., "msg_id":"<host>:<pid>:<usec>:<n>", "host":..., "time_usec":...}.
// The msg_id is also copied to `msg_id` (at least kMaxMsgIdBytes) for the inbox file name.
void begin_message(JsonLine& line, std::string_view op, const char* host, char* msg_id) noexcept;

// Whole-string decimal parses with range checks; false for empty, junk or overflow.
bool parse_int_strict(const char* s, int64_t* out) noexcept;

// Slurm's step ids as people know them: "batch", "extern", "interactive", "pending" or the number.
void step_name(uint32_t step_id, char* out, size_t len) noexcept;

// Adds array_job_id and array_task_id as slurmstepd knows them for the batch step (spank_get_item
// S_JOB_ARRAY_ID, S_JOB_ARRAY_TASK_ID): nothing for a job that is not an array task (id 0 or
// NO_VAL, task NO_VAL). Other steps take them from the user's environment (slurmstepd_job.c), so
// the caller passes them only for the batch step.
void add_array_ids(JsonLine& line, uint32_t array_job_id, uint32_t array_task_id) noexcept;

// Adds the decoded form of a raw wait status next to it: exit_code, or signal and core_dumped.
void add_decoded_wait_status(JsonLine& line, int wait_status) noexcept;

}  // namespace triage::spank
