// A GET /v1/history answer cut into its records without parsing them: a cluster's histories hold
// every job once per node it ran on, so the gatherer reads each record's top-level job_id and
// parses (and validates) only the first copy of a job. 64 agents x 10,000 records is 170 MiB of
// JSON; parsing all of it would take seconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::agent {

struct HistoryRecordText {
  std::string_view text;           // the record's JSON, as sent
  std::optional<uint64_t> job_id;  // its top-level "job_id" when that is a plain unsigned integer
};

struct HistoryAnswerText {
  std::string host;  // the answer's "host" when it is a string without escapes
  std::vector<HistoryRecordText> records;
};

// The records of `body` (an object with a "records" array), or nullopt when its structure is not
// that (unbalanced, truncated, no records array). Records are not validated here.
std::optional<HistoryAnswerText> split_history_answer(std::string_view body);

}  // namespace triage::agent
