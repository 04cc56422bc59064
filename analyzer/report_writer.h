// Where `analyze --write` puts triage.md and triage.json, and writing them so that nothing in the
// job directory can redirect the write: a temporary file created with O_EXCL|O_NOFOLLOW in the
// directory, then renamed over the report (a symlink planted at triage.md is replaced, never
// followed). Always called as the job's owner.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "analyzer/job_locator.h"

namespace triage {

struct ReportPlacement {
  std::string dir;
  std::string md_name;
  std::string json_name;
  std::string md_path() const;
  std::string json_path() const;
};

// In order: the evidence's report_path, --report-path, <job dir>/triage.md, and beside the log as
// triage-<job id>.md (or triage-<log name>.md when the job id is unknown, so that two jobs' reports
// beside the same logs never collide).
ReportPlacement place_report(const JobTarget& target, const std::string& report_path_option,
                             const std::string& evidence_report_path);

// The copy of a report kept for one attempt of a requeued job: "triage.md" -> "triage.attempt0.md"
// and "triage.json" -> "triage.attempt0.json", in the same directory.
ReportPlacement attempt_placement(const ReportPlacement& where, int attempt);

// Writes both files; `mode` is the files' permission bits.
void write_report(const ReportPlacement& where, const std::string& markdown,
                  const std::string& json, mode_t mode);

// Writes another file of the report (the TSDB timeline) into the report's directory, with the same
// guarantees as write_report.
void write_beside_report(const ReportPlacement& where, const std::string& name,
                         const std::string& data, mode_t mode);

// Permission bits for a report quoting a log with mode `log_mode`: never readable by more people
// than the log itself.
mode_t report_mode_for(mode_t log_mode);

}  // namespace triage
