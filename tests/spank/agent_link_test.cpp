#include "spank/agent_link.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/spank/fake_agent.h"
#include "tests/spank/temp_dir.h"

namespace triage::spank {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using testing::FakeAgent;
namespace fs = std::filesystem;

const std::string kLine =
    "{\"op\":\"job_end\",\"msg_id\":\"node001:77:1763730000000000:1\",\"job_id\":4242}\n";
const std::string kMsgId = "node001:77:1763730000000000:1";

class AgentLink : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = dir_ / "agent.sock";
    inbox_ = dir_ / "inbox";
    (void)std::snprintf(cfg_.socket_path, sizeof(cfg_.socket_path), "%s", socket_.c_str());
    (void)std::snprintf(cfg_.inbox_dir, sizeof(cfg_.inbox_dir), "%s", inbox_.c_str());
    cfg_.timeout_ms = 50;
  }

  std::vector<fs::path> inbox_files() const {
    std::vector<fs::path> out;
    if (!fs::exists(inbox_)) return out;
    for (const auto& e : fs::directory_iterator(inbox_))
      out.push_back(e.path());
    return out;
  }

  static std::string slurp(const fs::path& p) {
    std::ifstream in(p);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  // The message is in the inbox exactly once, private to root, under its msg_id, and nothing
  // else (no leftover temporary) is there.
  void expect_in_inbox_once() const {
    const auto files = inbox_files();
    ASSERT_EQ(files.size(), 1u);
    EXPECT_EQ(files[0].filename(), "node001_77_1763730000000000_1.json");
    EXPECT_EQ(slurp(files[0]), kLine);
    struct stat st {};
    ASSERT_EQ(lstat(files[0].c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
  }

  testing::TempDir dir_;
  std::string socket_;
  std::string inbox_;
  PluginConfig cfg_;
};

TEST_F(AgentLink, AnAcknowledgedMessageReachesTheAgentAndSkipsTheInbox) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  EXPECT_EQ(r.how, Delivery::kAcked) << r.why;
  ASSERT_EQ(agent.lines().size(), 1u);
  EXPECT_EQ(agent.lines()[0] + "\n", kLine);
  EXPECT_TRUE(inbox_files().empty());
}

TEST_F(AgentLink, ASilentAgentCostsAtMostTheTimeoutAndTheMessageWaitsInTheInbox) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kSilent);
  const auto t0 = steady_clock::now();
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_NE(std::strstr(r.why, "waiting for the agent's answer"), nullptr) << r.why;
  EXPECT_GE(took.count(), 45);
  EXPECT_LT(took.count(), 1000) << "the job must not wait for a stuck agent";
  expect_in_inbox_once();
  EXPECT_TRUE(agent.wait_for_lines(1, milliseconds(1000))) << "it was sent before timing out";
}

TEST_F(AgentLink, NoAgentAtAllMeansTheInboxAtOnce) {
  const auto t0 = steady_clock::now();
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_NE(std::strstr(r.why, "No such file"), nullptr) << r.why;
  EXPECT_LT(took.count(), 40) << "a missing socket must not use up the timeout";
  expect_in_inbox_once();
}

TEST_F(AgentLink, AStaleSocketFileWithNobodyListeningMeansTheInbox) {
  { FakeAgent gone(socket_, FakeAgent::Behaviour::kAck); }
  // The agent died without removing its socket: leave a dead socket file behind.
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  (void)std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_.c_str());
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
  ASSERT_EQ(bound, 0);
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_NE(std::strstr(r.why, "refused"), nullptr) << r.why;
  expect_in_inbox_once();
}

TEST_F(AgentLink, AFullBacklogDoesNotWaitForTheTimeout) {
  cfg_.timeout_ms = 500;
  FakeAgent agent(socket_, FakeAgent::Behaviour::kBacklogFull);
  const auto t0 = steady_clock::now();
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  const auto took = std::chrono::duration_cast<milliseconds>(steady_clock::now() - t0);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_LT(took.count(), 100) << r.why;
  expect_in_inbox_once();
}

