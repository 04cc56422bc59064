// kill -9 at random moments: a real agent process is fed kernel events (by a thread resuming from
// the agent's durable position) and lifecycle messages (over its socket, retried until
// acknowledged), SIGKILLed, and restarted, several times. Afterwards every event is in the spool
// exactly once per version, every message was applied exactly once, and every ended job got its
// analysis summary exactly once.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <thread>

#include "agent/node/event_store.h"
#include "agent/node/spool.h"
#include "tests/agent/restart_events.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::eventually;
using testing::kNobody;
using testing::kNogroup;
using testing::lifecycle;
using testing::read_file;
using testing::socket_request;
using testing::TempDir;

constexpr uint64_t kEvents = 3000;
constexpr uint64_t kJobs = 24;

class ChildAgent {
 public:
  ChildAgent(const std::string& config, const std::string& log) {
    int out[2];
    if (::pipe(out) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(out[1], 1);
      const int err = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) ::dup2(err, 2);
      ::close(out[0]);
      ::execl(RESTART_CHILD_PATH, RESTART_CHILD_PATH, config.c_str(),
              std::to_string(kEvents).c_str(), nullptr);
      ::_exit(127);
    }
    ::close(out[1]);
    stdout_ = ::fdopen(out[0], "r");
    char line[128] = {};
    ready_ = stdout_ != nullptr && std::fgets(line, sizeof line, stdout_) != nullptr &&
             std::string(line).rfind("READY", 0) == 0;
  }
  ~ChildAgent() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdout_ != nullptr) (void)std::fclose(stdout_);  // a pipe we only read
  }
  bool ready() const { return ready_; }
  void kill9() {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  int terminate() {
    ::kill(pid_, SIGTERM);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* stdout_ = nullptr;
  bool ready_ = false;
};

// The lifecycle messages of the test's jobs, in the order the plugin would send them.
std::vector<nlohmann::json> job_messages(const std::string& work) {
  std::vector<nlohmann::json> out;
  for (uint64_t job = 1; job <= kJobs; ++job) {
    const std::string id = std::to_string(job);
    out.push_back(lifecycle(
        "job_start", job, "n1:js:" + id,
        {{"uid", kNobody}, {"gid", kNogroup}, {"nodelist", "node001"}, {"mode", "basic"}}));
    for (int task = 0; task < 2; ++task) {
      const std::string t = id + ":" + std::to_string(task);
      out.push_back(lifecycle("task_start", job, "n1:ts:" + t,
                              {{"step", "0"},
                               {"task", task},
                               {"rank", task},
                               {"pid", 10000 + job * 10 + static_cast<uint64_t>(task)}}));
      out.push_back(lifecycle("task_exit", job, "n1:te:" + t,
                              {{"step", "0"},
                               {"task", task},
                               {"rank", task},
                               {"pid", 10000 + job * 10 + static_cast<uint64_t>(task)},
                               {"wait_status", 0}}));
    }
    out.push_back(lifecycle("job_end", job, "n1:je:" + id,
                            {{"uid", kNobody},
                             {"gid", kNogroup},
                             {"nodelist", "node001"},
                             {"mode", "basic"},
                             {"wait_status", 0},
                             {"work_dir", work},
                             {"job_name", "job" + id}}));
  }
  return out;
}

TEST(AgentRestart, KillNineAtAnyMomentLosesNothingAndDuplicatesNothing) {
  TempDir dir("restart");
  const std::string work = dir / "work";
  testing::make_dirs(work, 0777);
  const std::string conf = dir / "triage.conf";
  testing::write_file(conf, "NodeName=node001\nSpoolDir=" + dir.path() +
                                "/spool\nSocketPath=" + dir.path() +
                                "/agent.sock\nHttpAddress=127.0.0.1\nHttpPort=0\nKernelSource="
                                "none\nEvidenceSettleDelay=0\n"
                                "AnalyzerPath=" +
                                testing::fake_analyzer_in(dir.path()) + "\nProcRoot=" + dir.path() +
                                "\nSysfsRoot=" + dir.path() + "\n");
  const std::string log = dir / "agent.log";
  const std::vector<nlohmann::json> messages = job_messages(work);
  std::mt19937 rng(12345);
  size_t next_message = 0;
  size_t unacked_retries = 0;

  for (int round = 0; round < 5; ++round) {
    ChildAgent child(conf, log);
    ASSERT_TRUE(child.ready()) << read_file(log);
    // Send a share of the messages; the one in flight when the kill lands is sent again next time.
    const size_t share = messages.size() / 5 + 1;
    const int64_t kill_after_ms = std::uniform_int_distribution<int>(20, 250)(rng);
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kill_after_ms);
    for (size_t n = 0; n < share && next_message < messages.size(); ++n) {
      const std::string answer = socket_request(dir / "agent.sock", messages[next_message].dump());
      if (answer.find("\"ok\":true") == std::string::npos) {
        ++unacked_retries;
        break;
      }
      ++next_message;
      if (std::chrono::steady_clock::now() > deadline) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(kill_after_ms));
    child.kill9();
  }

  // A last, undisturbed run: resend what is left, let the feeder finish and the analyses run.
  {
    ChildAgent child(conf, log);
    ASSERT_TRUE(child.ready()) << read_file(log);
    // The previous round's last message may or may not have been applied: resend it too.
    for (size_t i = next_message > 0 ? next_message - 1 : 0; i < messages.size(); ++i) {
      std::string answer;
      ASSERT_TRUE(eventually([&] {
        answer = socket_request(dir / "agent.sock", messages[i].dump());
        return answer.find("\"ok\":true") != std::string::npos;
      })) << answer;
    }
    ASSERT_TRUE(eventually(
        [&] {
          const std::string pos = read_file(dir / "spool/events/00000001.jsonl");
          return pos.find(testing::restart_position(kEvents - 1)) != std::string::npos;
        },
        30000))
        << "the feeder did not finish";
    ASSERT_TRUE(eventually(
        [&] {
          for (uint64_t job = 1; job <= kJobs; ++job) {
            if (read_file(dir / ("spool/jobs/" + std::to_string(job) + ".jsonl"))
                    .find("\"r\":\"analysis\"") == std::string::npos)
              return false;
          }
          return true;
        },
        60000))
        << "not every ended job was analysed:\n"
        << read_file(log).substr(0, 4000);
    EXPECT_EQ(WEXITSTATUS(child.terminate()), 0);
  }

  // Events: every version at most once in the spool; the replayed set is exactly the stream's.
  Spool spool({dir / "spool"});
  const SpoolReplay replay = spool.open();
  std::map<std::pair<std::string, uint64_t>, int> versions;
  for (const KernelEvent& e : replay.events)
    ++versions[{e.id, e.count}];
  for (const auto& [key, n] : versions)
    EXPECT_EQ(n, 1) << key.first << " count " << key.second << " written " << n << " times";
  EventStore store(kEvents);
  for (const KernelEvent& e : replay.events)
    store.restore(e);
  std::set<std::string> expected;
  for (uint64_t i = 0; i < kEvents; ++i) {
    const KernelEvent e = testing::restart_event(i);
    expected.insert(e.id);
    const KernelEvent* got = store.find(e.id);
    ASSERT_NE(got, nullptr) << "lost " << e.id;
    if (i % 5 == 4) {
      EXPECT_EQ(got->count, 2u) << e.id;
    }
  }
  EXPECT_EQ(store.size(), expected.size());

  // Messages: each msg_id once; each job analysed once (and the analyzer ran at least once).
  for (uint64_t job = 1; job <= kJobs; ++job) {
    const auto records = spool.read_job(job);
    std::map<std::string, int> ids;
    int analyses = 0;
    for (const auto& r : records) {
      if (r.value("r", "") == "msg") ++ids[r["m"]["msg_id"].get<std::string>()];
      if (r.value("r", "") == "analysis") ++analyses;
    }
    EXPECT_EQ(ids.size(), 6u) << "job " << job;
    for (const auto& [id, n] : ids)
      EXPECT_EQ(n, 1) << id;
    EXPECT_EQ(analyses, 1) << "job " << job;
    bool ran = false;
    for (const auto& entry : std::filesystem::directory_iterator(work)) {
      ran = ran ||
            entry.path().filename().string().rfind("analyzer-" + std::to_string(job) + "-", 0) == 0;
    }
    EXPECT_TRUE(ran) << "job " << job;
  }
  RecordProperty("unacked_retries", static_cast<int>(unacked_retries));
}

}  // namespace
}  // namespace triage::agent
