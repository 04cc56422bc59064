// spank_triage.so: the SPANK side of slurm-triage. It registers --triage[=off|basic|full] and
// --triage-on-hang=notify|cancel|requeue and --triage-requeue[=N], and tells the node agent about
// task starts and exits (from slurmstepd, as root) and about job start and end (slurmd's prolog and
// epilog). Every callback returns 0 whatever happens: a missing agent, a bad argument or a full
// disk never fails, delays or drains anything. The one exception is opt-in: with preflight=on the
// prolog fails when the agent clearly says the node is unfit for the job (and waits at most 50 ms
// for it to say so). Nothing here throws (the plugin is built with
// -fno-exceptions) and nothing allocates on the message path.
#include <sys/types.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <slurm/slurm.h>  // NO_VAL, SLURM_BATCH_SCRIPT

// <slurm/spank.h> declares the callbacks outside its own extern "C" block.
extern "C" {
#include <slurm/spank.h>
}

#include "spank/agent_link.h"
#include "spank/json_line.h"
#include "spank/lifecycle.h"
#include "spank/plugin_config.h"
#include "spank/preflight_client.h"

// SPANK_PLUGIN(triage, 1) would give these internal linkage in C++; Slurm dlsym()s them.
extern "C" const char plugin_name[] = "triage";
extern "C" const char plugin_type[] = "spank";
extern "C" const unsigned int plugin_version = SLURM_VERSION_NUMBER;

