#include "kernel_test_util.h"

#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <gtest/gtest.h>

namespace triage::collector::testing {

std::shared_ptr<const KernelRules> shipped_rules() {
  static const std::shared_ptr<const KernelRules> rules = [] {
    KernelRulesLoad load = load_kernel_rules({TRIAGE_SOURCE_RULES_DIR});
    for (const auto& e : load.errors)
      ADD_FAILURE() << e.what();
    return load.rules;
  }();
  if (!rules) throw std::runtime_error("the shipped kernel rules do not load");
  return rules;
}

std::string fixture(const std::string& name) {
  const std::string path = std::string(TRIAGE_KERNEL_FIXTURES) + "/" + name;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("missing fixture " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

UniqueFd memory_file(std::string_view text) {
  UniqueFd fd(::memfd_create("kernel-text", MFD_CLOEXEC));
  if (!fd) throw_errno("memfd_create", errno);
  write_all(fd.get(), text);
  if (::lseek(fd.get(), 0, SEEK_SET) != 0) throw_errno("lseek", errno);
  return fd;
}

std::vector<KernelRecord> read_all(KernelSource& source) {
  std::vector<KernelRecord> out;
  while (source.read(out, 0)) {
  }
  return out;
}

std::vector<KernelEvent> classify_text(std::string_view text, KernelClassifierOptions options) {
  UniqueFd fd = memory_file(text);
  auto source = open_text_source(fd.get(), "fixture");
  KernelClassifier classifier(shipped_rules(), "node003", options);
  std::vector<KernelEvent> events;
  for (const auto& r : read_all(*source))
    classifier.feed(r, events);
  classifier.flush(events);
  return events;
}

std::vector<const KernelEvent*> of_kind(const std::vector<KernelEvent>& events,
                                        std::string_view kind) {
  std::vector<const KernelEvent*> out;
  for (const auto& e : events) {
    if (e.kind == kind) out.push_back(&e);
  }
  return out;
}

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/slurm-triage-kernel-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw_errno("mkdtemp", errno);
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

void write_file(const std::string& path, std::string_view data) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

int run_command(const std::string& cmd, std::string& output, bool merge_stderr) {
  const std::string full = merge_stderr ? cmd + " 2>&1" : cmd;
  FILE* p = ::popen(full.c_str(), "r");
  if (p == nullptr) throw_errno("popen", errno);
  output.clear();
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0)
    output.append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

}  // namespace triage::collector::testing
