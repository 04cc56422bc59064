#include "spank/preflight_client.h"

#include <cstdio>
#include <cstring>
#include <ctime>

#include "spank/agent_link.h"
#include "spank/slice.h"

namespace triage::spank {

namespace {

int64_t now_ms() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

void set_why(PreflightResult* r, const char* text) noexcept {
  (void)std::snprintf(r->why, sizeof(r->why), "%s", text);
}

size_t skip_blanks(std::string_view s, size_t i) noexcept {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t'))
    ++i;
  return i;
}

// Where the value of top-level-looking key `key` ("\"fit\"") starts, or npos. The agent's answer
// is flat in the keys read here; a key that also appears inside a string value would have to be
// followed by a colon to be taken, which the agent's escaping of quotes rules out.
size_t value_of(std::string_view s, std::string_view key) noexcept {
  size_t from = 0;
  for (;;) {
    const size_t k = s.find(key, from);
    if (k == std::string_view::npos) return std::string_view::npos;
    size_t i = skip_blanks(s, k + key.size());
    if (i < s.size() && s[i] == ':') return skip_blanks(s, i + 1);
    from = k + 1;
  }
}

// Copies the JSON string starting at `i` (its opening quote) into `out`, undoing the simple
// escapes; \uXXXX becomes '?'. False when it is not a complete string.
bool copy_string(std::string_view s, size_t i, char* out, size_t len) noexcept {
  if (i >= s.size() || s[i] != '"' || len == 0) return false;
  size_t n = 0;
  for (++i; i < s.size(); ++i) {
    char c = s[i];
    if (c == '"') {
      out[n] = '\0';
      return true;
    }
    if (c == '\\') {
      if (++i >= s.size()) return false;
      switch (s[i]) {
        case 'n':
        case 'r':
        case 't':
          c = ' ';
          break;
        case 'u':
          if (i + 4 >= s.size()) return false;
          i += 4;
          c = '?';
          break;
        default:
          c = s[i];
      }
    }
    if (n + 1 < len) out[n++] = c;
  }
  return false;
}

}  // namespace

bool preflight_request(uint32_t job_id, const char* host, const char* gpus, char* out,
                       size_t len) noexcept {
  // host and gpus come from slurmd (the node's name, SLURM_JOB_GPUS); neither may carry a quote
  // or a backslash into the line.
  for (const char* s : {host, gpus}) {
    if (s == nullptr) continue;
    for (const char* p = s; *p != '\0'; ++p) {
      if (*p == '"' || *p == '\\' || static_cast<unsigned char>(*p) < 0x20) return false;
    }
  }
  int n = 0;
  if (gpus != nullptr) {
    n = std::snprintf(out, len,
                      "{\"op\":\"preflight\",\"job_id\":%u,\"host\":\"%s\",\"gpus\":\"%s\"}\n",
                      job_id, host, gpus);
  } else {
    n = std::snprintf(out, len, "{\"op\":\"preflight\",\"job_id\":%u,\"host\":\"%s\"}\n", job_id,
                      host);
  }
  return n > 0 && static_cast<size_t>(n) < len;
}

PreflightResult parse_preflight_answer(std::string_view answer) noexcept {
  PreflightResult r;
  if (!reply_is_ok(answer)) {
    (void)std::snprintf(r.why, sizeof(r.why), "the agent did not answer ok: %.*s",
                        static_cast<int>(answer.size() > 150 ? 150 : answer.size()), answer.data());
    return r;
  }
  const size_t fit = value_of(answer, "\"fit\"");
  if (fit == std::string_view::npos) {
    set_why(&r, "the agent's answer has no \"fit\"");
    return r;
  }
  if (slice(answer, fit, 4) == "true") {
    r.outcome = PreflightOutcome::kFit;
    return r;
  }
  if (slice(answer, fit, 5) != "false") {
    set_why(&r, "the agent's \"fit\" is neither true nor false");
    return r;
  }
  const size_t reason = value_of(answer, "\"reason\"");
  constexpr std::string_view kPrefix = "triage preflight: ";
  if (reason == std::string_view::npos ||
      !copy_string(answer, reason, r.reason, sizeof(r.reason)) ||
      std::strncmp(r.reason, kPrefix.data(), kPrefix.size()) != 0 ||
      std::strlen(r.reason) == kPrefix.size()) {
    // An unfit answer that names no evidence is not one to drain a node on.
    r.reason[0] = '\0';
    set_why(&r, "the agent said unfit without a \"triage preflight: ...\" reason");
    return r;
  }
  r.outcome = PreflightOutcome::kUnfit;
  return r;
}

PreflightResult ask_preflight(const char* socket_path, int budget_ms,
                              std::string_view request) noexcept {
  const int64_t start = now_ms();
  char reply[8192];
  std::string_view answer;
  PreflightResult r;
  if (exchange_with_agent(socket_path, budget_ms, request, reply, sizeof(reply), &answer, r.why,
                          sizeof(r.why))) {
    r = parse_preflight_answer(answer);
  }
  r.elapsed_ms = now_ms() - start;
  return r;
}

}  // namespace triage::spank
