// Who may do what on the node's socket and HTTP endpoint: root and SlurmUser post lifecycle
// messages and read any job; everyone else reads only their own jobs.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace triage::agent {

struct CallerPolicy {
  std::optional<uid_t> slurm_uid;  // SlurmUser's uid; empty when that account does not exist

  // Root or SlurmUser.
  bool privileged(uid_t uid) const { return uid == 0 || (slurm_uid && uid == *slurm_uid); }
};

// A user name (or a numeric uid) to its uid; empty when there is no such account.
std::optional<uid_t> lookup_user(const std::string& name);

}  // namespace triage::agent
