#include "agent/slurm/slurm_commands.h"

#include <algorithm>
#include <stdexcept>

#include "common/hostlist.h"

namespace triage::agent {

namespace {

// A JobRef that job_ref() did not make (empty) would be a bug upstream, never a request.
const std::string& ctld_arg(const JobRef& job) {
  if (job.controller.empty()) throw std::invalid_argument("Slurm command for no job");
  return job.controller;
}

const std::string& acct_arg(const JobRef& job) {
  if (job.accounting.empty()) throw std::invalid_argument("accounting command for no job");
  return job.accounting;
}

std::string field_name(CommentField f) {
  if (f == CommentField::kNone) throw std::invalid_argument("no comment field to read or write");
  return std::string(to_string(f));
}

}  // namespace

std::optional<CommentField> parse_comment_field(std::string_view s) {
  std::string lower(s);
  for (char& c : lower)
    c = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
  if (lower == "admincomment") return CommentField::kAdminComment;
  if (lower == "comment") return CommentField::kComment;
  if (lower == "none") return CommentField::kNone;
  return std::nullopt;
}

std::string_view to_string(CommentField f) {
  switch (f) {
    case CommentField::kAdminComment:
      return "AdminComment";
    case CommentField::kComment:
      return "Comment";
    case CommentField::kNone:
      return "none";
  }
  return "none";
}

std::vector<std::string> read_comment_argv(const JobRef& job, CommentField field) {
  return {"sacct", "-n", "-X", "-P", "-j", acct_arg(job), "-o", field_name(field)};
}

std::vector<std::string> write_comment_argv(const JobRef& job, CommentField field,
                                            std::string_view value) {
  return {"sacctmgr", "-i",
          "modify",   "job",
          "where",    "jobid=" + acct_arg(job),
          "set",      field_name(field) + "=" + std::string(value)};
}

std::optional<std::string> parse_read_comment(std::string_view sacct_out) {
  if (sacct_out.empty()) return std::nullopt;
  if (sacct_out.back() == '\n') sacct_out.remove_suffix(1);
  if (sacct_out.find('\n') != std::string_view::npos) return std::nullopt;
  std::string v(sacct_out);
  // sacct pads nothing with -P, but prints trailing blanks of its own on some versions.
  while (!v.empty() && v.back() == ' ')
    v.pop_back();
  return v;
}

std::vector<std::string> requeue_hold_argv(const JobRef& job) {
  return {"scontrol", "requeuehold", ctld_arg(job)};
}

std::vector<std::string> exclude_nodes_argv(const JobRef& job, std::string_view hostlist) {
  if (hostlist.empty()) throw std::invalid_argument("no nodes to exclude");
  return {"scontrol", "update", "JobId=" + ctld_arg(job), "ExcNodeList=" + std::string(hostlist)};
}

std::vector<std::string> release_argv(const JobRef& job) {
  return {"scontrol", "release", ctld_arg(job)};
}

std::string merge_exclusions(std::string_view existing, const std::vector<std::string>& add) {
  std::vector<std::string> all =
      existing.empty() ? std::vector<std::string>{} : expand_hostlist(existing, "ExcNodeList");
  for (const std::string& n : add) {
    if (std::find(all.begin(), all.end(), n) == all.end()) all.push_back(n);
  }
  return compress_hostlist(all);
}

}  // namespace triage::agent
