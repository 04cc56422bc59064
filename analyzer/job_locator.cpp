#include "analyzer/job_locator.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>

#include "common/safe_io.h"
#include "common/text.h"

namespace triage {

namespace {

bool is_dir(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool exists_no_follow(const std::string& p) {
  struct stat st {};
  return ::lstat(p.c_str(), &st) == 0;
}

std::string strip_trailing_slashes(std::string p) {
  while (p.size() > 1 && p.back() == '/')
    p.pop_back();
  return p;
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty() || dir == ".") return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

void parse_job_name(const std::string& base, std::optional<uint64_t>& id, std::string& name) {
  id.reset();
  name.clear();
  std::string b = base;
  for (const std::string_view ext : {".log", ".out", ".err", ".txt"}) {
    if (ends_with(b, ext)) {
      b.resize(b.size() - ext.size());
      break;
    }
  }
  size_t digits = 0;
  while (digits < b.size() && b[digits] >= '0' && b[digits] <= '9')
    ++digits;
  if (digits > 0 && digits < 20 && (digits == b.size() || b[digits] == '-' || b[digits] == '_')) {
    id = parse_uint(b.substr(0, digits));
    if (digits + 1 < b.size()) name = b.substr(digits + 1);
    return;
  }
  // slurm-<id>.out, slurm-<id>_<task>.out
  if (b.rfind("slurm-", 0) == 0) {
    size_t e = 6;
    while (e < b.size() && b[e] >= '0' && b[e] <= '9')
      ++e;
    if (e > 6) id = parse_uint(b.substr(6, e - 6));
    return;
  }
  if (b.rfind("local_", 0) == 0) {
    const size_t dash = b.find('-');
    if (dash != std::string::npos) name = b.substr(dash + 1);
    return;
  }
  name = b;
}

ArgumentKind classify_argument(const std::string& arg) {
  const std::string a = strip_trailing_slashes(arg);
  struct stat st {};
  if (::stat(a.c_str(), &st) != 0) {
    const bool numeric =
        !a.empty() && std::all_of(a.begin(), a.end(), [](char c) { return c >= '0' && c <= '9'; });
    return numeric ? ArgumentKind::kJobId : ArgumentKind::kMissing;
  }
  if (S_ISDIR(st.st_mode)) {
    return exists_no_follow(join(a, "log")) ? ArgumentKind::kJobDir : ArgumentKind::kOutputsFolder;
  }
  return ArgumentKind::kLogFile;
}

JobTarget resolve_job_path(const std::string& path) {
  JobTarget t;
  const std::string p = strip_trailing_slashes(path);
  const auto [parent, base] = split_dir_base(p);
  if (is_dir(p)) {
    t.job_dir = p;
    t.log_path = join(p, "log");
    parse_job_name(base, t.job_id, t.job_name);
    if (!exists_no_follow(t.log_path)) {
      t.error = "job directory " + p + " has no 'log' entry";
      t.log_path.clear();
    }
    return t;
  }
  t.log_path = p;
  parse_job_name(base, t.job_id, t.job_name);
  // outputs/7877-FOO.log -> outputs/7877-FOO/
  for (const std::string_view ext : {".log", ".out"}) {
    if (ends_with(base, ext)) {
      const std::string sibling = join(parent, base.substr(0, base.size() - ext.size()));
      if (is_dir(sibling)) t.job_dir = sibling;
      break;
    }
  }
  return t;
}

JobTarget resolve_job_id(uint64_t job_id, const std::string& outputs_root) {
  JobTarget t;
  t.job_id = job_id;
  const std::string prefix = std::to_string(job_id) + "-";
  std::vector<DirEntry> entries;
  try {
    entries = list_dir(outputs_root, 1000000);
  } catch (const std::system_error& e) {
    t.error = "cannot list outputs root " + outputs_root + ": " + e.code().message();
    return t;
  }
  std::string dir_match;
  std::string log_match;
  for (const DirEntry& de : entries) {
    const std::string& name = de.name;
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string full = join(outputs_root, name);
    if (is_dir(full) && exists_no_follow(join(full, "log"))) {
      if (dir_match.empty() || name < dir_match) dir_match = name;
    } else if (ends_with(name, ".log")) {
      if (log_match.empty() || name < log_match) log_match = name;
    }
  }
  if (!dir_match.empty()) return resolve_job_path(join(outputs_root, dir_match));
  if (!log_match.empty()) return resolve_job_path(join(outputs_root, log_match));
  t.error = "no job " + std::to_string(job_id) + " under " + outputs_root + " (looked for " +
            prefix + "*)";
  return t;
}

std::vector<std::string> list_job_dirs(const std::string& outputs_dir,
                                       std::vector<std::string>* skipped, size_t max_entries) {
  std::vector<std::string> jobs;
  for (const DirEntry& de : list_dir(outputs_dir, max_entries)) {
    const std::string& name = de.name;
    const std::string full = join(outputs_dir, name);
    struct stat st {};
    if (::lstat(full.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
    if (exists_no_follow(join(full, "log"))) {
      jobs.push_back(name);
    } else if (skipped != nullptr) {
      skipped->push_back(name);
    }
  }
  if (skipped != nullptr) std::sort(skipped->begin(), skipped->end());
  return jobs;
}

}  // namespace triage
