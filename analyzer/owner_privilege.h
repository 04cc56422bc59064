// Running as the job's owner. When slurm-triage starts as root (the agent, or an administrator), it
// looks up who owns the job directory with lstat (opening nothing the user controls), drops to that
// user's uid, gid and groups, and only then opens the log or the directory. For an outputs/ folder
// whose jobs belong to different users, each job is analysed in a child process that drops to that
// job's owner.
#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "common/privilege.h"

namespace triage {

// The owner of `path` itself (lstat: a symlink's own owner), with that user's groups.
std::optional<Identity> path_owner(const std::string& path, std::string* error);

// Drops this process to `who` for good, unless it already runs as that uid.
void become(const Identity& who);

struct ChildOutcome {
  bool ok = false;       // the child ran fn and exited normally
  int exit_status = -1;  // fn's exit status
  std::string output;    // what fn returned
  std::string error;
};

// Forks; the child becomes `who` (when given) and runs `fn`, which returns an exit status and fills
// `output` (sent back over a pipe, at most 16 MiB).
ChildOutcome run_in_child_as(const std::optional<Identity>& who,
                             const std::function<int(std::string& output)>& fn);

}  // namespace triage
