// The Evidence JSON the agent hands the analyzer (and peers hand each other over HTTP): parsed
// strictly, and what parses must survive a round trip through its own serialisation.
#include <cstdint>
#include <cstdlib>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/model.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  triage::Evidence e;
  try {
    e = triage::parse_evidence(triage::fuzz::as_view(data, size), "fuzz");
  } catch (const triage::InputError&) {
    return 0;
  }
  nlohmann::json j;
  triage::to_json(j, e);
  const std::string text = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  triage::Evidence again;
  try {
    again = triage::parse_evidence(text, "round trip");
  } catch (const triage::InputError&) {
    std::abort();  // what we write, we must be able to read
  }
  nlohmann::json j2;
  triage::to_json(j2, again);
  if (j != j2) std::abort();
  return 0;
}
