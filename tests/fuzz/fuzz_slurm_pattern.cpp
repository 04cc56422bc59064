// Slurm's StdOut/StdErr filename patterns ("%j", "%5A_%a", "\\" escapes) as users write them in
// sbatch --output; the agent expands them to find a job's log.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "common/slurm_pattern.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  triage::SlurmPatternContext ctx;
  // The first bytes vary the context; the rest is the pattern.
  ctx.job_id = uint64_t{data[0]} * 100003;
  if ((data[1] & 1) != 0) ctx.array_job_id = uint64_t{data[1]} << 30;
  if ((data[1] & 2) != 0) ctx.array_task_id = UINT64_MAX - uint64_t{data[2]};
  ctx.user = "alice";
  ctx.job_name = std::string(size_t{data[3]} % 40, '%');
  ctx.node = "node[001-004]";
  ctx.node_id = data[2];
  ctx.task_id = UINT64_MAX;
  ctx.step = (data[1] & 4) != 0 ? "batch" : "";
  ctx.work_dir = (data[1] & 8) != 0 ? "/home/alice/run" : "";
  const std::string_view pattern = triage::fuzz::as_view(data + 4, size - 4);
  const std::string out = triage::expand_slurm_pattern(pattern, ctx);
  // Every directive expands to a bounded field: the result cannot explode.
  if (out.size() > ctx.work_dir.size() + 1 + pattern.size() * 64) std::abort();
  return 0;
}
