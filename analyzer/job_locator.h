// Finding a job's log and its job directory from what the user typed: a log file, a job directory
// (its `log` symlink leads to the log), a Slurm job id (outputs/<id>-* under the outputs root), or
// an outputs/ folder (every job directory in it; directories without a `log` entry are shared
// checkpoint directories and are skipped). The layout, from the training harness:
//
//   outputs/7877-FOO/        job directory, with log -> ../7877-FOO.log
//   outputs/7877-FOO.log     its log
//   outputs/ckpt-shared/     checkpoints shared across runs (no `log`)
//
// Nothing here changes privileges: the caller drops to the job owner before calling in.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analyzer/job_identity.h"

namespace triage {

struct JobTarget : JobIdentity {
  bool from_outputs_folder = false;
  std::string error;  // why the argument could not be resolved ("" = fine)
};

enum class ArgumentKind { kLogFile, kJobDir, kOutputsFolder, kJobId, kMissing };

// What an argument is (by lstat/stat; opens nothing). A directory counts as a job directory when
// it has a `log` entry.
ArgumentKind classify_argument(const std::string& arg);

// A job directory or log file argument, resolved to both halves.
JobTarget resolve_job_path(const std::string& path);

// outputs/<id>-* (a directory with `log`, else a <id>-*.log file) under `outputs_root`.
JobTarget resolve_job_id(uint64_t job_id, const std::string& outputs_root);

// The job directories of an outputs/ folder (names only, sorted; at most `max_entries` directory
// entries are looked at). `skipped` receives directories without a `log` entry.
std::vector<std::string> list_job_dirs(const std::string& outputs_dir,
                                       std::vector<std::string>* skipped,
                                       size_t max_entries = 100000);

// "7877-FOO" -> (7877, "FOO"); "slurm-7877.out" -> (7877, ""); "local_20260101-FOO" -> (none,
// "FOO").
void parse_job_name(const std::string& base, std::optional<uint64_t>& id, std::string& name);

}  // namespace triage
