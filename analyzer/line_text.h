// What a log line looks like under its decorations: the `srun -l` task labels ("  3: ", repeated
// when a labelled line is relabelled by an outer srun or a wrapper), Ray's worker prefix
// ("(Trainer pid=4711, ip=10.0.0.7) "), PyTorch's "[rank3]:" prefix, and a leading timestamp in the
// shapes training jobs print (ISO 8601 / Python logging, absl/glog "I1121 12:00:01.123456", each
// optionally in brackets).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace triage {

struct LineText {
  std::string_view raw;   // the whole line without its line break (and without a trailing CR)
  std::string_view text;  // raw minus the task labels, Ray's worker prefix and the [rankN]: prefix
  int64_t rank = -1;      // srun task label, else the [rankN]: number, else -1
};

// Splits off the decorations. Cheap: looks at the first few bytes only. The rank is the outermost
// label's (the srun that printed the line).
LineText split_line(std::string_view raw);

// Parses a timestamp at the start of `text` (after optional '[' and spaces). Timestamps without a
// zone are local time of this machine (the cluster's); absl/glog stamps have no year and take
// `year_hint` (0 = the current year).
std::optional<int64_t> leading_timestamp_usec(std::string_view text, int year_hint = 0);

// The same, saying whether the line named its zone (`Z` or an offset): only such a time is an
// instant; a naive one is a guess (the job may run with its own TZ) that is good for differences
// between the log's own lines.
struct LineTimestamp {
  int64_t usec = 0;
  bool zoned = false;
};
std::optional<LineTimestamp> leading_timestamp(std::string_view text, int year_hint = 0);

// The first timestamp in text[0, end) that starts the text or follows a separator (space, bracket,
// parenthesis, '|', ':', ','), for lines whose stamp stands behind a logging prefix such as
// "INFO 2026-11-21 12:00:01 ..." or "worker-3 | [2026-11-21T12:00:01Z] ...". Looks at the first 160
// bytes at most: a stamp further in is part of the message, not the line's.
std::optional<LineTimestamp> timestamp_before(std::string_view text, size_t end, int year_hint = 0);

// The calendar year (UTC) of a time, for year_hint.
int utc_year(int64_t usec);

}  // namespace triage
