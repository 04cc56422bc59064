// SlurmClient over libslurm (22.05 to 24.11; agent/slurm/slurm_compat.h): slurm_load_job /
// slurm_get_job_stdout for a job's facts, slurm_load_node_single for a node's state,
// slurm_update_node for a drain and its lifting.
#include "agent/slurm/slurm_client.h"

#include <pwd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <vector>

#include "agent/history/outcome_record.h"
#include "agent/slurm/drain_steps.h"
#include "agent/slurm/slurm_compat.h"
#include "common/child_process.h"
#include "common/error.h"
#include "common/hostlist.h"

namespace triage::agent {

namespace {

// The names Slurm prints (scontrol, sacct) for a job's base state. The flags (COMPLETING while
// the epilog runs, REQUEUED, ...) are left out: the agent asks while the epilog still runs, and
// wants to know how the job ended, not that it is still being cleaned up.
std::string job_state_name(uint32_t state) {
  switch (state & JOB_STATE_BASE) {
    case JOB_PENDING:
      return "PENDING";
    case JOB_RUNNING:
      return "RUNNING";
    case JOB_SUSPENDED:
      return "SUSPENDED";
    case JOB_COMPLETE:
      return "COMPLETED";
    case JOB_CANCELLED:
      return "CANCELLED";
    case JOB_FAILED:
      return "FAILED";
    case JOB_TIMEOUT:
      return "TIMEOUT";
    case JOB_NODE_FAIL:
      return "NODE_FAIL";
    case JOB_PREEMPTED:
      return "PREEMPTED";
    case JOB_BOOT_FAIL:
      return "BOOT_FAIL";
    case JOB_DEADLINE:
      return "DEADLINE";
    case JOB_OOM:
      return "OUT_OF_MEMORY";
    default:
      return "UNKNOWN";
  }
}

// sinfo's long names: DRAIN on an idle (or down) node is DRAINED, on a busy one DRAINING.
std::string node_state_name(uint32_t state) {
  const uint32_t base = state & NODE_STATE_BASE;
  std::string name;
  if ((state & NODE_STATE_DRAIN) != 0 && base != NODE_STATE_DOWN) {
    const bool busy = base == NODE_STATE_ALLOCATED || base == NODE_STATE_MIXED ||
                      (state & NODE_STATE_COMPLETING) != 0;
    name = busy ? "DRAINING" : "DRAINED";
  } else {
    switch (base) {
      case NODE_STATE_DOWN:
        name = "DOWN";
        break;
      case NODE_STATE_IDLE:
        name = "IDLE";
        break;
      case NODE_STATE_ALLOCATED:
        name = "ALLOCATED";
        break;
      case NODE_STATE_ERROR:
        name = "ERROR";
        break;
      case NODE_STATE_MIXED:
        name = "MIXED";
        break;
      case NODE_STATE_FUTURE:
        name = "FUTURE";
        break;
      default:
        name = "UNKNOWN";
    }
    if (base == NODE_STATE_DOWN && (state & NODE_STATE_DRAIN) != 0) name += "+DRAIN";
  }
  const std::pair<uint32_t, const char*> flags[] = {
      {NODE_STATE_COMPLETING, "+COMPLETING"},
      {NODE_STATE_NO_RESPOND, "+NOT_RESPONDING"},
      {NODE_STATE_FAIL, "+FAIL"},
      {NODE_STATE_MAINT, "+MAINT"},
      {NODE_STATE_REBOOT_REQUESTED, "+REBOOT_REQUESTED"},
      {NODE_STATE_POWERED_DOWN, "+POWERED_DOWN"}};
  for (const auto& [bit, text] : flags) {
    if ((state & bit) != 0) name += text;
  }
  return name;
}

std::string last_slurm_error(std::string_view what) {
  const int err = slurm_compat::last_error();
  return std::string(what) + ": " + slurm_strerror(err);
}

std::string user_name(uint32_t uid) {
  passwd pw{};
  passwd* found = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return {};
}

std::string str(const char* s) {
  return s == nullptr ? std::string() : std::string(s);
}

// "why" goes into a node reason that admins read in sinfo: one line, bounded.
std::string reason_text(const std::string& why) {
  std::string r = "triage: ";
  for (const char c : why) {
    if (r.size() >= 240) break;
    r += (c == '\n' || c == '\r' || c == '\t') ? ' ' : c;
  }
  return r;
}

class LibslurmClient final : public SlurmClient {
 public:
  std::optional<JobFacts> load_job(uint64_t job_id, std::string& error) override {
    if (job_id == 0 || job_id > UINT32_MAX) {
      error = "job id " + std::to_string(job_id) + " is out of range";
      return std::nullopt;
    }
    job_info_msg_t* resp = nullptr;
    if (slurm_load_job(&resp, static_cast<uint32_t>(job_id), SHOW_DETAIL) != SLURM_SUCCESS) {
      error = last_slurm_error("slurm_load_job " + std::to_string(job_id));
      return std::nullopt;
    }
    std::optional<JobFacts> facts;
    for (uint32_t i = 0; resp != nullptr && i < resp->record_count; ++i) {
      // An array job's records share the query id; take the one that is exactly this job.
      job_info_t& j = resp->job_array[i];
      if (j.job_id == job_id) {
        facts = to_facts(j, error);
        break;
      }
    }
    if (!facts && error.empty()) error = "slurmctld knows no job " + std::to_string(job_id);
    slurm_free_job_info_msg(resp);
    return facts;
  }