TEST_F(AgentLink, ARefusalOrAHangUpIsNotAnAcknowledgement) {
  {
    FakeAgent agent(socket_, FakeAgent::Behaviour::kRefuse);
    const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
    EXPECT_EQ(r.how, Delivery::kInbox);
    EXPECT_NE(std::strstr(r.why, "refused by test"), nullptr) << r.why;
    expect_in_inbox_once();
  }
  fs::remove_all(inbox_);
  {
    FakeAgent agent(socket_, FakeAgent::Behaviour::kHangUp);
    const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
    EXPECT_EQ(r.how, Delivery::kInbox);
    EXPECT_NE(std::strstr(r.why, "closed the connection"), nullptr) << r.why;
    expect_in_inbox_once();
  }
}

TEST_F(AgentLink, ASocketServedByAnotherUserIsNotTheAgent) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a listener as another user";
  // The other user must be able to reach its socket: traverse our dir, write its own.
  chmod(dir_.path().c_str(), 0711);
  const fs::path open_dir = dir_.path() / "world";
  fs::create_directory(open_dir);
  fs::permissions(open_dir, fs::perms::all);
  const std::string path = (open_dir / "agent.sock").string();
  (void)std::snprintf(cfg_.socket_path, sizeof(cfg_.socket_path), "%s", path.c_str());
  const pid_t pid = testing::start_foreign_agent(path, 65534);
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  testing::stop_foreign_agent(pid);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_NE(std::strstr(r.why, "uid 65534"), nullptr) << r.why;
  expect_in_inbox_once();
}

TEST_F(AgentLink, TheInboxIsCreatedPrivateWhenMissing) {
  ASSERT_FALSE(fs::exists(inbox_));
  EXPECT_EQ(deliver(cfg_, kMsgId, kLine).how, Delivery::kInbox);
  struct stat st {};
  ASSERT_EQ(stat(inbox_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
}

TEST_F(AgentLink, AnInboxOthersCanWriteIsRefused) {
  fs::create_directory(inbox_);
  chmod(inbox_.c_str(), 0777);
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  EXPECT_EQ(r.how, Delivery::kLost);
  EXPECT_NE(std::strstr(r.why, "not private"), nullptr) << r.why;
  EXPECT_TRUE(inbox_files().empty());
}

TEST_F(AgentLink, AnInboxThatIsASymlinkIsNotFollowed) {
  const fs::path elsewhere = dir_.path() / "elsewhere";
  fs::create_directory(elsewhere);
  chmod(elsewhere.c_str(), 0700);
  fs::create_directory_symlink(elsewhere, inbox_);
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  EXPECT_EQ(r.how, Delivery::kLost);
  EXPECT_TRUE(fs::is_empty(elsewhere));
}

TEST_F(AgentLink, TwoMessagesAreTwoFilesAndNamesCannotEscapeTheInbox) {
  EXPECT_EQ(deliver(cfg_, kMsgId, kLine).how, Delivery::kInbox);
  EXPECT_EQ(deliver(cfg_, "../../etc/x:1:2:3", kLine).how, Delivery::kInbox);
  EXPECT_EQ(deliver(cfg_, ".hidden", kLine).how, Delivery::kInbox);
  const auto files = inbox_files();
  ASSERT_EQ(files.size(), 3u);
  for (const auto& f : files) {
    EXPECT_EQ(f.parent_path(), fs::path(inbox_));
    EXPECT_NE(f.filename().string().front(), '.') << "dot names are temporaries";
  }
}

TEST_F(AgentLink, ThePeerCredentialsOfAnAgentRunningAsUsAreAccepted) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck, std::chrono::microseconds(2000));
  char why[256] = {};
  EXPECT_TRUE(send_to_agent(cfg_.socket_path, 50, kLine, why, sizeof(why))) << why;
}

TEST_F(AgentLink, ASocketPathTooLongForSunPathFallsBackToTheInbox) {
  const std::string long_path = "/" + std::string(200, 's');
  (void)std::snprintf(cfg_.socket_path, sizeof(cfg_.socket_path), "%s", long_path.c_str());
  const DeliveryReport r = deliver(cfg_, kMsgId, kLine);
  EXPECT_EQ(r.how, Delivery::kInbox);
  EXPECT_NE(std::strstr(r.why, "too long"), nullptr) << r.why;
}

}  // namespace
}  // namespace triage::spank
