// Decoding raw wait statuses (what waitpid() returns and what Slurm hands the epilog as
// SLURM_JOB_EXIT_CODE) and the shell's 128+N exit-code convention.
#pragma once

#include <string>

namespace triage {

struct DecodedWaitStatus {
  bool exited = false;
  int exit_code = 0;
  bool signaled = false;
  int signal = 0;
  bool core_dumped = false;
};

DecodedWaitStatus decode_wait_status(int status);

// "SIGKILL" for 9; "SIG42" for numbers without a name.
std::string signal_name(int sig);

// What an exit code usually means on a cluster: 137 = SIGKILL (OOM killer or external kill),
// 143 = SIGTERM (scancel), 134 = SIGABRT, 139 = SIGSEGV, 130 = SIGINT, 1 = generic error.
std::string describe_exit_code(int code);

// "exit 1", "signal SIGKILL (core dumped)".
std::string describe_wait_status(int status);

}  // namespace triage
