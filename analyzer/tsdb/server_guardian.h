// The guardian: a small helper process that owns a scratch directory and the server started on it,
// and removes both when it is told to or when its parent goes away for any reason (an exception, a
// timeout, SIGKILL). This is what makes "nothing outlives the analysis" hold even when the
// analysing process cannot run any cleanup code of its own.
//
// The guardian is forked, not exec'ed, from a process that may have other threads (libcurl's
// resolver), so after the fork it only makes system calls: everything it needs (argv, paths) is
// prepared beforehand, and the directory removal walks the tree with getdents64/unlinkat.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace triage::tsdb {

class ServerGuardian {
 public:
  struct Spec {
    std::string scratch_dir;  // absolute; exists; removed (recursively) when the guardian ends
    std::string binary;       // the server executable, absolute
    std::vector<std::string> args;  // server arguments; "{port}" inside an argument is the port
    std::string log_path;           // the server's stdout and stderr (inside scratch_dir is fine)
    std::chrono::milliseconds term_grace{5000};  // SIGTERM, then SIGKILL after this
  };

  // Forks the guardian. Throws std::system_error when that is not possible (the caller still owns
  // the scratch directory then).
  explicit ServerGuardian(Spec spec);
  ServerGuardian(const ServerGuardian&) = delete;
  ServerGuardian& operator=(const ServerGuardian&) = delete;
  // Stops the server, removes the scratch directory and reaps the guardian.
  ~ServerGuardian();

  // Starts the server with "{port}" replaced by `port`. Returns its pid; throws std::system_error
  // when the binary could not be executed (ENOENT, EACCES, ...).
  pid_t start_server(uint16_t port);

  // When the server has exited on its own: a description ("exit status 1", "killed by signal 9").
  std::optional<std::string> server_exit();

  // Idempotent. After it returns the server is gone and the scratch directory removed (or the
  // failure to remove it is logged to stderr).
  void stop();

  pid_t guardian_pid() const { return guardian_; }
  pid_t server_pid() const { return server_; }

 private:
  void read_status(std::chrono::milliseconds wait);

  Spec spec_;
  pid_t guardian_ = -1;
  pid_t server_ = -1;
  int ctrl_w_ = -1;    // parent -> guardian commands; closing it is "stop"
  int status_r_ = -1;  // guardian -> parent reports
  std::string status_buf_;
  std::optional<std::string> exited_;
  int exec_errno_ = 0;
  bool started_ = false;
  bool done_ = false;
};

// Removes `path` and everything below it without following symlinks. Async-signal-safe (only
// system calls, no allocation). Returns 0 or an errno value.
int remove_tree_raw(const char* path);

}  // namespace triage::tsdb
