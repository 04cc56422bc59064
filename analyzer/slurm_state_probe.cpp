#include "analyzer/slurm_state_probe.h"

#include <chrono>
#include <string_view>
#include <system_error>

#include "common/child_process.h"
#include "common/text.h"

namespace triage {

SlurmStateAnswer query_squeue_state(uint64_t job_id, int timeout_ms,
                                    const std::string& squeue_path) {
  SlurmStateAnswer a;
  const std::string exe = squeue_path.empty() ? find_executable("squeue") : squeue_path;
  if (exe.empty()) {
    a.detail = "squeue not found in PATH";
    return a;
  }
  ChildSpec spec;
  spec.argv = {exe, "-h", "-j", std::to_string(job_id), "-o", "%T"};
  spec.stderr_to = ChildOutput::kStdout;
  ChildLimits limits;
  limits.timeout = std::chrono::milliseconds(timeout_ms);
  limits.stdout_max = 65536;
  ChildResult r;
  try {
    r = run_child(spec, limits);
  } catch (const std::system_error& e) {
    a.detail = std::string("squeue failed: ") + e.what();
    return a;
  }
  if (r.timed_out) {
    a.detail = "squeue did not answer within " + std::to_string(timeout_ms) + " ms";
    return a;
  }
  const std::string_view t = trim(r.out);
  if (r.exited_ok()) {
    a.available = true;
    // Several lines for job arrays or heterogeneous jobs: the first names the state well enough.
    const std::string_view first = trim(t.substr(0, t.find('\n')));
    a.state = first.empty() ? "ENDED" : std::string(first);
    return a;
  }
  if (t.find("Invalid job id") != std::string_view::npos) {
    a.available = true;
    a.state = "ENDED";
    return a;
  }
  a.detail = "squeue failed: " + printable(truncate_utf8(t, 200));
  return a;
}

}  // namespace triage
