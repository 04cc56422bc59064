// The agent's own log (stderr, the journal under systemd) when a job's text reaches it: a path,
// a name or a log line carrying a carriage return, a line break and a line dressed as the agent's
// own is written out escaped on the one line that quotes it.
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "common/logging.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::eventually;
using testing::kNobody;
using testing::kNogroup;
using testing::lifecycle;
using testing::socket_json;

// stderr into a file for as long as this lives.
class CapturedStderr {
 public:
  CapturedStderr() {
    char path[] = "/tmp/agent-log-test-XXXXXX";
    fd_ = ::mkstemp(path);
    path_ = path;
    (void)std::fflush(stderr);
    saved_ = ::dup(2);
    ::dup2(fd_, 2);
  }
  ~CapturedStderr() {
    release();
    ::unlink(path_.c_str());
  }
  CapturedStderr(const CapturedStderr&) = delete;
  CapturedStderr& operator=(const CapturedStderr&) = delete;
  // Puts stderr back and returns what was written to it.
  std::string release() {
    if (saved_ >= 0) {
      (void)std::fflush(stderr);
      ::dup2(saved_, 2);
      ::close(saved_);
      ::close(fd_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream out;
    out << in.rdbuf();
    return out.str();
  }

 private:
  std::string path_;
  int fd_ = -1;
  int saved_ = -1;
};

TEST(AgentLog, AJobsOutputPathWithACarriageReturnAndAForgedLineIsLoggedEscapedOnOneLine) {
  constexpr uint64_t kJob = 4711;
  const std::string forged = "slurm-triage-agent: info: job 4711: analysis done in 3 ms";
  CapturedStderr captured;
  init_logging("slurm-triage-agent", "info");
  {
    AgentHarness h("agentlog", "node-a");
    h.config.analyzer_path = testing::fake_analyzer_in(h.dir());
    h.start();
    const nlohmann::json owner = {{"uid", kNobody}, {"gid", kNogroup}, {"nodelist", "node-a"}};
    ASSERT_EQ(socket_json(h.socket(), lifecycle("job_start", kJob, "a:js", owner))["ok"], true);
    nlohmann::json end = owner;
    end["mode"] = "basic";
    end["work_dir"] = "/tmp";
    // sbatch -o takes any bytes: the expanded StdOut is what the agent logs it analyses.
    end["stdout_pattern"] = "/tmp/run-%j.log\r\n" + forged;
    ASSERT_EQ(socket_json(h.socket(), lifecycle("job_end", kJob, "a:je", end))["ok"], true);
    ASSERT_TRUE(eventually(
        [&] { return !testing::analysis_summaries(h.dir() + "/spool", kJob).empty(); }, 20000));
  }
  const std::string log = captured.release();
  EXPECT_NE(log.find("job 4711: analysing /tmp/run-4711.log\\x0d\\x0a" + forged), std::string::npos)
      << log;
  EXPECT_EQ(log.find('\r'), std::string::npos) << log;
  EXPECT_EQ(log.find("\n" + forged), std::string::npos) << "no line of the log is the forged one";
}

}  // namespace
}  // namespace triage::agent