  std::optional<SlurmNodeState> load_node(const std::string& node, std::string& error) override {
    node_info_msg_t* resp = nullptr;
    // The API takes a mutable string it does not modify.
    std::string name = node;
    if (slurm_load_node_single(&resp, name.data(), SHOW_ALL) != SLURM_SUCCESS) {
      error = last_slurm_error("slurm_load_node_single " + node);
      return std::nullopt;
    }
    std::optional<SlurmNodeState> out;
    for (uint32_t i = 0; resp != nullptr && i < resp->record_count; ++i) {
      const node_info_t& n = resp->node_array[i];
      if (n.name == nullptr || node != n.name) continue;
      SlurmNodeState s;
      s.name = n.name;
      s.state = node_state_name(n.node_state);
      s.drain = (n.node_state & NODE_STATE_DRAIN) != 0;
      s.down = (n.node_state & NODE_STATE_BASE) == NODE_STATE_DOWN;
      s.reason = str(n.reason);
      s.reason_uid = s.reason.empty() ? 0 : n.reason_uid;
      s.reason_time = s.reason.empty() ? 0 : static_cast<int64_t>(n.reason_time);
      s.addr = n.node_addr != nullptr ? std::string(n.node_addr) : s.name;
      out = s;
    }
    if (!out) error = "slurmctld knows no node " + node;
    slurm_free_node_info_msg(resp);
    return out;
  }

  std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes,
                                                    std::string& error) override {
    std::map<std::string, std::string> out;
    node_info_msg_t* resp = nullptr;
    if (slurm_load_node(0, &resp, SHOW_ALL) != SLURM_SUCCESS) {
      error = last_slurm_error("slurm_load_node");
      return out;
    }
    const std::set<std::string> wanted(nodes.begin(), nodes.end());
    for (uint32_t i = 0; resp != nullptr && i < resp->record_count; ++i) {
      const node_info_t& n = resp->node_array[i];
      if (n.name == nullptr || wanted.count(n.name) == 0) continue;
      out[n.name] = n.node_addr != nullptr && *n.node_addr != '\0' ? n.node_addr : n.name;
    }
    slurm_free_node_info_msg(resp);
    return out;
  }

  bool drain_node(const std::string& node, const std::string& why, std::string& error) override {
    return drain_in_steps(libslurm_drain_steps(*this, node), reason_text(why), error);
  }

  bool label_preflight_drain(const std::string& node, const std::string& reason,
                             std::string& error) override {
    return triage::agent::label_preflight_drain(libslurm_drain_steps(*this, node), reason, error);
  }

  bool undrain_node(const std::string& node, const std::string& expected_reason,
                    std::string& error) override {
    const std::optional<SlurmNodeState> now = load_node(node, error);
    if (!now) return false;
    if (!now->drain) {
      error = "node " + node + " is no longer drained (" + now->state + ")";
      return false;
    }
    if (now->reason != expected_reason) {
      error = "node " + node + "'s drain reason is now '" + now->reason + "'; not lifting it";
      return false;
    }
    update_node_msg_t msg;
    slurm_init_update_node_msg(&msg);
    std::string names = node;
    msg.node_names = names.data();
    msg.node_state = NODE_STATE_UNDRAIN;
    if (slurm_update_node(&msg) != SLURM_SUCCESS) {
      error = last_slurm_error("slurm_update_node " + node + " undrain");
      return false;
    }
    return true;
  }

