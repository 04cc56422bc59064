// Diagnostics of our own programs (not the reports): spdlog to stderr, or to the journal's stderr
// capture when run under systemd.
#pragma once

#include <string_view>

namespace triage {

// `level`: trace, debug, info, warn, error. Safe to call more than once.
void init_logging(std::string_view program, std::string_view level = "info");

}  // namespace triage
