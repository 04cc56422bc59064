// The agent's HTTP endpoint reads request heads from any host that can reach its port: the head
// parser (request line, headers, size limits, refused bodies) and the query string decoder.
#include <cstdint>
#include <cstdlib>

#include "agent/net/http_message.h"
#include "tests/fuzz/fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input = triage::fuzz::as_view(data, size);
  triage::agent::HttpRequest request;
  const auto r = triage::agent::parse_http_request(input, 8192, request);
  switch (r.state) {
    case triage::agent::HttpParse::kOk:
      if (r.consumed == 0 || r.consumed > input.size()) std::abort();
      (void)triage::agent::parse_query(request.query);
      break;
    case triage::agent::HttpParse::kError:
      if (r.status < 400 || r.status > 599) std::abort();
      break;
    case triage::agent::HttpParse::kIncomplete:
      break;
  }
  (void)triage::agent::parse_query(input);
  return 0;
}