namespace {

using triage::spank::HangAction;
using triage::spank::JsonLine;
using triage::spank::Mode;
using triage::spank::PluginConfig;

PluginConfig g_config;
bool g_config_loaded = false;

// What --triage said, as Slurm handed it to the option callback (client side at submission,
// slurmstepd side when the step starts).
bool g_option_seen = false;
Mode g_option_mode = Mode::kBasic;

char g_option_name[] = "triage";
char g_option_arginfo[] = "off|basic|full";
char g_option_usage[] =
    "Write triage.md (why the job ended, with evidence) into the job directory: off, basic "
    "(default unless the admin chose otherwise) or full (also per-rank logs and metrics "
    "playbooks). A bare --triage means full. SLURM_TRIAGE=<mode> in the environment does the "
    "same.";

int option_callback(int val, const char* optarg, int remote);

spank_option g_option = {g_option_name, g_option_arginfo, g_option_usage, 2, 0, option_callback};

char g_hang_option_name[] = "triage-on-hang";
char g_hang_option_arginfo[] = "notify|cancel|requeue";
char g_hang_option_usage[] =
    "What happens when slurm-triage sees the job hang while it runs: notify (default: record it, "
    "write an interim triage.md, mark the job's AdminComment), cancel or requeue (only where the "
    "admin allows it, and only once the hang is corroborated or has lasted twice the threshold).";

int hang_option_callback(int val, const char* optarg, int remote);

spank_option g_hang_option = {g_hang_option_name,  g_hang_option_arginfo, g_hang_option_usage, 1, 0,
                              hang_option_callback};

char g_requeue_option_name[] = "triage-requeue";
char g_requeue_option_arginfo[] = "N";
char g_requeue_option_usage[] =
    "When the job (a batch job) fails because of a node (platform blame on kernel or Slurm "
    "evidence, or a node the cluster's history marks as suspect), let slurm-triage requeue it up "
    "to N times (default 1) with those nodes excluded. Only where the admin allows it; never for "
    "failures of the program, its configuration or its input.";

int requeue_option_callback(int val, const char* optarg, int remote);

spank_option g_requeue_option = {
    g_requeue_option_name,  g_requeue_option_arginfo, g_requeue_option_usage, 2, 0,
    requeue_option_callback};

bool daemon_context() {
  const spank_context_t ctx = spank_context();
  return ctx == S_CTX_REMOTE || ctx == S_CTX_SLURMD || ctx == S_CTX_JOB_SCRIPT;
}

void config_error(const char* message, void* /*ctx*/) {
  // Admins read daemon logs; users running sbatch should not see plugstack typos on every submit.
  if (daemon_context()) {
    slurm_error("spank_triage: plugstack argument %s", message);
  } else {
    slurm_debug("spank_triage: plugstack argument %s", message);
  }
}

const PluginConfig& config(int ac, char** av) {
  if (!g_config_loaded) {
    triage::spank::parse_plugin_args(ac, av, &g_config, config_error, nullptr);
    g_config_loaded = true;
  }
  return g_config;
}

int option_callback(int /*val*/, const char* optarg, int remote) {
  Mode m = Mode::kBasic;
  if (!triage::spank::parse_mode(optarg, &m)) {
    if (remote == 0) {
      // At submission a typo is worth stopping for: the user is right there.
      slurm_error("--triage=%s: expected off, basic or full", optarg);
      return -1;
    }
    slurm_error("spank_triage: ignoring --triage=%s", optarg);
    return 0;
  }
  g_option_seen = true;
  g_option_mode = m;
  return 0;
}

int hang_option_callback(int /*val*/, const char* optarg, int remote) {
  HangAction a = HangAction::kNotify;
  if (triage::spank::parse_hang_action(optarg, &a)) return 0;
  if (remote == 0) {
    slurm_error("--triage-on-hang=%s: expected notify, cancel or requeue", optarg);
    return -1;
  }
  slurm_error("spank_triage: ignoring --triage-on-hang=%s", optarg);
  return 0;
}

int requeue_option_callback(int /*val*/, const char* optarg, int remote) {
  int n = 0;
  if (triage::spank::parse_requeue_count(optarg, &n)) return 0;
  if (remote == 0) {
    slurm_error("--triage-requeue=%s: expected a number of requeues from 0 to %d", optarg,
                triage::spank::kMaxRequeues);
    return -1;
  }
  slurm_error("spank_triage: ignoring --triage-requeue=%s", optarg);
  return 0;
}

// Prolog and epilog: the user's --triage-requeue as Slurm hands it over (0 when absent or
// unreadable: a requeue is never guessed).
int job_script_requeue_count(spank_t sp) {
  char* arg = nullptr;
  int n = 0;
  if (spank_option_getopt(sp, &g_requeue_option, &arg) != ESPANK_SUCCESS) return 0;
  if (!triage::spank::parse_requeue_count(arg, &n)) {
    slurm_error("spank_triage: ignoring --triage-requeue=%s (expected 0 to %d)",
                arg == nullptr ? "" : arg, triage::spank::kMaxRequeues);
    return 0;
  }
  return n;
}

// Prolog and epilog: the user's --triage-on-hang as Slurm hands it over (notify when absent or
// unreadable: a value the client did not refuse cannot be guessed into an action here).
HangAction job_script_hang_action(spank_t sp) {
  char* arg = nullptr;
  HangAction a = HangAction::kNotify;
  if (spank_option_getopt(sp, &g_hang_option, &arg) != ESPANK_SUCCESS) return a;
  if (!triage::spank::parse_hang_action(arg, &a)) {
    slurm_error("spank_triage: ignoring --triage-on-hang=%s (expected notify, cancel or requeue)",
                arg == nullptr ? "" : arg);
  }
  return a;
}

Mode mode_from_text(const char* value, const char* origin, Mode fallback) {
  Mode m = fallback;
  if (value != nullptr && !triage::spank::parse_mode(value, &m)) {
    slurm_error("spank_triage: ignoring %s=%s (expected off, basic or full)", origin, value);
    return fallback;
  }
  return m;
}

// slurmstepd: the option callback ran if --triage was given; otherwise the job's environment may
// carry the user's SLURM_TRIAGE (or its job-control copy, see init_post_opt).
Mode remote_mode(spank_t sp, const PluginConfig& cfg) {
  if (g_option_seen) return g_option_mode;
  char buf[64];
  for (const char* var : {"SLURM_SPANK_TRIAGE", "SLURM_TRIAGE"}) {
    if (spank_getenv(sp, var, buf, sizeof(buf)) == ESPANK_SUCCESS) {
      return mode_from_text(buf, var, cfg.default_mode);
    }
  }
  return cfg.default_mode;
}

// Prolog and epilog (job_script context): Slurm puts the option into the environment as
// SPANK__SLURM_SPANK_OPTION_triage_triage, read through spank_option_getopt; SPANK_TRIAGE is the
// job-control copy of the user's SLURM_TRIAGE.
Mode job_script_mode(spank_t sp, const PluginConfig& cfg) {
  char* arg = nullptr;
  if (spank_option_getopt(sp, &g_option, &arg) == ESPANK_SUCCESS) {
    return mode_from_text(arg == nullptr ? "" : arg, "--triage", cfg.default_mode);
  }
  const char* env = std::getenv("SPANK_TRIAGE");
  if (env != nullptr) return mode_from_text(env, "SLURM_TRIAGE", cfg.default_mode);
  return cfg.default_mode;
}

void send(const PluginConfig& base, const char* host, JsonLine& line, const char* msg_id,
          const char* what, uint32_t job_id) {
  const std::string_view text = line.finish();
  if (text.empty()) {
    slurm_error("spank_triage: %s for job %u does not fit in a message; not sent", what, job_id);
    return;
  }
  PluginConfig cfg;
  triage::spank::config_for_node(base, host, &cfg);
  const triage::spank::DeliveryReport r = triage::spank::deliver(cfg, msg_id, text);
  switch (r.how) {
    case triage::spank::Delivery::kAcked:
      break;
    case triage::spank::Delivery::kInbox:
      slurm_debug("spank_triage: %s for job %u left in %s (%s)", what, job_id, cfg.inbox_dir,
                  r.why);
      break;
    case triage::spank::Delivery::kLost:
      slurm_error("spank_triage: %s for job %u could not be delivered: %s", what, job_id, r.why);
      break;
  }
}

void add_env(JsonLine& line, std::string_view key, const char* var) {
  const char* v = std::getenv(var);
  if (v != nullptr) line.add(key, v);
}

void add_env_int(JsonLine& line, std::string_view key, const char* var) {
  const char* v = std::getenv(var);
  int64_t n = 0;
  if (v == nullptr) return;
  if (triage::spank::parse_int_strict(v, &n)) {
    line.add(key, n);
  } else {
    slurm_error("spank_triage: %s=%.64s is not a number; left out", var, v);
  }
}

struct JobIds {
  uint32_t job_id = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

bool job_ids(spank_t sp, JobIds* ids, const char* where) {
  if (spank_get_item(sp, S_JOB_ID, &ids->job_id) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_UID, &ids->uid) != ESPANK_SUCCESS ||
      spank_get_item(sp, S_JOB_GID, &ids->gid) != ESPANK_SUCCESS) {
    slurm_error("spank_triage: %s: the job's id, uid or gid is not available", where);
    return false;
  }
  return true;
}

// job_start (prolog) and job_end (epilog) carry the same job facts from slurmd's environment.
int job_script_message(spank_t sp, int ac, char** av, const char* op) {
  const PluginConfig& cfg = config(ac, av);
  JobIds ids;
  if (!job_ids(sp, &ids, op)) return 0;
  const Mode mode = job_script_mode(sp, cfg);

  char host[256];
  triage::spank::node_name(host, sizeof(host));
  char msg_id[triage::spank::kMaxMsgIdBytes];
  JsonLine line;
  triage::spank::begin_message(line, op, host, msg_id);
  line.add_unsigned("job_id", ids.job_id);
  line.add_unsigned("uid", ids.uid);
  line.add_unsigned("gid", ids.gid);
  line.add("mode", triage::spank::to_string(mode));
  // The admin's hang_action travels with the user's choice: it is the rule in force when this job
  // started, recorded in the agent's spool with it (docs/agent.md, "Live hangs").
  line.add("on_hang", triage::spank::to_string(job_script_hang_action(sp)));
  line.add("hang_action", cfg.hang_action_allowed ? "allow" : "notify");
  // The same for --triage-requeue and the plugstack's requeue= (docs/agent.md, "Requeue").
  line.add("requeue_max", static_cast<int64_t>(job_script_requeue_count(sp)));
  line.add("requeue", cfg.requeue_allowed ? "allow" : "refuse");
  add_env(line, "nodelist", "SLURM_NODELIST");
  add_env(line, "user", "SLURM_JOB_USER");
  add_env(line, "partition", "SLURM_JOB_PARTITION");
  add_env(line, "work_dir", "SLURM_JOB_WORK_DIR");
  add_env_int(line, "restart_count", "SLURM_JOB_RESTART_COUNT");
  // slurmd's own variables (a user's would need a SPANK_ prefix to get here). 22.05 and 24.11 set
  // only SLURM_HET_JOB_ID for the prolog and epilog; the array ones are read should a release
  // add them, and otherwise come with the batch step's task messages.
  add_env_int(line, "array_job_id", "SLURM_ARRAY_JOB_ID");
  add_env_int(line, "array_task_id", "SLURM_ARRAY_TASK_ID");
  add_env_int(line, "het_job_id", "SLURM_HET_JOB_ID");
  if (std::strcmp(op, "job_end") == 0) {
    add_env_int(line, "wait_status", "SLURM_JOB_EXIT_CODE");
    add_env_int(line, "derived_wait_status", "SLURM_JOB_DERIVED_EC");
    add_env(line, "stdout_pattern", "SLURM_JOB_STDOUT");
    add_env(line, "stderr_pattern", "SLURM_JOB_STDERR");
  }
  send(cfg, host, line, msg_id, op, ids.job_id);
  return 0;
}

struct TaskIds {
  uint32_t job_id = 0;
  uint32_t step_id = 0;
  int task = -1;
  uint32_t rank = 0;
  pid_t pid = 0;
  uid_t uid = 0;
  uint32_t array_job_id = 0;  // 0 when Slurm does not say
  uint32_t array_task_id = NO_VAL;
};

bool task_ids(spank_t sp, TaskIds* t) {
  const bool ok = spank_get_item(sp, S_JOB_ID, &t->job_id) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_JOB_STEPID, &t->step_id) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_TASK_ID, &t->task) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_TASK_GLOBAL_ID, &t->rank) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_TASK_PID, &t->pid) == ESPANK_SUCCESS &&
                  spank_get_item(sp, S_JOB_UID, &t->uid) == ESPANK_SUCCESS;
  // Optional: a job that is not an array reports nothing, and neither does a Slurm without them.
  if (ok && (spank_get_item(sp, S_JOB_ARRAY_ID, &t->array_job_id) != ESPANK_SUCCESS ||
             spank_get_item(sp, S_JOB_ARRAY_TASK_ID, &t->array_task_id) != ESPANK_SUCCESS)) {
    t->array_job_id = 0;
    t->array_task_id = NO_VAL;
  }
  return ok;
}

