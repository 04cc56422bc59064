// kill -9 while the kernel log is being read: the real slurm-triage-agent reads kmsg records, or a
// journal directory, that a writer keeps appending to (as the kernel fills its ring buffer, or as
// journald writes), is SIGKILLed at random moments and restarted. In the end every record's event
// is in the spool exactly once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <ctime>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "agent/node/spool.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::eventually;
using testing::read_file;
using testing::socket_json;
using testing::socket_request;
using testing::TempDir;
using testing::write_file;

constexpr const char* kBootId = "0d6e2c1f8a7b4c3d9e5f0a1b2c3d4e5f";
constexpr uint64_t kRecords = 2000;
constexpr uint64_t kFirstSeq = 500;

// A server name made of letters only: numbers are blanked when floods are folded, letters are
// not, so every record is an event of its own.
std::string server_name(uint64_t n) {
  std::string s = "fs";
  do {
    s.push_back(static_cast<char>('a' + n % 26));
    n /= 26;
  } while (n > 0);
  return s;
}

class AgentProcess {
 public:
  AgentProcess(const std::string& config, const std::string& slurm_conf, const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      // libslurm wants a slurm.conf to start; no controller is asked anything in this test.
      ::setenv("SLURM_CONF", slurm_conf.c_str(), 1);
      ::execl(AGENT_PATH, AGENT_PATH, "--config", config.c_str(), nullptr);
      ::_exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ > 0) kill(SIGKILL);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;

  int kill(int sig) {
    ::kill(pid_, sig);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
};

bool answers(const std::string& socket) {
  return socket_request(socket, R"({"op":"ping"})").find("\"ok\":true") != std::string::npos;
}

int64_t clock_usec(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000 + ts.tv_nsec / 1000;
}

// The kernel's side of the test: appends records to the source the agent reads, a batch at a
// time, as the kernel (or journald) would while the agent is killed and restarted.
class KernelStream {
 public:
  KernelStream(std::string kind, const TempDir& dir) : kind_(std::move(kind)), dir_(dir) {
    // Times shortly before now, so that the spool's retention keeps every event.
    mono_ = clock_usec(CLOCK_MONOTONIC) - 400'000'000;
    realtime_ = clock_usec(CLOCK_REALTIME) - 400'000'000;
    if (kind_ == "kmsg") {
      write_file(dir_ / "kmsg", "");
    } else {
      testing::make_dirs(dir_ / "journal");
    }
  }

  // Records per append: journal-remote is a process per batch, so its batches are larger.
  uint64_t batch() const { return kind_ == "kmsg" ? 25 : 100; }

  std::string config() const {
    return kind_ == "kmsg" ? "KernelSource=kmsg\nKernelPath=" + dir_ / "kmsg" + "\n"
                           : "KernelSource=journal\nKernelPath=" + dir_ / "journal" + "\n";
  }

  // Appends records [from, to); false (with `error`) when that failed.
  bool append(uint64_t from, uint64_t to, std::string& error) {
    std::string text;
    for (uint64_t i = from; i < to; ++i) {
      const std::string message = "nfs: server " + server_name(i) + " not responding, timed out";
      // Bursts 3 s apart in record time: the first record of a burst closes everything the
      // classifier held for the previous one (its fold window is 2 s), so the durable position
      // moves along while the stream is written, as on a node whose kernel log has pauses.
      const int64_t offset =
          static_cast<int64_t>(i / batch()) * 3'000'000 + static_cast<int64_t>(i % batch()) * 1000;
      if (kind_ == "kmsg") {
        text += "5," + std::to_string(kFirstSeq + i) + "," + std::to_string(mono_ + offset) +
                ",-;" + message + "\n";
      } else {
        text += "__REALTIME_TIMESTAMP=" + std::to_string(realtime_ + offset) +
                "\n__MONOTONIC_TIMESTAMP=" + std::to_string(mono_ + offset) +
                "\n_BOOT_ID=" + kBootId + "\n_TRANSPORT=kernel\n_HOSTNAME=node001\nPRIORITY=5\n" +
                "SYSLOG_FACILITY=0\n_SOURCE_MONOTONIC_TIMESTAMP=" + std::to_string(mono_ + offset) +
                "\nMESSAGE=" + message + "\n\n";
      }
    }
    if (kind_ == "kmsg") {
      // Whole records per write(), as the kernel hands them out.
      const int fd = ::open((dir_ / "kmsg").c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
      if (fd < 0) return false;
      const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
      ::close(fd);
      return ok;
    }
    const std::string in = dir_ / ("export-" + std::to_string(from));
    write_file(in, text);
    const std::string cmd = std::string(JOURNAL_REMOTE) + " --output=" + dir_ / "journal" +
                            "/system.journal " + in + " 2>&1";
    FILE* p = ::popen(cmd.c_str(), "r");
    if (p == nullptr) return false;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p) != nullptr)
      error += buf;
    return ::pclose(p) == 0;
  }

 private:
  std::string kind_;
  const TempDir& dir_;
  int64_t mono_ = 0;
  int64_t realtime_ = 0;
};

