#include "collector/kmsg_record.h"

#include "common/percent_decode.h"
#include "common/text.h"

namespace triage::collector {

std::string unescape_kmsg(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size() && s[i + 1] == 'x') {
      const int hi = hex_digit_value(s[i + 2]);
      const int lo = hex_digit_value(s[i + 3]);
      if (hi >= 0 && lo >= 0) {
        out.push_back(static_cast<char>(hi * 16 + lo));
        i += 3;
        continue;
      }
    }
    out.push_back(s[i]);
  }
  return out;
}

std::optional<KmsgRecord> parse_kmsg_record(std::string_view raw, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<KmsgRecord> {
    if (error != nullptr) *error = why;
    return std::nullopt;
  };
  const size_t nl = raw.find('\n');
  const std::string_view head_line = raw.substr(0, nl);
  const size_t semi = head_line.find(';');
  if (semi == std::string_view::npos) return fail("no ';' after the record header");
  const auto fields = split(head_line.substr(0, semi), ',');
  if (fields.size() < 4) return fail("record header has fewer than 4 fields");
  const auto pri = parse_uint(fields[0]);
  const auto seq = parse_uint(fields[1]);
  const auto usec = parse_int(fields[2]);
  if (!pri || *pri > 1023) return fail("bad priority '" + std::string(fields[0]) + "'");
  if (!seq) return fail("bad sequence number '" + std::string(fields[1]) + "'");
  // The kernel counts nanoseconds since boot in 64 bits, so no real timestamp exceeds
  // 2^64 ns in microseconds; anything larger would overflow the time arithmetic downstream.
  constexpr int64_t kMaxUptimeUsec = static_cast<int64_t>(UINT64_MAX / 1000);
  if (!usec || *usec < 0 || *usec > kMaxUptimeUsec) {
    return fail("bad timestamp '" + std::string(fields[2]) + "'");
  }
  KmsgRecord r;
  r.priority = static_cast<int>(*pri & 7);
  r.facility = static_cast<int>(*pri >> 3);
  r.seq = *seq;
  r.usec = *usec;
  r.flags = fields[3].empty() ? '-' : fields[3][0];
  r.message = unescape_kmsg(head_line.substr(semi + 1));
  if (nl == std::string_view::npos) return r;
  for (std::string_view rest = raw.substr(nl + 1); !rest.empty();) {
    const size_t e = rest.find('\n');
    const std::string_view line = rest.substr(0, e);
    rest = e == std::string_view::npos ? std::string_view{} : rest.substr(e + 1);
    if (line.empty() || line[0] != ' ') continue;
    const std::string_view kv = line.substr(1);
    const size_t eq = kv.find('=');
    if (eq == std::string_view::npos) continue;
    const std::string_view key = kv.substr(0, eq);
    if (key == "DEVICE") r.device = unescape_kmsg(kv.substr(eq + 1));
    if (key == "SUBSYSTEM") r.subsystem = unescape_kmsg(kv.substr(eq + 1));
  }
  return r;
}

}  // namespace triage::collector
