// Becoming the job's owner before touching anything the owner controls. Root never opens a
// user-controlled path: it looks the owner up, drops uid, gid and supplementary groups for good,
// and only then opens the log, the job directory or the TSDB.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace triage {

struct Identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string user;
};

// Looks the user up in the passwd/group databases. When `gid` is given it is used as the primary
// group (Slurm's job gid may differ from the passwd entry). Throws std::runtime_error when the uid
// is unknown.
Identity identity_for_uid(uid_t uid, gid_t* gid = nullptr);

// setgroups + setresgid + setresuid to `who`, then checks that root cannot be regained. Throws
// std::system_error on any failure; the caller must not continue as root when this throws.
void drop_privileges_permanently(const Identity& who);

// The same drop made of system calls only, for a child between fork and exec (async-signal-safe:
// no allocation, no exception). Returns 0, or an errno value with `*failed_step` naming the call.
int drop_privileges_raw(const Identity& who, const char** failed_step) noexcept;

bool running_as_root();

}  // namespace triage
