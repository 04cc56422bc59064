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

// Whether slurmctld clears a node's reason when it leaves DRAIN or DOWN (RESUME, UNDRAIN) in a
// cluster without accounting storage (AccountingStorageType=accounting_storage/none). Up to
// 23.02, clusteracct_storage_g_node_up() cleared it before calling the storage plugin; from
// 23.11.0 it returns first when that plugin is a no-op, so the idle node keeps its old reason,
// author and time (with slurmdbd it is cleared on every release). The agent does not depend on
// it (agent/drain_steps.h compares a reason's author and time too); the tests state each case.
inline constexpr bool kResumeClearsReasonWithoutAccounting =
    SLURM_VERSION_NUMBER < SLURM_VERSION_NUM(23, 11, 0);

}  // namespace triage::slurm_compat
