// Getting one lifecycle message to the node agent without ever holding up a job: a non-blocking
// connect to the agent's socket, a send and a short wait for its acknowledgement; when any of that
// fails (no socket, refused, backlog full, no answer in time, a refusal) the same line is dropped
// into the agent's inbox directory instead (docs/protocol.md).
#pragma once

#include <cstddef>
#include <string_view>

#include "spank/plugin_config.h"

namespace triage::spank {

enum class Delivery {
  kAcked,  // the agent acknowledged the message (it is durable in its spool)
  kInbox,  // the agent did not; the message waits in the inbox for it
  kLost,   // neither worked; `why` says what happened to both
};

struct DeliveryReport {
  Delivery how = Delivery::kLost;
  char why[512] = {};  // the socket failure (and the inbox failure, when lost)
};

// Connects to the agent (its root socket, `socket_path` + kRootSocketSuffix, first; `socket_path`
// when that is not there; a listener that is neither root nor us is refused), sends `line` and
// reads the first line of its answer into `reply` (at most `reply_len` bytes), all within
// `timeout_ms`. On success `answer` is that line (without its newline, inside `reply`);
// otherwise `why` says what went wrong.
bool exchange_with_agent(const char* socket_path, int timeout_ms, std::string_view line,
                         char* reply, size_t reply_len, std::string_view* answer, char* why,
                         size_t why_len) noexcept;

// Whether an answer line is {"ok":true,...}: a plain look for "ok" followed by true, without a
// JSON parser in slurmstepd.
bool reply_is_ok(std::string_view reply) noexcept;

// Sends `line` (one JSON object ending in '\n') and waits at most `timeout_ms` in total for
// {"ok":true}: on the agent's root socket (`socket_path` + kRootSocketSuffix) when it can connect
// there, else on `socket_path`. Returns true when acknowledged; otherwise `why` says what went
// wrong.
bool send_to_agent(const char* socket_path, int timeout_ms, std::string_view line, char* why,
                   size_t why_len) noexcept;

// Writes `line` into `inbox_dir` as "<msg_id>.json" (characters outside [A-Za-z0-9._-] become
// '_'), through a temporary ".<name>.tmp" made with O_CREAT|O_EXCL|O_NOFOLLOW, mode 0600, then
// renamed into place (not synced: see agent_link.cpp). The directory is created (0700) when missing
// and must be owned by the caller and writable by nobody else. Returns false with `why` on failure.
bool write_to_inbox(const char* inbox_dir, std::string_view msg_id, std::string_view line,
                    char* why, size_t why_len) noexcept;

// send_to_agent, then write_to_inbox when that fails.
DeliveryReport deliver(const PluginConfig& cfg, std::string_view msg_id,
                       std::string_view line) noexcept;

}  // namespace triage::spank
