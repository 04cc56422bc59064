// Running a program from a test: argv (no shell), a working directory, extra environment, a time
// limit after which its whole process group is killed, and its stdout+stderr captured.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace triage::testing {

struct CommandResult {
  int exit_code = -1;  // -1 when it did not exit normally
  bool timed_out = false;
  std::string output;  // stdout and stderr, interleaved

  bool ok() const { return exit_code == 0 && !timed_out; }
};

CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60),
                          const std::string& cwd = "", const std::vector<std::string>& env = {});

}  // namespace triage::testing
