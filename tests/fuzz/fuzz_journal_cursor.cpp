// Journal cursors come from the agent's own state file, which a disk error or a hand edit can
// turn into anything.
#include <cstdint>
#include <cstdlib>

#include "collector/journal_cursor.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto c = triage::collector::parse_journal_cursor(triage::fuzz::as_view(data, size));
  if (c && c->seqnum_id.size() > size) std::abort();
  return 0;
}