int task_message(spank_t sp, int ac, char** av, const char* op, bool with_exit) {
  if (spank_context() != S_CTX_REMOTE) return 0;
  const PluginConfig& cfg = config(ac, av);
  TaskIds t;
  if (!task_ids(sp, &t)) {
    slurm_error("spank_triage: %s: the task's ids are not available; not reported", op);
    return 0;
  }
  int status = 0;
  if (with_exit && spank_get_item(sp, S_TASK_EXIT_STATUS, &status) != ESPANK_SUCCESS) {
    slurm_error("spank_triage: task_exit: no exit status for job %u task %d", t.job_id, t.task);
    return 0;
  }

  char host[256];
  triage::spank::node_name(host, sizeof(host));
  char step[32];
  triage::spank::step_name(t.step_id, step, sizeof(step));
  char msg_id[triage::spank::kMaxMsgIdBytes];
  JsonLine line;
  triage::spank::begin_message(line, op, host, msg_id);
  line.add_unsigned("job_id", t.job_id);
  line.add("step", step);
  line.add("task", static_cast<int64_t>(t.task));
  line.add("rank", static_cast<int64_t>(t.rank));
  line.add("pid", static_cast<int64_t>(t.pid));
  line.add_unsigned("uid", t.uid);
  line.add("mode", triage::spank::to_string(remote_mode(sp, cfg)));
  if (t.step_id == SLURM_BATCH_SCRIPT) {
    triage::spank::add_array_ids(line, t.array_job_id, t.array_task_id);
  }
  if (with_exit) {
    line.add("wait_status", static_cast<int64_t>(status));
    triage::spank::add_decoded_wait_status(line, status);
  }
  send(cfg, host, line, msg_id, op, t.job_id);
  return 0;
}

