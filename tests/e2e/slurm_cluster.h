// A real single-node Slurm (munged, slurmctld, slurmd from Debian) for a test binary, started on
// loopback through scripts/slurm-cluster in a fresh state directory, with free ports, and torn
// down by pid when the object goes away (or, through the script's reaper, when the test process
// dies). Jobs are submitted as a non-root user (kUser; kOtherUser where a test needs two users).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/command.h"

namespace triage::testing {

struct ClusterOptions {
  std::string plugin;                       // spank_triage.so to load (empty: none)
  std::string plugin_args;                  // empty: socket= and inbox= inside the state dir
  std::string plugin_more;                  // more plugstack arguments after the default ones
  std::string agent;                        // slurm-triage-agent to start (empty: none)
  std::string agent_config;                 // empty: generated (socket and spool in the state dir)
  std::string analyzer;                     // slurm-triage for the generated config's AnalyzerPath
  std::vector<std::string> agent_settings;  // more Key=Value lines for the generated config
  int nodes = 1;  // >1: several slurmd on this host (<host>1..n at 127.0.0.1..n), an agent each
  // Also MariaDB and slurmdbd (scripts/slurm-cluster --accounting): sacct and sacctmgr work.
  bool accounting = false;
  // With nodes >= 2: topology/tree with two leaf switches (scripts/slurm-cluster --topology).
  bool topology = false;
};

// Whether this host has what ClusterOptions::accounting starts (mariadb-server, slurmdbd).
bool accounting_available();

class SlurmCluster {
 public:
  static constexpr const char* kUser = "triage-test";
  // A second user, for what one user must never see of another's jobs.
  static constexpr const char* kOtherUser = "triage-test2";

  explicit SlurmCluster(const ClusterOptions& options);
  ~SlurmCluster();
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::string& state_dir() const { return state_; }
  std::string conf() const { return state_ + "/etc/slurm.conf"; }
  // The first (or only) node, and all of them.
  const std::string& node() const { return nodes_.front(); }
  const std::vector<std::string>& nodes() const { return nodes_; }
  // The plugin's agent socket and inbox on `node` (default: the first).
  std::string socket_path(const std::string& node = "") const;
  std::string inbox_dir(const std::string& node = "") const;
  // Stops one daemon ("agent", "agent-<node>", "slurmd-<node>") for the rest of the run.
  void stop_daemon(const std::string& name) const;
  uid_t user_uid() const { return uid_; }
  gid_t user_gid() const { return gid_; }
  // kUser's or kOtherUser's uid and gid.
  uid_t uid_of(const std::string& user) const;
  gid_t gid_of(const std::string& user) const;

  // A fresh directory owned by `user` (default: the test user), for a job to run in.
  std::string make_job_dir(const std::string& name, const std::string& user = kUser) const;

  // sbatch --parsable as the test user in `dir`; returns the job id (throws with sbatch's output
  // when the submission fails). sbatch_as: the same as `user`.
  uint32_t sbatch(const std::string& dir, const std::vector<std::string>& args,
                  const std::vector<std::string>& env = {}) const;
  uint32_t sbatch_as(const std::string& user, const std::string& dir,
                     const std::vector<std::string>& args,
                     const std::vector<std::string>& env = {}) const;
  CommandResult as_user(const std::string& dir, const std::vector<std::string>& argv,
                        const std::vector<std::string>& env = {},
                        std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  CommandResult as(const std::string& user, const std::string& dir,
                   const std::vector<std::string>& argv, const std::vector<std::string>& env = {},
                   std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  CommandResult as_root(const std::vector<std::string>& argv) const;

  // `scontrol show job -o` as key -> value. `spec` may name an array task ("4240_2").
  std::map<std::string, std::string> job(uint32_t id) const;
  std::map<std::string, std::string> job(const std::string& spec) const;
  // Waits until the job has ended and its epilog has finished (not COMPLETING); returns JobState.
  std::string wait_job(uint32_t id,
                       std::chrono::milliseconds timeout = std::chrono::seconds(60)) const;
  // Waits until `scontrol` shows the job RUNNING.
  void wait_running(uint32_t id,
                    std::chrono::milliseconds timeout = std::chrono::seconds(30)) const;

  std::string node_state() const;   // sinfo %T: "idle", "drained", ...
  std::string node_reason() const;  // sinfo %E: "none" when there is none

  // The lifecycle messages the plugin left in the inbox for `job_id`, oldest first.
  std::vector<nlohmann::json> inbox_messages(uint32_t job_id) const;
  void clear_inbox() const;

  // How long slurmd's spank epilog took for the job (slurmd.log: "Running spank/epilog for jobid
  // [N]" to "completed epilog for jobid N"), in milliseconds.
  std::optional<double> epilog_ms(uint32_t job_id) const;

  // Appends `line` to the kernel log file `node`'s agent reads (its triage.conf must say
  // KernelSource=file and KernelPath=@STATE@/kernel-@NODE@.log, or kernel.log for one node),
  // stamped now as `dmesg --time-format iso` would.
  void kernel_line(const std::string& node, const std::string& line) const;

  // The last lines of every daemon log, for failure messages.
  std::string logs() const;

 private:
  std::string triage_dir(const std::string& node) const;

  std::string script_;
  std::string state_;
  std::vector<std::string> nodes_;
  uid_t uid_ = 0;
  gid_t gid_ = 0;
  uid_t other_uid_ = 0;
  gid_t other_gid_ = 0;
  bool up_ = false;
};

// The path of scripts/slurm-cluster in the source tree.
std::string slurm_cluster_script();

// A loopback port P with P .. P+count-1 all free: node i of a cluster listens on base+i (its
// slurmd, its agent), so the base alone being free is not enough.
int free_port(int count = 1);

// This host's name up to its first dot: the node of a one-node cluster (known before it starts).
std::string short_hostname();

}  // namespace triage::testing