 private:
  static std::optional<JobFacts> to_facts(job_info_t& j, std::string& error) {
    JobFacts f;
    f.job_id = j.job_id;
    // A plain job has array_job_id 0 and array_task_id NO_VAL; a pending array record has its
    // array id and NO_VAL (its tasks in array_task_str); a het job's het_job_offset is NO_VAL
    // when it is not one (slurm.h, job_info_t).
    if (j.array_job_id != 0 && j.array_job_id != NO_VAL) f.array_job_id = j.array_job_id;
    if (j.array_task_id != NO_VAL) f.array_task_id = j.array_task_id;
    if (j.het_job_id != 0 && j.het_job_id != NO_VAL) {
      f.het_job_id = j.het_job_id;
      if (j.het_job_offset != NO_VAL) f.het_job_offset = j.het_job_offset;
    }
    f.name = str(j.name);
    f.uid = j.user_id;
    f.gid = j.group_id;
    f.user = j.user_name != nullptr ? std::string(j.user_name) : user_name(j.user_id);
    f.state = job_state_name(j.job_state);
    // exit_code is the batch script's raw wait status; NO_VAL while nothing has ended.
    if (j.exit_code != NO_VAL) f.wait_status = static_cast<int>(j.exit_code);
    if (j.derived_ec != NO_VAL) f.derived_wait_status = static_cast<int>(j.derived_ec);
    f.work_dir = str(j.work_dir);
    f.stdout_pattern = str(j.std_out);
    // Expanded the way slurmstepd expands it (%j, %x, %u, %N, ...; default slurm-%j.out).
    char path[4096] = {};
    slurm_get_job_stdout(path, sizeof(path), &j);
    f.stdout_path = path;
    char err_path[4096] = {};
    slurm_get_job_stderr(err_path, sizeof(err_path), &j);
    f.stderr_path = err_path;
    // While a job is COMPLETING, slurmctld sends only the nodes still completing in `nodes`
    // (pack_job packs node_bitmap_cg then; 22.05 and 24.11), not its allocation: a node whose
    // epilog finished first would drop out of the job. Left empty, the epilog's SLURM_NODELIST
    // takes its place (merge_facts).
    if ((j.job_state & JOB_COMPLETING) == 0 && j.nodes != nullptr && *j.nodes != '\0') {
      try {
        f.nodes = expand_hostlist(j.nodes, "slurmctld node list");
      } catch (const InputError& e) {
        error = e.what();
        return std::nullopt;
      }
    }
    f.batch_host = str(j.batch_host);
    f.submit_time = static_cast<int64_t>(j.submit_time);
    f.start_time = static_cast<int64_t>(j.start_time);
    // For a job still running end_time is the expected end; only an ended job has a real one.
    const uint32_t base = j.job_state & JOB_STATE_BASE;
    if (base != JOB_PENDING && base != JOB_RUNNING && base != JOB_SUSPENDED) {
      f.end_time = static_cast<int64_t>(j.end_time);
    }
    f.restart_count = j.restart_cnt;
    f.gpus = gpus_from_tres(str(j.tres_alloc_str));
    if (j.time_limit != INFINITE && j.time_limit != NO_VAL && j.time_limit != 0)
      f.time_limit_sec = static_cast<int64_t>(j.time_limit) * 60;  // Slurm keeps minutes
    f.admin_comment = str(j.admin_comment);
    f.requeue_allowed = j.requeue != 0;
    f.excluded_nodes = str(j.exc_nodes);
    f.batch = j.batch_flag != 0;
    f.partition = str(j.partition);
    f.source = "slurmctld";
    return f;
  }
};

}  // namespace

namespace {

// libslurm ends the whole process (fatal() -> exit) when it finds no configuration: no slurm.conf,
// no configless cache, no SRV record. The agent must then run on the epilog's facts, not die, so
// the first initialisation is tried in a child, which keeps none of the agent's descriptors (it
// reads slurm.conf itself).
bool slurm_config_loads() {
  ChildSpec quiet;
  quiet.stdout_to = ChildOutput::kInherit;
  quiet.stderr_to = ChildOutput::kNull;
  try {
    ChildProcess probe = ChildProcess::fork_call(quiet, [] {
      slurm_init(nullptr);
      return 0;
    });
    const int status = probe.wait();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0;
  } catch (const std::system_error&) {
    return true;  // cannot tell; let the real call decide
  }
}

}  // namespace

DrainSteps libslurm_drain_steps(SlurmClient& client, const std::string& node) {
  // One update of `node`: DRAIN (or the state as it is) and a reason (or none: the node's stays).
  auto update = [node](uint32_t state, const std::string* reason, std::string& error) {
    update_node_msg_t msg;
    slurm_init_update_node_msg(&msg);
    std::string names = node;
    std::string text = reason != nullptr ? *reason : std::string();
    msg.node_names = names.data();
    msg.node_state = state;
    if (reason != nullptr) {
      msg.reason = text.data();
      msg.reason_uid = static_cast<uint32_t>(getuid());
    }
    if (slurm_update_node(&msg) != SLURM_SUCCESS) {
      error = last_slurm_error("slurm_update_node " + node);
      return false;
    }
    return true;
  };
  DrainSteps s;
  s.read = [&client, node](std::string& error) { return client.load_node(node, error); };
  s.drain_keeping_reason = [update](std::string& error) {
    return update(NODE_STATE_DRAIN, nullptr, error);
  };
  s.set_reason = [update](const std::string& reason, std::string& error) {
    return update(NO_VAL, &reason, error);
  };
  return s;
}

std::unique_ptr<SlurmClient> make_libslurm_client() {
  // slurm_init reads slurm.conf (SLURM_CONF or the default) once for the whole process.
  static std::once_flag once;
  static bool usable = false;
  std::call_once(once, [] {
    usable = slurm_config_loads();
    if (usable) slurm_init(nullptr);
  });
  if (!usable) {
    throw std::runtime_error(
        "libslurm found no Slurm configuration (slurm.conf, SLURM_CONF or configless)");
  }
  return std::make_unique<LibslurmClient>();
}

}  // namespace triage::agent
