// Slurm hostlist expressions: "node[001-004,7],gpu-a[1-2]b" <-> a list of names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace triage {

// Expands a hostlist. Throws InputError(origin, 0, ...) on malformed input and when the expansion
// would exceed `max_hosts` (a typo such as "n[1-99999999]" must not exhaust memory).
std::vector<std::string> expand_hostlist(std::string_view expr,
                                         const std::string& origin = "hostlist",
                                         size_t max_hosts = 100000);

// The compact form Slurm prints ("node[001-004,007]"); hosts are grouped by prefix and kept in
// the given order otherwise.
std::string compress_hostlist(const std::vector<std::string>& hosts);

}  // namespace triage
