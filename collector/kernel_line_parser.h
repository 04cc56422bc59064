// Recognises the prefixes that tools put in front of kernel messages when they print them as text,
// so that one set of rules matches the kernel's own words whatever tool printed them:
//
//   [  123.456789] msg                              dmesg (raw), journalctl -o short-monotonic
//   [Sat Nov 21 12:00:01 2026] msg                  dmesg -T
//   2026-11-21T12:00:01,123456+00:00 msg            dmesg --time-format iso
//   Nov 21 12:00:01 node003 kernel: msg             journalctl -k, /var/log/kern.log
//   2026-11-21T12:00:01+0000 node003 kernel: msg    journalctl -o short-iso[-precise]
//   <6>[  123.456789] msg                           dmesg -r
//   kern  :err   : [  123.456789] msg               dmesg -x
//   kernel: msg                                     a bare tag
//    kernel:[  123.456789] msg                      syslogd's console broadcast
//   Apr  9 21:05:38 node003 INFO kernel: msg        rsyslog templates with the severity
//   [Nov21 12:00] msg, [  +0.000049] msg            dmesg -H (no time is taken from them)
// plus printk caller ids ("[  T1234] "), kern.log's inner "[  123.456789] " after the tag, and
// journalctl's "-- Boot <id> --" separators.
#pragma once

#include <cstdint>
#include <string_view>

namespace triage::collector {

enum class LineKind {
  kMessage,     // a kernel message (possibly empty)
  kBoot,        // "-- Boot <id> --" or "-- Reboot --": later lines belong to another boot
  kAnnotation,  // journalctl's other "-- ... --" lines ("-- No entries --")
};

struct ParsedLine {
  LineKind kind = LineKind::kMessage;
  size_t message_offset = 0;
  int64_t realtime_usec = 0;    // 0 = not printed
  int64_t monotonic_usec = -1;  // -1 = not printed
  int priority = -1;
  int facility = -1;
  std::string_view host;
  std::string_view boot_id;  // for kBoot: the id journalctl printed (empty for "-- Reboot --")
};

// `now_usec` resolves syslog timestamps that carry no year: the year that puts them at most a day
// after now is taken.
ParsedLine parse_kernel_line(std::string_view line, int64_t now_usec);

}  // namespace triage::collector
