// Raw clients for the abuse tests: they connect, write byte by byte, and measure, where the
// helpers in tests/agent/test_support.h speak the protocol politely.
#pragma once

#include <sys/resource.h>
#include <sys/socket.h>

#include <chrono>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/agent/test_support.h"

namespace triage::hardening {

using agent::testing::connect_tcp;
using agent::testing::connect_unix;
bool send_all(int fd, std::string_view data);
// Reads until a newline (or, when `until_newline` is false, until EOF) or `timeout_ms` passes.
std::string read_some(int fd, int timeout_ms, bool until_newline = true);
// true when the peer closed the connection within `timeout_ms`.
bool closed_within(int fd, int timeout_ms);

// How long a socket ping takes; fails the test when the answer is not ok.
std::chrono::milliseconds ping_time(const std::string& socket);

// Raises the soft RLIMIT_NOFILE to at least `want`; false when the hard limit is lower and cannot
// be raised (not root).
bool raise_fd_limit(rlim_t want);

}  // namespace triage::hardening