// preflight=on: asks the local agent whether this node is fit for the job. Returns the prolog's
// result: -1 (Slurm drains the node with the reason set here and requeues the job) only on a
// clear "unfit" from the agent; 0 on "fit" and on anything else (agent down, slow, garbage), with
// a log line saying the job went ahead unchecked.
int preflight(spank_t sp, const PluginConfig& base) {
  JobIds ids;
  if (!job_ids(sp, &ids, "preflight")) return 0;
  char host[256];
  triage::spank::node_name(host, sizeof(host));
  PluginConfig cfg;
  triage::spank::config_for_node(base, host, &cfg);
  char request[512];
  if (!triage::spank::preflight_request(ids.job_id, host, std::getenv("SLURM_JOB_GPUS"), request,
                                        sizeof(request))) {
    slurm_error(
        "spank_triage: preflight for job %u not asked (node name or SLURM_JOB_GPUS "
        "unusable); the job goes ahead unchecked",
        ids.job_id);
    return 0;
  }
  const triage::spank::PreflightResult r =
      triage::spank::ask_preflight(cfg.socket_path, triage::spank::kPreflightBudgetMs, request);
  switch (r.outcome) {
    case triage::spank::PreflightOutcome::kFit:
      slurm_debug("spank_triage: preflight for job %u: fit (%lld ms)", ids.job_id,
                  static_cast<long long>(r.elapsed_ms));
      return 0;
    case triage::spank::PreflightOutcome::kNoAnswer:
      slurm_info(
          "spank_triage: preflight for job %u: no answer from the agent (%s, %lld ms); "
          "the job goes ahead unchecked",
          ids.job_id, r.why, static_cast<long long>(r.elapsed_ms));
      return 0;
    case triage::spank::PreflightOutcome::kUnfit:
      break;
  }
  // slurmctld drains a node whose prolog failed with the fixed reason "Prolog error" unless it is
  // drained already (22.05 node_mgr.c); the agent gives the drain this reason itself
  // (agent/slurm/drain_steps.h label_preflight_drain), and slurmd's log has it here.
  slurm_error("spank_triage: job %u refused here: %s", ids.job_id, r.reason);
  return -1;
}

}  // namespace

