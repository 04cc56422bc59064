// Boot ids in one spelling: the journal's 32 lowercase hex digits. /proc gives them with dashes.
#pragma once

#include <string>
#include <string_view>

namespace triage {

// Lowercases and drops dashes and surrounding whitespace; "" when the result is not 32 hex digits.
std::string normalize_boot_id(std::string_view s);

// Reads and normalizes a boot id file (/proc/sys/kernel/random/boot_id); throws on I/O errors
// and when the content is not a boot id.
std::string read_boot_id(const std::string& path);

}  // namespace triage
