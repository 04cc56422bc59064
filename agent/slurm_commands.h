// The Slurm commands of the accounting summary and of a requeue, as argv vectors (run without a
// shell, with a clean environment, like agent/hang_commands.h's), and the parsers of what they
// print. Nothing here runs anything.
//
// Why commands and not libslurm: after the job has ended only slurmdbd can change its record
// (sacctmgr; scontrol refuses a finished job), and the requeue's three steps must each report
// Slurm's own refusal text, which the report quotes (notes/slurm-accounting-and-requeue.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::agent {

// AccountingComment in triage.conf: the field the summary goes into.
enum class CommentField { kAdminComment, kComment, kNone };

// AdminComment, Comment or none, in any letter case.
std::optional<CommentField> parse_comment_field(std::string_view s);
std::string_view to_string(CommentField f);

// `sacct -n -X -P -j <job> -o <field>`: the field of the job's latest record (the one sacctmgr
// modifies: without -D both see only the last run of a requeued job).
std::vector<std::string> read_comment_argv(uint64_t job_id, CommentField field);

// `sacctmgr -i modify job where jobid=<job> set <field>=<value>`.
std::vector<std::string> write_comment_argv(uint64_t job_id, CommentField field,
                                            std::string_view value);

// The field as sacct printed it (one line); nullopt when it cannot be read back whole (no line:
// the record is not there yet; more than one: the field holds a newline).
std::optional<std::string> parse_read_comment(std::string_view sacct_out);

// `scontrol -o show job <job>`.
std::vector<std::string> show_job_argv(uint64_t job_id);

// What a requeue needs to know of the job, from `scontrol -o show job`.
struct ShownJob {
  std::string state;     // JobState
  bool batch = false;    // BatchFlag=1
  bool requeue = false;  // Requeue=1
  int restarts = 0;      // Restarts
  std::string excluded;  // ExcNodeList, "" for (null)
};

// The fields above from the first "Key=" of each (a value with spaces, a job name or a comment,
// cannot come before them in scontrol's order except for JobName; whatever it claims, Slurm
// itself refuses what it would misstate). nullopt when JobState is missing.
std::optional<ShownJob> parse_show_job(std::string_view scontrol_out);

// `scontrol requeuehold <job>`: back to PENDING, held, same id (the batch script's log is
// truncated only when the next attempt starts, which the hold keeps from happening).
std::vector<std::string> requeue_hold_argv(uint64_t job_id);
// `scontrol update JobId=<job> ExcNodeList=<hostlist>` (allowed only while the job is PENDING).
std::vector<std::string> exclude_nodes_argv(uint64_t job_id, std::string_view hostlist);
// `scontrol release <job>`.
std::vector<std::string> release_argv(uint64_t job_id);

// The job's excluded nodes with `add` joined in, as one hostlist in Slurm's compact form;
// throws InputError when `existing` is not a hostlist.
std::string merge_exclusions(std::string_view existing, const std::vector<std::string>& add);

}  // namespace triage::agent
