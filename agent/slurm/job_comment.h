// The one format of what slurm-triage writes into a job's comment field (AdminComment by default,
// `AccountingComment` in triage.conf): a single "triage=..." segment of `key=value` pairs joined by
// ';', with no space, '|', newline or quote in it, placed among whatever other tools wrote there
// without changing a byte of theirs. The post-mortem summary is
//   triage=<class>;blame=<blame>;nodes=<hostlist>;report=<path>
// (with ";requeue=stopped-crashloop" after the blame when the crashloop stop ended a requeue)
// and a live hang's is agent/live/hang_comment.h's "triage=hang;flagged=...". Pure functions only.
//
// Why the shape: `sacct -P` does not escape '|' or newlines inside a field, Slurm 22.05's sacctmgr
// lowercases AdminComment and every version turns quotes into backticks
// (notes/slurm-accounting-and-requeue.md). A segment ends at the first space, so ours is easy to
// find again and replace, and another tool's text (jobstats' "JS1:<base64>") is never touched.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/model.h"

namespace triage::agent {

// The whole field we will write, theirs included: far under Slurm's 64 KiB column and short
// enough for `scontrol show job` and sacct output to stay readable.
inline constexpr size_t kMaxAdminCommentBytes = 1024;
// Our own segment: a 256-node job's hostlist and a long report path still fit; more is cut.
inline constexpr size_t kMaxTriageSummaryBytes = 384;

// What the post-mortem summary says about one job (attempt).
struct TriageSummary {
  std::string cls;                 // the primary failure's class, or the status when none
  std::string blame;               // whose fault; "none" when the analysis gave none
  std::vector<std::string> nodes;  // the nodes the evidence implicates
  std::string report;              // where the report is ("" to leave report= out)
  // What --triage-requeue decided when accounting should carry it ("stopped-crashloop"); "" to
  // leave requeue= out.
  std::string requeue;
};

// Contract: "triage=<cls>;blame=<blame>[;requeue=<word>];nodes=<hostlist>;report=<path>" within
// `max_bytes`, every byte outside [A-Za-z0-9/._,:@~[]-] percent-encoded as %xx (lowercase hex,
// unchanged by 22.05's lowercasing), cut when too long by leaving out report= first and then the
// nodes at the end of the hostlist (their count kept as "+<n>").
std::string compose_triage_summary(const TriageSummary& s,
                                   size_t max_bytes = kMaxTriageSummaryBytes);

struct CommentMerge {
  bool write = false;      // false: leave the field as it is (`reason` says why)
  bool unchanged = false;  // not written because the field already says it
  std::string value;       // the field's new value when `write`
  std::string reason;
};

// Contract: `ours` (a "triage=..." summary) replaces an earlier triage= segment of the field
// (one at its start or after a space), or is appended after a space; every other byte of
// `existing` is kept as it was, and nothing is written when the result would exceed `max_bytes`
// or equals `existing`.
CommentMerge merge_triage_comment(std::string_view existing, std::string_view ours,
                                  size_t max_bytes = kMaxAdminCommentBytes);

// A job the preflight refused on a node (docs/agent.md, "Preflight"; Slurm then runs it elsewhere,
// or cancels an interactive one) carries, besides the summary, one "triage-refused=<node>:<why>"
// segment: the node and the refusal's reason, encoded as the summary is. Only root and Slurm's
// operators may write AdminComment, so a user cannot forge it.
inline constexpr size_t kMaxRefusedSegmentBytes = 320;

// Contract: "triage-refused=<node>:<why>" within `max_bytes`, node and reason percent-encoded as in
// compose_triage_summary; the reason is cut (never inside an escape) when too long.
std::string compose_refused_segment(std::string_view node, std::string_view why,
                                    size_t max_bytes = kMaxRefusedSegmentBytes);

// Contract: as merge_triage_comment, for the triage-refused= segment (the latest refusal replaces
// an earlier one); a triage= summary and other tools' text are kept as they are.
CommentMerge merge_refused_comment(std::string_view existing, std::string_view ours,
                                   size_t max_bytes = kMaxAdminCommentBytes);

// Contract: the node and reason of the field's triage-refused= segment, decoded (%xx of either
// letter case, as 22.05's sacctmgr may have lowercased it); nothing when the field has no such
// segment or its node is empty. A bad escape is kept as it is rather than guessed at.
std::optional<MovedNote> refused_from_comment(std::string_view comment);

// Contract: merge_triage_comment for a write through sacctmgr, which would turn quotes in other
// tools' text into backticks (and cannot be read back whole when the field holds '|' or a
// newline): nothing is written then, and a value that differs from `existing` only in letter case
// (22.05 lowercased our earlier write) counts as already written.
CommentMerge merge_accounting_comment(std::string_view existing, std::string_view ours,
                                      size_t max_bytes = kMaxAdminCommentBytes);

}  // namespace triage::agent