class KernelRestart : public ::testing::TestWithParam<std::string> {};

TEST_P(KernelRestart, KillNineWhileReadingLosesNoEventAndDuplicatesNone) {
  if (GetParam() == "journal" && ::access(JOURNAL_REMOTE, X_OK) != 0)
    GTEST_SKIP() << "systemd-journal-remote missing";
  TempDir dir("krestart");
  testing::make_dirs(dir / "proc/sys/kernel/random");
  testing::make_dirs(dir / "sys");
  write_file(dir / "proc/sys/kernel/random/boot_id", std::string(kBootId) + "\n");
  KernelStream stream(GetParam(), dir);
  const std::string conf = dir / "triage.conf";
  write_file(conf, "NodeName=node001\nSpoolDir=" + dir.path() + "/spool\nSocketPath=" + dir.path() +
                       "/agent.sock\nHttpAddress=127.0.0.1\nHttpPort=0\n" + stream.config() +
                       "ProcRoot=" + dir.path() + "/proc\nSysfsRoot=" + dir.path() +
                       "/sys\nAnalyzerPath=" + testing::fake_analyzer_in(dir.path()) + "\n");
  const std::string slurm_conf = dir / "slurm.conf";
  write_file(slurm_conf, "ClusterName=triage-test\nSlurmctldHost=localhost\n");
  const std::string log = dir / "agent.log";
  const std::string socket = dir / "agent.sock";

  std::atomic<bool> written{false};
  std::string writer_error;
  std::thread writer([&] {
    for (uint64_t i = 0; i < kRecords; i += stream.batch()) {
      if (!stream.append(i, std::min(kRecords, i + stream.batch()), writer_error)) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(15));
    }
    written = true;
  });

  std::mt19937 rng(4242);
  uint64_t seen = 0;
  for (int round = 0; round < 5; ++round) {
    AgentProcess agent(conf, slurm_conf, log);
    // Each run gets somewhere before it is killed (however loaded the machine), and is killed at
    // a random moment after that.
    ASSERT_TRUE(eventually(
        [&] {
          const nlohmann::json h = socket_json(socket, {{"op", "health"}});
          const uint64_t n = h.value("node_events", uint64_t{0});
          if (n <= seen && n < kRecords) return false;
          seen = n;
          return true;
        },
        30000))
        << read_file(log);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(0, 300)(rng)));
    agent.kill(SIGKILL);
  }
  writer.join();
  ASSERT_TRUE(written) << writer_error;

  // A last, undisturbed run reads to the end of the stream.
  {
    AgentProcess agent(conf, slurm_conf, log);
    nlohmann::json health;
    ASSERT_TRUE(eventually(
        [&] {
          if (!answers(socket)) return false;
          health = socket_json(socket, {{"op", "health"}});
          return health["node_events"] == kRecords && health["kernel"]["state"] != "retrying";
        },
        60000))
        << health.dump() << "\n"
        << read_file(log).substr(0, 4000);
    EXPECT_EQ(health["kernel"]["lost_records"], 0) << health.dump();
    EXPECT_EQ(health["kernel"]["loss_gaps"], 0) << health.dump();
    EXPECT_EQ(WEXITSTATUS(agent.kill(SIGTERM)), 0);
  }

  // The kills landed mid-stream: some runs resumed after a position inside it.
  const std::string agent_log = read_file(log);
  size_t resumed = 0;
  for (size_t at = agent_log.find("kernel log: reading"); at != std::string::npos;
       at = agent_log.find("kernel log: reading", at + 1)) {
    const size_t eol = agent_log.find('\n', at);
    if (agent_log.substr(at, eol - at).find(" after ") != std::string::npos) ++resumed;
  }
  EXPECT_GE(resumed, 2u) << agent_log.substr(0, 4000);
  RecordProperty("resumed_runs", static_cast<int>(resumed));

  Spool spool({dir / "spool"});
  const SpoolReplay replay = spool.open();
  std::map<std::string, int> ids;
  std::map<std::string, int> servers;
  for (const KernelEvent& e : replay.events) {
    ++ids[e.id];
    EXPECT_EQ(e.kind, "nfs-timeout") << e.id;
    EXPECT_EQ(e.count, 1u) << e.id;
    ASSERT_FALSE(e.lines.empty());
    const size_t at = e.lines[0].find("server ");
    ASSERT_NE(at, std::string::npos) << e.lines[0];
    ++servers[e.lines[0].substr(at + 7, e.lines[0].find(' ', at + 7) - at - 7)];
  }
  for (const auto& [id, n] : ids)
    EXPECT_EQ(n, 1) << id << " is in the spool " << n << " times";
  for (uint64_t i = 0; i < kRecords; ++i)
    EXPECT_EQ(servers[server_name(i)], 1) << "record " << i << " (" << server_name(i) << ")";
  EXPECT_EQ(ids.size(), kRecords);
}

INSTANTIATE_TEST_SUITE_P(Sources, KernelRestart, ::testing::Values("kmsg", "journal"));

}  // namespace
}  // namespace triage::agent
