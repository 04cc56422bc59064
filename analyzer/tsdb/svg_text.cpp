#include "analyzer/tsdb/svg_text.h"

#include <cstdio>

#include "common/text.h"

namespace triage {

std::string svg_text(std::string_view raw) {
  const std::string s = printable(raw);
  std::string out;
  out.reserve(s.size());
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        if (c < 0x20 && c != '\t') break;
        out += static_cast<char>(c);
    }
  }
  return out;
}

std::string svg_number(double v) {
  char buf[32];
  (void)std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

}  // namespace triage
