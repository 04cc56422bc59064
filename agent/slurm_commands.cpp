#include "agent/slurm_commands.h"

#include <algorithm>
#include <charconv>
#include <stdexcept>

#include "common/hostlist.h"

namespace triage::agent {

namespace {

// Job 0 does not exist; a command for it would be a bug upstream, never a request.
std::string job_arg(uint64_t job_id) {
  if (job_id == 0) throw std::invalid_argument("Slurm command for job 0");
  return std::to_string(job_id);
}

std::string field_name(CommentField f) {
  if (f == CommentField::kNone) throw std::invalid_argument("no comment field to read or write");
  return std::string(to_string(f));
}

// The value of the first " Key=" (or "Key=" at the start) up to the next space.
std::optional<std::string_view> field(std::string_view text, std::string_view key) {
  for (size_t at = text.find(key); at != std::string_view::npos; at = text.find(key, at + 1)) {
    const bool starts = at == 0 || text[at - 1] == ' ' || text[at - 1] == '\n';
    if (!starts || text.substr(at + key.size(), 1) != "=") continue;
    const size_t from = at + key.size() + 1;
    const size_t end = text.find_first_of(" \n", from);
    return text.substr(from, end == std::string_view::npos ? text.size() - from : end - from);
  }
  return std::nullopt;
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

std::vector<std::string> read_comment_argv(uint64_t job_id, CommentField field) {
  return {"sacct", "-n", "-X", "-P", "-j", job_arg(job_id), "-o", field_name(field)};
}

std::vector<std::string> write_comment_argv(uint64_t job_id, CommentField field,
                                            std::string_view value) {
  return {"sacctmgr", "-i",
          "modify",   "job",
          "where",    "jobid=" + job_arg(job_id),
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

std::vector<std::string> show_job_argv(uint64_t job_id) {
  return {"scontrol", "-o", "show", "job", job_arg(job_id)};
}

std::optional<ShownJob> parse_show_job(std::string_view out) {
  const auto state = field(out, "JobState");
  if (!state) return std::nullopt;
  ShownJob j;
  j.state = std::string(*state);
  j.batch = field(out, "BatchFlag") == std::optional<std::string_view>("1");
  j.requeue = field(out, "Requeue") == std::optional<std::string_view>("1");
  if (const auto r = field(out, "Restarts")) {
    int n = 0;
    const auto [end, ec] = std::from_chars(r->data(), r->data() + r->size(), n);
    if (ec == std::errc() && end == r->data() + r->size()) j.restarts = n;
  }
  if (const auto e = field(out, "ExcNodeList"); e && *e != "(null)") j.excluded = std::string(*e);
  return j;
}

std::vector<std::string> requeue_hold_argv(uint64_t job_id) {
  return {"scontrol", "requeuehold", job_arg(job_id)};
}

std::vector<std::string> exclude_nodes_argv(uint64_t job_id, std::string_view hostlist) {
  if (hostlist.empty()) throw std::invalid_argument("no nodes to exclude");
  return {"scontrol", "update", "JobId=" + job_arg(job_id), "ExcNodeList=" + std::string(hostlist)};
}

std::vector<std::string> release_argv(uint64_t job_id) {
  return {"scontrol", "release", job_arg(job_id)};
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
