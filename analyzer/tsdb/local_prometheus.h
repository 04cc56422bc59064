// A private, read-only Prometheus for a finished job: a scratch directory (owned by a guardian
// process, see server_guardian.h) receives a copy of the job's TSDB; Debian's prometheus is started
// on it, bound to a free loopback port, with a retention that deletes nothing and no scrape
// targets; it is stopped by pid and the copy removed when this object goes away.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>

#include "common/child_process.h"  // find_executable resolves the binary

namespace triage::tsdb {

class ServerGuardian;

struct LaunchOptions {
  std::string binary = "/usr/bin/prometheus";
  std::string scratch_parent;  // empty: $TMPDIR, else /tmp
  std::string label = "job";   // goes into the scratch directory's name
  std::chrono::milliseconds ready_timeout{
      120000};  // WAL replay of a long crashed job takes a while
  std::chrono::milliseconds stop_grace{5000};
  // A preferred port (the job scripts use 9190): tried first, then upwards; otherwise any free
  // port. Whatever the choice, a port someone holds is never used.
  std::optional<uint16_t> port_hint;
};

class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Finds a loopback TCP port nobody listens on by binding it: `hint`, hint+1, ... hint+63 first
// when given, otherwise (or when all are taken) a port chosen by the kernel.
uint16_t pick_free_loopback_port(std::optional<uint16_t> hint);

class LocalPrometheus {
 public:
  // Creates the scratch directory (mode 0700) and its guardian. Throws LaunchError.
  explicit LocalPrometheus(LaunchOptions options);
  LocalPrometheus(const LocalPrometheus&) = delete;
  LocalPrometheus& operator=(const LocalPrometheus&) = delete;
  ~LocalPrometheus();

  // Where the TSDB copy goes (an empty directory until the caller fills it).
  const std::string& data_dir() const { return data_dir_; }
  const std::string& scratch_dir() const { return scratch_dir_; }

  // Starts the server on the copy and waits until it is ready and proven to be ours (its
  // storage.tsdb.path is our copy). Throws LaunchError with the server's last log lines.
  void start();
  std::string url() const;
  uint16_t port() const { return port_; }
  pid_t server_pid() const;
  pid_t guardian_pid() const;
  double startup_seconds() const { return startup_seconds_; }

  // Stops the server and removes the scratch directory. Idempotent; the destructor calls it.
  void stop();

 private:
  std::string log_tail(size_t max_lines) const;

  LaunchOptions options_;
  std::string scratch_dir_;
  std::string data_dir_;
  std::string config_path_;
  std::string log_path_;
  std::unique_ptr<ServerGuardian> guardian_;
  uint16_t port_ = 0;
  double startup_seconds_ = 0;
};

}  // namespace triage::tsdb
