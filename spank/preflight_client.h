// The preflight question the prolog asks the node agent (plugstack preflight=on; docs/agent.md,
// "Preflight"): may this job land here? The agent answers from what it already holds; the plugin
// waits at most kPreflightBudgetMs for it and lets the job go ahead on anything but a clear,
// well-formed "unfit" (agent down, slow, refusing or answering garbage: fail open).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace triage::spank {

// The whole exchange (connect, send, answer) fits in this, or the job goes ahead.
inline constexpr int kPreflightBudgetMs = 50;
// The longest reason kept (Slurm shows it as the drained node's reason).
inline constexpr size_t kMaxPreflightReason = 256;

enum class PreflightOutcome {
  kFit,       // the agent says the node is fit
  kUnfit,     // the agent says it is not; `reason` is "triage preflight: ..."
  kNoAnswer,  // no usable answer in time: the job goes ahead; `why` says what happened
};

struct PreflightResult {
  PreflightOutcome outcome = PreflightOutcome::kNoAnswer;
  char reason[kMaxPreflightReason + 1] = {};
  char why[256] = {};
  int64_t elapsed_ms = 0;
};

// Builds the request line: {"op":"preflight","job_id":N,"host":"...","gpus":"0,1"}\n (gpus left
// out when null: SLURM_JOB_GPUS was not set). Returns false when it does not fit in `out`.
bool preflight_request(uint32_t job_id, const char* host, const char* gpus, char* out,
                       size_t len) noexcept;

// Reads the agent's answer line: {"ok":true,"fit":true,...} is kFit; {"ok":true,"fit":false,
// "reason":"triage preflight: ..."} is kUnfit with that reason (JSON escapes undone, cut to
// kMaxPreflightReason); anything else is kNoAnswer.
PreflightResult parse_preflight_answer(std::string_view answer) noexcept;

// Asks the agent at `socket_path`, within `budget_ms`.
PreflightResult ask_preflight(const char* socket_path, int budget_ms,
                              std::string_view request) noexcept;

}  // namespace triage::spank
