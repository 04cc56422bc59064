#include "test_support.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/safe_io.h"

namespace triage::test {

namespace fs = std::filesystem;

ScratchDir::ScratchDir(const std::string& tag) {
  std::string templ = (fs::temp_directory_path() / ("st-" + tag + "-XXXXXX")).string();
  if (::mkdtemp(templ.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = templ;
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file(const fs::path& p, const std::string& content) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << content;
  if (!f) throw std::runtime_error("cannot write " + p.string());
}

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

void use_source_rules() {
  ::setenv("SLURM_TRIAGE_DATADIR", TRIAGE_SOURCE_DIR, 1);
  ::setenv("SLURM_TRIAGE_RULES_OVERRIDE", "", 1);
  ::setenv("TZ", "UTC", 1);
  ::tzset();
}

const SignatureCatalog& shipped_catalog() {
  static const SignatureCatalog cat = [] {
    use_source_rules();
    std::vector<InputError> errors;
    SignatureCatalog c = SignatureCatalog::load({}, errors);
    for (const auto& e : errors)
      ADD_FAILURE() << e.what();
    return c;
  }();
  return cat;
}

const ScanPlan& shipped_plan() {
  static const ScanPlan plan(shipped_catalog());
  return plan;
}

ScanResult scan_text(const std::string& text, const ScanOptions& options) {
  ScratchDir d("scan");
  write_file(d / "log", text);
  UniqueFd fd = open_regular_file((d / "log").string(), true);
  return scan_log(fd.get(), shipped_plan(), options);
}

ScanResult scan_text_with(const ScanPlan& plan, const std::string& text) {
  ScratchDir d("scan");
  write_file(d / "log", text);
  UniqueFd fd = open_regular_file((d / "log").string(), true);
  return scan_log(fd.get(), plan, {});
}

RunResult run_cli(const std::vector<std::string>& args, const std::string& input,
                  const std::string& cwd) {
  use_source_rules();
  int in[2];
  int out[2];
  int err[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0) {
    throw std::runtime_error("pipe");
  }
  std::vector<std::string> argv_s = {TRIAGE_CLI_BINARY};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::vector<char*> argv;
  argv.reserve(argv_s.size() + 1);
  for (auto& a : argv_s)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    if (!cwd.empty() && ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  RunResult r;
  size_t written = 0;
  bool in_open = true;
  if (input.empty()) {
    ::close(in[1]);
    in_open = false;
  }
  bool out_open = true;
  bool err_open = true;
  char buf[65536];
  while (out_open || err_open) {
    struct pollfd pfd[3] = {
        {out[0], POLLIN, 0}, {err[0], POLLIN, 0}, {in_open ? in[1] : -1, POLLOUT, 0}};
    if (::poll(pfd, 3, 60000) <= 0) break;
    if (in_open && (pfd[2].revents & (POLLOUT | POLLERR | POLLHUP)) != 0) {
      const ssize_t n =
          ::write(in[1], input.data() + written, std::min<size_t>(input.size() - written, 65536));
      if (n > 0) written += static_cast<size_t>(n);
      if (n <= 0 || written == input.size()) {
        ::close(in[1]);
        in_open = false;
      }
    }
    for (int k = 0; k < 2; ++k) {
      if ((pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      const ssize_t n = ::read(pfd[k].fd, buf, sizeof buf);
      if (n > 0) {
        (k == 0 ? r.out : r.err).append(buf, static_cast<size_t>(n));
      } else {
        (k == 0 ? out_open : err_open) = false;
      }
    }
  }
  if (in_open) ::close(in[1]);
  ::close(out[0]);
  ::close(err[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void copy_tree(const fs::path& from, const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::recursive_directory_iterator(from)) {
    const fs::path rel = e.path().lexically_relative(from);
    const fs::path dst = to / rel;
    if (e.is_symlink()) {
      fs::create_symlink(fs::read_symlink(e.path()), dst);
    } else if (e.is_directory()) {
      fs::create_directories(dst);
    } else {
      fs::copy_file(e.path(), dst, fs::copy_options::overwrite_existing);
    }
  }
}

}  // namespace triage::test
