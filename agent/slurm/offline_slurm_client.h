// A SlurmClient for when slurmctld cannot be asked (a build without the libslurm client, or a
// client that failed to initialise): every call fails with the given reason, so the agent falls
// back to the epilog's facts and reports drains as impossible instead of pretending.
#pragma once

#include <memory>
#include <string>

#include "agent/slurm/slurm_client.h"

namespace triage::agent {

std::unique_ptr<SlurmClient> make_offline_slurm_client(std::string reason);

}  // namespace triage::agent
