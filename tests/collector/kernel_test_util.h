// Shared helpers for the kernel-log pipeline tests: the shipped catalogs, fixtures, scratch
// directories, and "run this text through the real text source and classifier".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "collector/kernel_pipeline.h"
#include "common/safe_io.h"

namespace triage::collector::testing {

// The catalogs in the source tree's rules/ (loaded once; a broken catalog fails the test).
std::shared_ptr<const KernelRules> shipped_rules();

// The contents of tests/collector/fixtures/kernel/<name>.
std::string fixture(const std::string& name);

// An anonymous in-memory file holding `text`, positioned at its start.
UniqueFd memory_file(std::string_view text);

// `text` through open_text_source and a fresh classifier for host node003, flushed at the end.
std::vector<KernelEvent> classify_text(std::string_view text, KernelClassifierOptions options = {});

// Every record the source yields until it is exhausted.
std::vector<KernelRecord> read_all(KernelSource& source);

// The events of one kind, in output order.
std::vector<const KernelEvent*> of_kind(const std::vector<KernelEvent>& events,
                                        std::string_view kind);

// A directory under $TMPDIR removed (recursively) when the object goes away.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

void write_file(const std::string& path, std::string_view data);

// Runs a command line through /bin/sh; returns its exit status and stdout (stderr is appended to
// stdout when `merge_stderr`).
int run_command(const std::string& cmd, std::string& output, bool merge_stderr = false);

}  // namespace triage::collector::testing
