#include "agent/slurm/slurm_command_runner.h"

#include <cstdlib>

#include "common/child_process.h"
#include "common/text.h"
#include "common/wait_status.h"

namespace triage::agent {

namespace {

std::vector<std::string> clean_environment() {
  std::vector<std::string> env = {
      "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"};
  if (const char* conf = std::getenv("SLURM_CONF"); conf != nullptr && *conf != '\0') {
    env.push_back(std::string("SLURM_CONF=") + conf);
  }
  return env;
}

}  // namespace

SlurmCommandResult run_slurm_command(const std::vector<std::string>& argv,
                                     std::chrono::milliseconds timeout) {
  SlurmCommandResult r;
  const std::string program = argv.empty() ? "" : find_executable(argv.front());
  if (program.empty()) {
    r.error = (argv.empty() ? std::string("no command") : argv.front()) + ": not found in PATH";
    return r;
  }
  ChildSpec spec;
  spec.argv = argv;
  spec.argv.front() = program;
  spec.env = clean_environment();
  ChildLimits limits;
  limits.timeout = timeout;
  limits.stdout_max = size_t{256} << 10;
  limits.stderr_max = size_t{16} << 10;
  try {
    ChildResult c = run_child(spec, limits);
    r.ok = c.exited_ok() && !c.timed_out;
    r.out = std::move(c.out);
    if (!r.ok) {
      const std::string said = printable(truncate_utf8(trim(c.err), 500));
      r.error = c.timed_out    ? "no answer in " + std::to_string(timeout.count()) + " ms"
                : said.empty() ? describe_wait_status(c.wait_status)
                               : said;
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  return r;
}

SlurmCommandRunner slurm_command_runner(std::chrono::milliseconds timeout) {
  return
      [timeout](const std::vector<std::string>& argv) { return run_slurm_command(argv, timeout); };
}

std::string command_line(const std::vector<std::string>& argv) {
  std::string s;
  for (const std::string& a : argv)
    s += (s.empty() ? "" : " ") + a;
  return s;
}

}  // namespace triage::agent
