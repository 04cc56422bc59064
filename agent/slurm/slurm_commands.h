// The Slurm commands of the accounting summary and of a requeue, as argv vectors (run without a
// shell, with a clean environment, like agent/live/hang_commands.h's), and the parser of what sacct
// prints. Nothing here runs anything. Each names one job attempt (agent/slurm/job_ref.h); the job's
// record itself is read through libslurm (SlurmClient::load_job), never from scontrol's text,
// where a job name can hold " Restarts=0".
//
// Why commands and not libslurm: after the job has ended only slurmdbd can change its record
// (sacctmgr; scontrol refuses a finished job), and the requeue's three steps must each report
// Slurm's own refusal text, which the report quotes (notes/slurm-accounting-and-requeue.md).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/slurm/job_ref.h"

namespace triage::agent {

// AccountingComment in triage.conf: the field the summary goes into.
enum class CommentField { kAdminComment, kComment, kNone };

// AdminComment, Comment or none, in any letter case.
std::optional<CommentField> parse_comment_field(std::string_view s);
std::string_view to_string(CommentField f);

// `sacct -n -X -P -j <job> -o <field>`: the field of the job's latest record (the one sacctmgr
// modifies: without -D both see only the last run of a requeued job). One field: a job name or
// comment cannot pose as another column. <job> is JobRef::accounting: slurmdbd selects the same
// rows for sacct and sacctmgr (as_mysql_jobacct_process_get_jobs), and A_T matches only
// (id_array_job, id_array_task) = (A, T) where a bare A would match the whole array.
std::vector<std::string> read_comment_argv(const JobRef& job, CommentField field);

// `sacctmgr -i modify job where jobid=<job> set <field>=<value>`.
std::vector<std::string> write_comment_argv(const JobRef& job, CommentField field,
                                            std::string_view value);

// The field as sacct printed it (one line); nullopt when it cannot be read back whole (no line:
// the record is not there yet; more than one: the field holds a newline).
std::optional<std::string> parse_read_comment(std::string_view sacct_out);

// `scontrol requeuehold <job>`: back to PENDING, held, same id (the batch script's log is
// truncated only when the next attempt starts, which the hold keeps from happening).
std::vector<std::string> requeue_hold_argv(const JobRef& job);
// `scontrol update JobId=<job> ExcNodeList=<hostlist>` (allowed only while the job is PENDING).
std::vector<std::string> exclude_nodes_argv(const JobRef& job, std::string_view hostlist);
// `scontrol release <job>`.
std::vector<std::string> release_argv(const JobRef& job);

// The job's excluded nodes with `add` joined in, as one hostlist in Slurm's compact form;
// throws InputError when `existing` is not a hostlist.
std::string merge_exclusions(std::string_view existing, const std::vector<std::string>& add);

}  // namespace triage::agent
