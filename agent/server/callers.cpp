#include "agent/server/callers.h"

#include <pwd.h>

#include <cstdint>

#include "common/text.h"

namespace triage::agent {

std::optional<uid_t> lookup_user(const std::string& name) {
  if (name.empty()) return std::nullopt;
  if (auto n = parse_uint(name); n && *n <= UINT32_MAX) return static_cast<uid_t>(*n);
  passwd pw{};
  passwd* res = nullptr;
  char buf[4096];
  if (::getpwnam_r(name.c_str(), &pw, buf, sizeof buf, &res) != 0 || res == nullptr)
    return std::nullopt;
  return pw.pw_uid;
}

}  // namespace triage::agent
