// Hostlist expressions come from Slurm (job node lists), peers and the command line. Expansion
// must refuse what would exhaust memory, and compressing an expansion must expand back to the same
// hosts (as a set).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/hostlist.h"
#include "tests/fuzz/fuzz_support.h"

namespace {

bool plain_name(const std::string& h) {
  return !h.empty() && std::all_of(h.begin(), h.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  constexpr size_t kMaxHosts = 4096;
  std::vector<std::string> hosts;
  try {
    hosts = triage::expand_hostlist(triage::fuzz::as_view(data, size), "fuzz", kMaxHosts);
  } catch (const triage::InputError&) {
    return 0;
  }
  if (hosts.size() > kMaxHosts) std::abort();
  const std::string compact = triage::compress_hostlist(hosts);
  if (!std::all_of(hosts.begin(), hosts.end(), plain_name)) return 0;
  // Names that differ before their last number do not compress; such a list can outgrow what
  // the expander accepts (64 KiB), which it then refuses cleanly.
  if (compact.size() > 65536) return 0;
  std::vector<std::string> again = triage::expand_hostlist(compact, "fuzz", kMaxHosts * 2);
  // Compression drops repeated names, as Slurm's does; the set of hosts must survive.
  for (auto* v : {&hosts, &again}) {
    std::sort(v->begin(), v->end());
    v->erase(std::unique(v->begin(), v->end()), v->end());
  }
  if (hosts != again) std::abort();
  return 0;
}
