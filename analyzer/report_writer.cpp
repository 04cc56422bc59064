#include "analyzer/report_writer.h"

#include <stdexcept>

#include "common/report_names.h"
#include "common/safe_io.h"

namespace triage {

namespace {

ReportPlacement from_path(const std::string& md_path) {
  ReportPlacement p;
  auto [dir, base] = split_dir_base(md_path);
  if (base.empty()) throw std::invalid_argument("report path '" + md_path + "' names no file");
  p.dir = dir;
  p.md_name = base;
  const std::string stem = base.size() > 3 && base.compare(base.size() - 3, 3, ".md") == 0
                               ? base.substr(0, base.size() - 3)
                               : base;
  p.json_name = stem + ".json";
  if (p.json_name == p.md_name) p.json_name = stem + ".triage.json";
  return p;
}

}  // namespace

std::string ReportPlacement::md_path() const {
  return dir == "." ? md_name : dir + "/" + md_name;
}
std::string ReportPlacement::json_path() const {
  return dir == "." ? json_name : dir + "/" + json_name;
}

ReportPlacement place_report(const JobTarget& target, const std::string& report_path_option,
                             const std::string& evidence_report_path) {
  if (!evidence_report_path.empty()) return from_path(evidence_report_path);
  if (!report_path_option.empty()) return from_path(report_path_option);
  if (!target.job_dir.empty()) return from_path(target.job_dir + "/triage.md");
  if (target.log_path.empty())
    throw std::invalid_argument("no job directory and no log: nowhere to write the report");
  const auto [dir, base] = split_dir_base(target.log_path);
  std::string tag;
  if (target.job_id) {
    tag = std::to_string(*target.job_id);
  } else {
    tag = base;
    const size_t dot = tag.rfind('.');
    if (dot != std::string::npos && dot > 0) tag.resize(dot);
  }
  return from_path(dir + "/triage-" + tag + ".md");
}

ReportPlacement attempt_placement(const ReportPlacement& where, int attempt) {
  ReportPlacement p = where;
  p.md_name = attempt_report_name(where.md_name, attempt);
  p.json_name = attempt_report_name(where.json_name, attempt);
  return p;
}

void write_report(const ReportPlacement& where, const std::string& markdown,
                  const std::string& json, mode_t mode) {
  UniqueFd dir = open_dir(where.dir, false);
  atomic_write_at(dir.get(), where.md_name, markdown, mode);
  atomic_write_at(dir.get(), where.json_name, json, mode);
}

void write_beside_report(const ReportPlacement& where, const std::string& name,
                         const std::string& data, mode_t mode) {
  UniqueFd dir = open_dir(where.dir, false);
  atomic_write_at(dir.get(), name, data, mode);
}

mode_t report_mode_for(mode_t log_mode) {
  return 0600 | (log_mode & 0044);
}

}  // namespace triage
