#include "common/wait_status.h"

#include <sys/wait.h>

#include <csignal>

namespace triage {

DecodedWaitStatus decode_wait_status(int status) {
  DecodedWaitStatus d;
  if (WIFEXITED(status)) {
    d.exited = true;
    d.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    d.signaled = true;
    d.signal = WTERMSIG(status);
    d.core_dumped = WCOREDUMP(status) != 0;
  }
  return d;
}

std::string signal_name(int sig) {
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGCHLD:
      return "SIGCHLD";
    case SIGCONT:
      return "SIGCONT";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    case SIGSYS:
      return "SIGSYS";
    default:
      return "SIG" + std::to_string(sig);
  }
}

std::string describe_exit_code(int code) {
  switch (code) {
    case 0:
      return "success";
    case 1:
      return "generic error (read the task's output)";
    case 2:
      return "usage error";
    case 130:
      return "SIGINT (interrupted)";
    case 134:
      return "SIGABRT (assertion failure or abort; core dump likely)";
    case 135:
      return "SIGBUS (bus error)";
    case 137:
      return "SIGKILL (OOM killer or external kill)";
    case 139:
      return "SIGSEGV (segmentation fault; core dump likely)";
    case 143:
      return "SIGTERM (cancellation, e.g. scancel)";
    default:
      if (code > 128 && code < 128 + 65)
        return signal_name(code - 128) + " (128+" + std::to_string(code - 128) + ")";
      return "exit code " + std::to_string(code);
  }
}

std::string describe_wait_status(int status) {
  const DecodedWaitStatus d = decode_wait_status(status);
  if (d.exited) return "exit " + std::to_string(d.exit_code);
  if (d.signaled)
    return "signal " + signal_name(d.signal) + (d.core_dumped ? " (core dumped)" : "");
  return "status " + std::to_string(status);
}

}  // namespace triage
