// Our programs' own log (common/logging.h): whatever a message quotes, one message is one line.
#include "common/logging.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <spdlog/spdlog.h>

namespace triage {
namespace {

// What the logger wrote to stderr while `fn` ran.
template <typename Fn>
std::string stderr_of(Fn fn) {
  char path[] = "/tmp/logging-test-XXXXXX";
  const int fd = ::mkstemp(path);
  EXPECT_GE(fd, 0);
  (void)std::fflush(stderr);
  const int saved = ::dup(2);
  ::dup2(fd, 2);
  fn();
  (void)std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  ::close(fd);
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  ::unlink(path);
  return out.str();
}

TEST(Logging, AMessageQuotingALineWithBreaksIsStillOneLine) {
  const std::string out = stderr_of([] {
    init_logging("slurm-triage-agent", "info");
    spdlog::warn("job {}: early warning {} at line {}: {}", 7, "nccl-timeout", 12,
                 "Watchdog caught\r\nslurm-triage-agent: info: job 8: analysis done\x1b[2K");
    spdlog::default_logger()->flush();
  });
  EXPECT_EQ(out,
            "slurm-triage-agent: warning: job 7: early warning nccl-timeout at line 12: Watchdog "
            "caught\\x0d\\x0aslurm-triage-agent: info: job 8: analysis done\\x1b[2K\n");
}

}  // namespace
}  // namespace triage
