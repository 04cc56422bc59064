// One /dev/kmsg record: "pri,seq,usec,flags[,more];message" followed by dictionary lines that
// start with a space (" SUBSYSTEM=pci", " DEVICE=+pci:0000:c1:00.0"). The kernel escapes bytes
// outside printable ASCII (and the backslash) as "\xNN"; they are decoded here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace triage::collector {

struct KmsgRecord {
  int priority = 0;  // syslog level, 0..7
  int facility = 0;  // 0 = the kernel; userspace writes into /dev/kmsg arrive with another one
  uint64_t seq = 0;
  int64_t usec = 0;  // timestamp, microseconds since boot
  char flags = '-';  // '-' or '+'/'c' (continuation fragments)
  std::string message;
  std::string device;     // DEVICE= from the dictionary
  std::string subsystem;  // SUBSYSTEM= from the dictionary
};

// Parses one record (header line plus dictionary lines, with or without the final newline).
// Returns nullopt and sets `error` when the header is malformed.
std::optional<KmsgRecord> parse_kmsg_record(std::string_view raw, std::string* error);

// "\x0a" -> byte 0x0a; anything else is kept as it is.
std::string unescape_kmsg(std::string_view s);

}  // namespace triage::collector
