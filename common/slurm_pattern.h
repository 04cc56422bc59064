// Slurm's filename patterns (sbatch --output/--error, and the admin's ReportPath): "%j", "%x",
// "%5j" and friends, expanded the way slurmstepd expands them for a batch job, so that the agent
// finds the file Slurm actually wrote when slurmctld cannot be asked.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace triage {

struct SlurmPatternContext {
  uint64_t job_id = 0;
  std::optional<uint64_t> array_job_id;   // %A (falls back to the job id when not an array)
  std::optional<uint64_t> array_task_id;  // %a (Slurm prints NO_VAL, 4294967294, when unset)
  std::string user;                       // %u
  std::string job_name;                   // %x
  std::string node;                       // %N: the batch host (the first node)
  uint64_t node_id = 0;                   // %n: 0 for the batch step
  uint64_t task_id = 0;                   // %t: 0 for the batch step
  std::string step;                       // %s, and the ".step" of %J; empty: "batch" / none
  std::string work_dir;                   // prefix for relative patterns
};

// Expands `pattern` per sbatch's filename rules:
//   %% a literal '%'; %A %a %j %J %N %n %s %t %u %x as above; a number between '%' and the letter
//   zero-pads numeric fields (at most 10 wide, wider requests are cut to 10) and is ignored for
//   the others; an unknown letter is kept as written. A backslash anywhere turns expansion off
//   for the whole pattern and the backslashes are dropped ("\\" keeps one).
// A relative result is placed under `work_dir` when one is known.
std::string expand_slurm_pattern(std::string_view pattern, const SlurmPatternContext& ctx);

// The pattern Slurm uses when a batch job was submitted without --output.
std::string default_stdout_pattern(bool is_array);

}  // namespace triage
