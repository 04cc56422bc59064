// Clocks and timestamps. The wall clock can be pinned for reproducible analysis (--now EPOCH), so
// that "expected step by now" and hang detection can be tested.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace triage {

// Microseconds since the epoch; the pinned value when one is set.
int64_t now_usec();
void pin_now_usec(std::optional<int64_t> usec);
int64_t monotonic_usec();

// "2026-11-21T12:00:01Z" (seconds) or with ".123456" when `micros` is set.
std::string format_utc(int64_t usec, bool micros = false);

// Parses the timestamp shapes found in job logs and kernel logs: ISO 8601 / RFC 3339 with or
// without zone and fraction ("2026-11-21 12:00:01,123", "2026-11-21T12:00:01.5+00:00"), and
// "Sat Nov 21 12:00:01 2026" (dmesg -T). Times without a zone are taken as UTC. Returns
// microseconds since the epoch.
std::optional<int64_t> parse_timestamp_usec(std::string_view s);

}  // namespace triage
