// One request on a fresh connection to a Unix stream socket, the way the SPANK plugin talks to the
// agent: a line out, the first line of the answer back.
#pragma once

#include <string>

namespace triage::bench {

// Sends `line` and a newline to `socket_path` and returns what came back up to its first newline
// (waiting at most 10 s for each piece); empty when the connection or the send failed.
std::string unix_request(const std::string& socket_path, const std::string& line);

}  // namespace triage::bench
