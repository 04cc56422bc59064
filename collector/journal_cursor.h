// The fields of a journal cursor ("s=<seqnum id>;i=<seqnum>;b=<boot>;m=<monotonic>;t=<realtime>;
// x=<hash>"), all hex. The journal treats cursors as opaque, but when the entry a saved cursor
// names has been vacuumed away, its realtime and sequence number are what tells where to go on.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace triage::collector {

struct JournalCursor {
  std::string seqnum_id;
  uint64_t seqnum = 0;
  std::string boot_id;
  uint64_t monotonic_usec = 0;
  uint64_t realtime_usec = 0;
};

// nullopt unless at least the sequence number and the realtime are present and well formed.
std::optional<JournalCursor> parse_journal_cursor(std::string_view cursor);

}  // namespace triage::collector
