// A subcommand's command line, read one argument at a time, and the one way a usage mistake is
// reported: a subcommand throws UsageError and the CLI's dispatcher (analyzer/cli/main.cpp)
// prints "slurm-triage CMD: message" with a pointer to its --help and exits 2.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace triage {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The exit status of a usage mistake, for every subcommand.
inline constexpr int kExitUsageError = 2;

// Walks argv[1..argc) (argv[0] is the subcommand's name). An option's value is the next
// argument; the helpers that read one name the option in their error.
class ArgCursor {
 public:
  ArgCursor(int argc, char** argv) : argc_(argc), argv_(argv) {}

  // Moves to the next argument; false when none is left.
  bool next();
  const std::string& arg() const { return arg_; }
  // Whether the current argument is -h or --help.
  bool is_help() const { return arg_ == "-h" || arg_ == "--help"; }
  // Whether the current argument looks like an option ("-x", "--x"; "-" alone is stdin).
  bool is_option() const { return arg_.size() > 1 && arg_[0] == '-'; }

  // The current option's value, consumed; UsageError when the command line ends first.
  std::string value();
  // value() as seconds since the epoch (year 3000 at most).
  int64_t epoch_seconds();
  // value() as a number greater than 0 and at most `max`.
  double positive(double max = 1e9);
  // value() as a whole number in [lo, hi].
  int64_t whole(int64_t lo, int64_t hi);

 private:
  int argc_;
  char** argv_;
  int i_ = 0;
  std::string arg_;
};

}  // namespace triage
