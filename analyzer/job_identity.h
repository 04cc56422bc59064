// Which job a report is about: shared by the locator's result, the diagnosis input and the report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace triage {

struct JobIdentity {
  std::string log_path;  // "" when no log was found
  std::string job_dir;   // "" when the job has no directory
  std::optional<uint64_t> job_id;
  std::string job_name;
  std::string user;
};

}  // namespace triage
