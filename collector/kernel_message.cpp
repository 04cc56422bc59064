#include "collector/kernel_message.h"

namespace triage::collector {

namespace {

bool is_hex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_alnum(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

// "dddd:bb:dd.f" at the start of `s`.
bool is_pci_address(std::string_view s) {
  if (s.size() < 12) return false;
  for (size_t i = 0; i < 12; ++i) {
    const char c = s[i];
    const bool want_colon = i == 4 || i == 7;
    const bool want_dot = i == 10;
    if (want_colon ? c != ':' : want_dot ? c != '.' : !is_hex(c)) return false;
  }
  return true;
}

}  // namespace

std::string_view prefix_device(std::string_view message) {
  const size_t sp = message.find(' ');
  if (sp == std::string_view::npos || sp == 0 || sp > 32) return {};
  const std::string_view rest = message.substr(sp + 1);
  if (!is_pci_address(rest) || rest.size() < 13 || (rest[12] != ':' && rest[12] != ' ')) return {};
  return rest.substr(0, 12);
}

std::string canonical_device(std::string_view device) {
  std::string d(device);
  // "0000:3b:00" (NVRM's Xid spelling) has no function number.
  const bool nvrm_form = d.size() == 10 && d[4] == ':' && d[7] == ':';
  if (nvrm_form || is_pci_address(d)) {
    for (char& c : d) {
      if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
    }
    if (nvrm_form) d += ".0";
  }
  return d;
}

void append_flood_shape(std::string& out, std::string_view message) {
  size_t i = 0;
  while (i < message.size()) {
    if (!is_alnum(message[i])) {
      out.push_back(message[i++]);
      continue;
    }
    size_t j = i;
    bool digit = false;
    while (j < message.size() && is_alnum(message[j])) {
      if (message[j] >= '0' && message[j] <= '9') digit = true;
      ++j;
    }
    if (digit) {
      out.push_back('#');
    } else {
      out.append(message.substr(i, j - i));
    }
    i = j;
  }
}

}  // namespace triage::collector
