// Helpers shared by the analyzer tests: scratch directories, running the slurm-triage binary, and
// the catalog as shipped in this source tree (never a site's /etc/slurm/triage.d).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "analyzer/log_scanner.h"
#include "analyzer/signature_catalog.h"

namespace triage::test {

// A fresh directory under the temp dir, removed (recursively) on destruction.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

void write_file(const std::filesystem::path& p, const std::string& content);
std::string read_file(const std::filesystem::path& p);

// Makes every rule lookup use this source tree's rules/ only.
void use_source_rules();
const SignatureCatalog& shipped_catalog();
const ScanPlan& shipped_plan();

// Scans text as if it were a log file.
ScanResult scan_text(const std::string& text, const ScanOptions& options = {});
// The same with another catalog's plan.
ScanResult scan_text_with(const ScanPlan& plan, const std::string& text);

struct RunResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};
// Runs the slurm-triage binary with `args` (stdin from `input`), in `cwd` when given.
RunResult run_cli(const std::vector<std::string>& args, const std::string& input = "",
                  const std::string& cwd = "");

// Copies a directory tree, keeping symlinks as symlinks.
void copy_tree(const std::filesystem::path& from, const std::filesystem::path& to);

}  // namespace triage::test
