#include "spank/lifecycle.h"

#include <slurm/slurm.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace triage::spank {

void node_name(char* out, size_t len) noexcept {
  if (len == 0) return;
  const char* env = std::getenv("SLURMD_NODENAME");
  if (env != nullptr && *env != '\0') {
    (void)std::snprintf(out, len, "%s", env);
    return;
  }
  if (gethostname(out, len) != 0) {
    (void)std::snprintf(out, len, "unknown");
    return;
  }
  out[len - 1] = '\0';
}

int64_t wall_clock_usec() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

void begin_message(JsonLine& line, std::string_view op, const char* host, char* msg_id) noexcept {
  // Unique per sender even for two messages in the same microsecond (task_exit of many ranks).
  static unsigned long counter = 0;
  const int64_t now = wall_clock_usec();
  (void)std::snprintf(msg_id, kMaxMsgIdBytes, "%.255s:%ld:%lld:%lu", host,
                      static_cast<long>(getpid()), static_cast<long long>(now), ++counter);
  line.add("op", op);
  line.add("msg_id", msg_id);
  line.add("host", host);
  line.add("time_usec", now);
}

bool parse_int_strict(const char* s, int64_t* out) noexcept {
  if (s == nullptr || *s == '\0') return false;
  const char* p = s;
  if (*p == '-') ++p;
  if (*p < '0' || *p > '9') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s, &end, 10);
  if (errno != 0 || end == nullptr || *end != '\0') return false;
  *out = v;
  return true;
}

void step_name(uint32_t step_id, char* out, size_t len) noexcept {
  switch (step_id) {
    case SLURM_PENDING_STEP:
      (void)std::snprintf(out, len, "pending");
      return;
    case SLURM_EXTERN_CONT:
      (void)std::snprintf(out, len, "extern");
      return;
    case SLURM_BATCH_SCRIPT:
      (void)std::snprintf(out, len, "batch");
      return;
    case SLURM_INTERACTIVE_STEP:
      (void)std::snprintf(out, len, "interactive");
      return;
    default:
      (void)std::snprintf(out, len, "%u", step_id);
  }
}

void add_array_ids(JsonLine& line, uint32_t array_job_id, uint32_t array_task_id) noexcept {
  if (array_job_id == 0 || array_job_id == NO_VAL || array_task_id == NO_VAL) return;
  line.add_unsigned("array_job_id", array_job_id);
  line.add_unsigned("array_task_id", array_task_id);
}

void add_decoded_wait_status(JsonLine& line, int wait_status) noexcept {
  if (WIFEXITED(wait_status)) {
    line.add("exit_code", static_cast<int64_t>(WEXITSTATUS(wait_status)));
  } else if (WIFSIGNALED(wait_status)) {
    line.add("signal", static_cast<int64_t>(WTERMSIG(wait_status)));
    line.add_bool("core_dumped", WCOREDUMP(wait_status) != 0);
  }
}

}  // namespace triage::spank