extern "C" {

int slurm_spank_init(spank_t sp, int ac, char** av) {
  config(ac, av);
  const spank_context_t ctx = spank_context();
  // The option must be known on the client (to parse it) and in slurmstepd (to receive it).
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
    for (spank_option* opt : {&g_option, &g_hang_option, &g_requeue_option}) {
      const spank_err_t rc = spank_option_register(sp, opt);
      if (rc != ESPANK_SUCCESS) {
        slurm_error("spank_triage: cannot register --%s: %s", opt->name, spank_strerror(rc));
      }
    }
  }
  return 0;
}

// Client side, after option parsing: a user's SLURM_TRIAGE becomes a job-control variable, which
// Slurm hands the prolog and epilog as SPANK_TRIAGE (and the job as SLURM_SPANK_TRIAGE).
int slurm_spank_init_post_opt(spank_t sp, int ac, char** av) {
  const spank_context_t ctx = spank_context();
  if (ctx != S_CTX_LOCAL && ctx != S_CTX_ALLOCATOR) return 0;
  config(ac, av);
  if (g_option_seen) return 0;
  const char* env = std::getenv("SLURM_TRIAGE");
  if (env == nullptr) return 0;
  Mode m = Mode::kBasic;
  if (*env == '\0' || !triage::spank::parse_mode(env, &m)) {
    slurm_error("SLURM_TRIAGE=%.64s ignored: expected off, basic or full", env);
    return 0;
  }
  const spank_err_t rc =
      spank_job_control_setenv(sp, "TRIAGE", triage::spank::to_string(m).data(), 1);
  if (rc != ESPANK_SUCCESS) {
    slurm_debug("spank_triage: cannot pass SLURM_TRIAGE on: %s", spank_strerror(rc));
  }
  return 0;
}

int slurm_spank_job_prolog(spank_t sp, int ac, char** av) {
  const PluginConfig& cfg = config(ac, av);
  // Asked first, so that a job refused here is not registered here: it runs somewhere else.
  if (cfg.preflight && preflight(sp, cfg) != 0) return -1;
  return job_script_message(sp, ac, av, "job_start");
}

// Runs in slurmstepd as root right after each task is forked (task_init runs as the user).
int slurm_spank_task_post_fork(spank_t sp, int ac, char** av) {
  return task_message(sp, ac, av, "task_start", false);
}

int slurm_spank_task_exit(spank_t sp, int ac, char** av) {
  return task_message(sp, ac, av, "task_exit", true);
}

// The node stays COMPLETING while this runs: report and return, never analyse here.
int slurm_spank_job_epilog(spank_t sp, int ac, char** av) {
  return job_script_message(sp, ac, av, "job_end");
}

}  // extern "C"
