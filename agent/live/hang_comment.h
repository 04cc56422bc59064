// The job's AdminComment while a hang is flagged: our summary "triage=hang;flagged=<UTC>;step=<N>"
// (issue 14's `triage=<class>;...` shape, so the post-mortem summary later takes its place). How it
// joins what is already there is agent/slurm/job_comment.h's merge_triage_comment.
//
// AdminComment, not Comment: users can write Comment (so a "triage=hang" there proves nothing)
// and other tools read their own data from it (NVIDIA's job recovery reads JSON opt-ins);
// AdminComment is set only by root/SlurmUser/admins (docs/agent.md, "Live hangs"). jobstats
// overwrites AdminComment after the job ends: a later writer may still replace ours.
#pragma once

#include <cstdint>
#include <string>

#include "agent/slurm/job_comment.h"

namespace triage::agent {

// "triage=hang;flagged=2026-11-24T20:02:24Z;step=1200"; ";step=" is left out when no step was
// seen (step < 0). Only [a-z0-9=;:.TZ-] occur: nothing sacct -P or sacctmgr would mangle.
std::string hang_comment_summary(int64_t flagged_usec, int64_t step);

}  // namespace triage::agent
