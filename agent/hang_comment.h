// The job's AdminComment while a hang is flagged: our summary "triage=hang;flagged=<UTC>;step=<N>"
// (issue 14's `triage=<class>;...` shape, so the post-mortem summary later takes its place) and
// how it joins what is already there without clobbering another tool's text.
//
// AdminComment, not Comment: users can write Comment (so a "triage=hang" there proves nothing)
// and other tools read their own data from it (NVIDIA's job recovery reads JSON opt-ins);
// AdminComment is set only by root/SlurmUser/admins (docs/agent.md, "Live hangs"). jobstats
// overwrites AdminComment after the job ends: a later writer may still replace ours.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace triage::agent {

// The whole field we will write, theirs included: far under Slurm's 64 KiB column and short
// enough for `scontrol show job` and sacct output to stay readable.
inline constexpr size_t kMaxAdminCommentBytes = 1024;

// "triage=hang;flagged=2026-11-24T20:02:24Z;step=1200"; ";step=" is left out when no step was
// seen (step < 0). Only [a-z0-9=;:.TZ-] occur: nothing sacct -P or sacctmgr would mangle.
std::string hang_comment_summary(int64_t flagged_usec, int64_t step);

struct CommentMerge {
  bool write = false;  // false: leave the field as it is (`reason` says why)
  std::string value;   // the field's new value when `write`
  std::string reason;
};

// Contract: `ours` (a "triage=..." summary) replaces an earlier triage= segment of the field
// (one at its start or after a space), or is appended after a space; every other byte of
// `existing` is kept as it was, and nothing is written when the result would exceed `max_bytes`
// or equals `existing`.
CommentMerge merge_triage_comment(std::string_view existing, std::string_view ours,
                                  size_t max_bytes = kMaxAdminCommentBytes);

}  // namespace triage::agent
