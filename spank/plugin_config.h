// The plugin's settings: its arguments on the plugstack line and the user's --triage choice.
//
//   optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_triage.so default=basic
//
// Arguments (all optional): default=off|basic|full, socket=PATH (the agent's Unix socket),
// inbox=DIR (where messages go when the agent does not answer), timeout_ms=N (how long to wait for
// the agent's acknowledgement, 1..1000), hang_action=allow|notify, requeue=allow|refuse,
// preflight=on|off (the prolog asks the agent whether the node is fit; docs/agent.md). In socket=
// and inbox=, %n stands for the node's name (as in SlurmdSpoolDir, for several slurmd on one host)
// and %% for a percent sign. A bad argument is reported and ignored; it never fails a job.
#pragma once

#include <cstddef>
#include <string_view>

namespace triage::spank {

enum class Mode { kOff, kBasic, kFull };

std::string_view to_string(Mode m) noexcept;

// Parses a --triage value. A bare `--triage` (no value; Slurm forwards it as "(null)") asks for the
// most: full. Returns false for anything else that is not off, basic or full.
bool parse_mode(const char* value, Mode* out) noexcept;

// What the user asked to happen when the agent sees the job hang (--triage-on-hang).
enum class HangAction { kNotify, kCancel, kRequeue };

std::string_view to_string(HangAction a) noexcept;

// Parses a --triage-on-hang value: notify, cancel or requeue. A bare option (no value) and
// anything else are refused: the choice that may end a job is never guessed.
bool parse_hang_action(const char* value, HangAction* out) noexcept;

// The most requeues --triage-requeue=N may ask for (Slurm's own MaxBatchRequeue defaults to 5).
inline constexpr int kMaxRequeues = 10;

// Parses a --triage-requeue value: a bare option (no value, "(null)") asks for one requeue; a
// decimal 0..kMaxRequeues for that many (0: none). Anything else is refused.
bool parse_requeue_count(const char* value, int* out) noexcept;

inline constexpr std::string_view kDefaultSocket = "/run/slurm-triage/agent.sock";
// The agent's root-only socket is the socket's path with this appended (agent/server/socket_api.h
// has the same rule); the plugin sends there first.
inline constexpr std::string_view kRootSocketSuffix = ".root";
inline constexpr std::string_view kDefaultInbox = "/var/spool/slurm-triage/inbox";
inline constexpr int kDefaultTimeoutMs = 10;
inline constexpr size_t kMaxPathBytes = 4096;

struct PluginConfig {
  Mode default_mode = Mode::kBasic;
  char socket_path[kMaxPathBytes] = {};
  char inbox_dir[kMaxPathBytes] = {};
  int timeout_ms = kDefaultTimeoutMs;
  // hang_action=allow: the admin lets users' cancel/requeue choices be carried out.
  bool hang_action_allowed = false;
  // requeue=allow: the admin lets the agent requeue --triage-requeue jobs around failed nodes.
  bool requeue_allowed = false;
  // preflight=on: the prolog asks the agent whether this node is fit and fails when it is not.
  bool preflight = false;
};

// Called once per rejected argument with a human sentence ("unknown argument 'foo=1' (expected
// default=, socket=, inbox=, timeout_ms=, hang_action=, requeue= or preflight=)").
using ConfigErrorSink = void (*)(const char* message, void* ctx);

// Fills `cfg` from the plugstack arguments, starting from the defaults. Returns the number of
// arguments that were rejected (each also reported through `sink` when it is not null).
int parse_plugin_args(int argc, const char* const* argv, PluginConfig* cfg, ConfigErrorSink sink,
                      void* sink_ctx) noexcept;

// Replaces %n in `pattern` by `node` ('/' in the name becomes '_') and %% by %; any other %x is
// kept as it is. Returns false (and leaves `out` empty) when the result does not fit.
bool expand_node_pattern(const char* pattern, const char* node, char* out, size_t len) noexcept;

// `cfg` with %n expanded in its socket and inbox paths.
void config_for_node(const PluginConfig& cfg, const char* node, PluginConfig* out) noexcept;

}  // namespace triage::spank
