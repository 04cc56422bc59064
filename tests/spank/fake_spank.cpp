#include "tests/spank/fake_spank.h"

#include <sys/types.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>

struct spank_handle {
  int unused = 0;
};

namespace triage::testing {

namespace {

// <slurm/slurm_errno.h> defines ESPANK_SUCCESS as a plain 0, outside the enum.
constexpr spank_err_t kOk = static_cast<spank_err_t>(ESPANK_SUCCESS);

spank_handle g_handle;

__attribute__((format(printf, 2, 0))) void log_line(const char* level, const char* fmt,
                                                    va_list ap) {
  char buf[4096];
  (void)std::vsnprintf(buf, sizeof(buf), fmt, ap);  // a longer line is cut, which is fine here
  fake_spank().log.push_back(std::string(level) + ": " + buf);
}

template <typename T>
spank_err_t put_item(spank_item_t item, va_list ap) {
  const auto it = fake_spank().items.find(item);
  T* out = va_arg(ap, T*);
  if (it == fake_spank().items.end()) return ESPANK_NOT_AVAIL;
  *out = static_cast<T>(it->second);
  return kOk;
}

}  // namespace

FakeSpank& fake_spank() {
  static FakeSpank state;
  return state;
}

spank_t fake_handle() {
  return &g_handle;
}

bool FakeSpank::logged(const std::string& needle) const {
  for (const auto& l : log) {
    if (l.find(needle) != std::string::npos) return true;
  }
  return false;
}

}  // namespace triage::testing

using triage::testing::fake_spank;
using triage::testing::kOk;

extern "C" {

spank_context_t spank_context(void) {
  return fake_spank().context;
}

int spank_remote(spank_t /*sp*/) {
  return fake_spank().context == S_CTX_REMOTE ? 1 : 0;
}

const char* spank_strerror(spank_err_t err) {
  static char buf[32];
  (void)std::snprintf(buf, sizeof(buf), "spank error %d", static_cast<int>(err));
  return buf;
}

spank_err_t spank_option_register(spank_t /*sp*/, struct spank_option* opt) {
  if (opt == nullptr || opt->name == nullptr || opt->usage == nullptr) return ESPANK_BAD_ARG;
  fake_spank().options.push_back(
      {opt->name, opt->arginfo == nullptr ? "" : opt->arginfo, opt->usage, opt->has_arg, opt->cb});
  return kOk;
}

spank_err_t spank_option_getopt(spank_t /*sp*/, struct spank_option* opt, char** optarg) {
  static std::string value;
  if (opt == nullptr) return ESPANK_BAD_ARG;
  if (std::strcmp(opt->name, "triage") != 0) {
    const auto it = fake_spank().other_options.find(opt->name);
    if (it == fake_spank().other_options.end()) return ESPANK_ERROR;
    value = it->second;
    if (optarg != nullptr) *optarg = value.data();
    return kOk;
  }
  if (fake_spank().getopt_null_arg) {
    if (optarg != nullptr) *optarg = nullptr;
    return kOk;
  }
  if (!fake_spank().getopt_value) return ESPANK_ERROR;
  value = *fake_spank().getopt_value;
  if (optarg != nullptr) *optarg = value.data();
  return kOk;
}

spank_err_t spank_get_item(spank_t /*sp*/, spank_item_t item, ...) {
  va_list ap;
  // Slurm's prototype (slurm/spank.h) puts the variable arguments after an enum, which clang flags
  // as undefined; every ABI Slurm runs on passes the enum as the int it promotes to, and
  // slurmstepd's own spank_get_item starts its va_list the same way.
#if defined(__clang__)
#pragma clang diagnostic push
#pragma clang diagnostic ignored "-Wvarargs"
#endif
  va_start(ap, item);
#if defined(__clang__)
#pragma clang diagnostic pop
#endif
  spank_err_t rc = ESPANK_BAD_ARG;
  switch (item) {
    case S_JOB_UID:
      rc = triage::testing::put_item<uid_t>(item, ap);
      break;
    case S_JOB_GID:
      rc = triage::testing::put_item<gid_t>(item, ap);
      break;
    case S_JOB_ID:
    case S_JOB_STEPID:
    case S_TASK_GLOBAL_ID:
    case S_JOB_ARRAY_ID:
    case S_JOB_ARRAY_TASK_ID:
      rc = triage::testing::put_item<uint32_t>(item, ap);
      break;
    case S_TASK_ID:
    case S_TASK_EXIT_STATUS:
      rc = triage::testing::put_item<int>(item, ap);
      break;
    case S_TASK_PID:
      rc = triage::testing::put_item<pid_t>(item, ap);
      break;
    default:
      rc = ESPANK_NOT_AVAIL;
  }
  va_end(ap);
  return rc;
}

spank_err_t spank_getenv(spank_t /*sp*/, const char* var, char* buf, int len) {
  const auto it = fake_spank().job_env.find(var);
  if (it == fake_spank().job_env.end()) return ESPANK_ENV_NOEXIST;
  if (len <= 0 || it->second.size() >= static_cast<size_t>(len)) return ESPANK_NOSPACE;
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return kOk;
}

spank_err_t spank_job_control_setenv(spank_t /*sp*/, const char* name, const char* value,
                                     int /*overwrite*/) {
  if (fake_spank().context == S_CTX_REMOTE) return ESPANK_NOT_LOCAL;
  fake_spank().control_env[name] = value;
  return kOk;
}

// Slurm's printf-style loggers, each recording "<level>: <message>".
#define TRIAGE_FAKE_SLURM_LOGGER(fn, level)    \
  void fn(const char* fmt, ...) {              \
    va_list ap;                                \
    va_start(ap, fmt);                         \
    triage::testing::log_line(level, fmt, ap); \
    va_end(ap);                                \
  }
TRIAGE_FAKE_SLURM_LOGGER(slurm_error, "error")
TRIAGE_FAKE_SLURM_LOGGER(slurm_info, "info")
TRIAGE_FAKE_SLURM_LOGGER(slurm_verbose, "verbose")
TRIAGE_FAKE_SLURM_LOGGER(slurm_debug, "debug")
#undef TRIAGE_FAKE_SLURM_LOGGER

}  // extern "C"
