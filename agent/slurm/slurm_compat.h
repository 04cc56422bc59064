// Every difference between the libslurm releases slurm-triage is built against (22.05 to 24.11),
// behind the version macros of Slurm's own slurm_version.h. Nothing else in the tree tests
// SLURM_VERSION_NUMBER: code that talks to libslurm includes this and calls what it defines.
// What was compared between the releases, and found equal, is in docs/slurm-versions.md.
#pragma once

#include <slurm/slurm.h>
#include <slurm/slurm_errno.h>
#include <slurm/slurm_version.h>

#include <cerrno>

// 22.05 is the oldest release in service (Debian 12) and the oldest the tree is checked against.
#if SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(22, 5, 0)
#error "slurm-triage needs Slurm 22.05 or newer (docs/slurm-versions.md)"
#endif

namespace triage::slurm_compat {

// The error code of the libslurm call that just failed, for slurm_strerror().
// Slurm 24.11.0 removed slurm_get_errno() (SchedMD commit c728b40c, "Remove slurm_get_errno().
// Just manage errno directly"); before, it returned errno and nothing else (slurm_errno.c), so
// both branches read the same value, each through what its release declares.
inline int last_error() {
#if SLURM_VERSION_NUMBER >= SLURM_VERSION_NUM(24, 11, 0)
  return errno;
#else
  return slurm_get_errno();
#endif
}

}  // namespace triage::slurm_compat
