// Munge credentials for peer requests. The payload of a credential is the HTTP request target it
// authorises ("/v1/jobs/4242/events"), so a captured credential cannot be used for another job;
// munged itself refuses a credential it has already decoded (replay).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace triage::agent {

// A credential carrying `payload`, or nullopt with `error` (munged not running, ...).
std::optional<std::string> munge_credential(const std::string& socket, const std::string& payload,
                                            std::string& error);

struct MungeDecoded {
  bool ok = false;
  uid_t uid = 0;
  gid_t gid = 0;
  std::string payload;
  std::string error;
};

MungeDecoded munge_verify(const std::string& socket, const std::string& credential);

}  // namespace triage::agent
