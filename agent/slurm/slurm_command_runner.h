// Running one Slurm command (sacct, sacctmgr, scontrol) for the agent: through
// common/child_process.h, with the program found in PATH, a clean environment (the agent's own
// SLURM_* and SACCT_* variables would change what the commands do; only SLURM_CONF is kept, so a
// site or a dev cluster with its slurm.conf elsewhere is still reached), and a deadline. Blocking:
// call it on a worker, never on the event loop.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace triage::agent {

struct SlurmCommandResult {
  bool ok = false;    // exited 0
  std::string out;    // stdout
  std::string error;  // when not ok: Slurm's own words (stderr), or how the command ended
};

// The same call, replaceable in tests.
using SlurmCommandRunner = std::function<SlurmCommandResult(const std::vector<std::string>& argv)>;

SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout);

// A runner over run_slurm_command with `timeout`.
SlurmCommandRunner slurm_command_runner(std::chrono::milliseconds timeout);

// "sacctmgr -i modify job ..." for logs and reports.
std::string command_line(const std::vector<std::string>& argv);

}  // namespace triage::agent
