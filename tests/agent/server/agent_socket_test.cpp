// The local socket: who may post what (SO_PEERCRED), durable acknowledgements, bad input, many
// clients, and the plugin's inbox directory.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <thread>

#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::connect_unix;
using testing::eventually;
using testing::kDaemon;
using testing::kNobody;
using testing::lifecycle;
using testing::read_file;
using testing::socket_json;
using testing::socket_request;
using testing::write_file;

nlohmann::json job_start(uint64_t job, uid_t owner, const std::string& msg_id) {
  return lifecycle("job_start", job, msg_id,
                   {{"uid", owner},
                    {"gid", owner},
                    {"host", "node001"},
                    {"mode", "basic"},
                    {"nodelist", "node001"}});
}

class AgentSocket : public ::testing::Test {
 protected:
  void SetUp() override { h.start(); }
  AgentHarness h{"sock", "node001", "SlurmUser=daemon\nSocketTimeout=1s\n"};
};

TEST_F(AgentSocket, RootPostsALifecycleMessageAndItIsDurableWhenAcknowledged) {
  const nlohmann::json ack = socket_json(h.socket(), job_start(4242, kNobody, "node001:1:1:1"));
  ASSERT_EQ(ack["ok"], true) << ack.dump();
  // The acknowledgement came after the record reached the spool.
  const std::string spooled = read_file(h.dir() + "/spool/jobs/4242.jsonl");
  EXPECT_NE(spooled.find("node001:1:1:1"), std::string::npos);
}

TEST_F(AgentSocket, ANonRootPeerCannotPostLifecycleMessages) {
  for (const char* op : {"job_start", "task_start", "task_exit", "job_end"}) {
    nlohmann::json m = lifecycle(op, 77, std::string("forged-") + op,
                                 {{"pid", 1}, {"wait_status", 0}, {"uid", 0}});
    const nlohmann::json answer = socket_json(h.socket(), m, kNobody);
    EXPECT_EQ(answer["ok"], false) << op;
    EXPECT_NE(answer.value("error", "").find("permission denied"), std::string::npos)
        << answer.dump();
  }
  EXPECT_FALSE(std::filesystem::exists(h.dir() + "/spool/jobs/77.jsonl"));
}

TEST_F(AgentSocket, SlurmUserMayPostLikeRoot) {
  const nlohmann::json ack = socket_json(h.socket(), job_start(78, kNobody, "m78"), kDaemon);
  EXPECT_EQ(ack["ok"], true) << ack.dump();
}

TEST_F(AgentSocket, AUserReadsTheirOwnJobsOnly) {
  ASSERT_EQ(socket_json(h.socket(), job_start(500, kNobody, "m500"))["ok"], true);
  ASSERT_EQ(socket_json(h.socket(),
                        lifecycle("task_start", 500, "m501",
                                  {{"step", "0"}, {"task", 0}, {"rank", 0}, {"pid", 4321}}))["ok"],
            true);
  const nlohmann::json own = socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 500}}, kNobody);
  ASSERT_EQ(own["ok"], true) << own.dump();
  EXPECT_EQ(own["node"]["host"], "node001");
  EXPECT_EQ(own["node"]["tasks"][0]["pid"], 4321);

  // uid 2 (bin) is someone else; daemon is SlurmUser here, so use bin as "user B".
  const nlohmann::json other = socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 500}}, 2u);
  EXPECT_EQ(other["ok"], false);
  EXPECT_NE(other.value("error", "").find("not found or not yours"), std::string::npos);
  // An unknown job and someone else's job look the same to a user.
  const nlohmann::json missing = socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 501}}, 2u);
  EXPECT_NE(missing.value("error", "").find("not found or not yours"), std::string::npos);

  EXPECT_EQ(socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 500}})["ok"], true)
      << "root reads any job";
}

TEST_F(AgentSocket, ARetriedMessageIsAppliedOnce) {
  const nlohmann::json m = lifecycle("task_exit", 600, "node001:9:9:1",
                                     {{"step", "0"}, {"task", 0}, {"pid", 9}, {"wait_status", 9}});
  EXPECT_EQ(socket_json(h.socket(), m)["ok"], true);
  const nlohmann::json again = socket_json(h.socket(), m);
  EXPECT_EQ(again["ok"], true);
  EXPECT_EQ(again["duplicate"], true);
  const std::string spooled = read_file(h.dir() + "/spool/jobs/600.jsonl");
  EXPECT_EQ(std::count(spooled.begin(), spooled.end(), '\n'), 1);
}

TEST_F(AgentSocket, MalformedAndOversizedRequestsGetErrorsAndTheAgentStaysUp) {
  EXPECT_NE(socket_request(h.socket(), "{not json").find("not valid JSON"), std::string::npos);
  EXPECT_NE(socket_request(h.socket(), "[1,2,3]").find("must be a JSON object"), std::string::npos);
  EXPECT_NE(socket_request(h.socket(), "{\"op\":\"\xff\xfe\"}").find("\"ok\":false"),
            std::string::npos);
  EXPECT_NE(socket_request(h.socket(), R"({"op":"reboot"})").find("unknown operation"),
            std::string::npos);
  EXPECT_NE(
      socket_request(h.socket(),
                     R"({"op":"task_exit","msg_id":"x","job_id":1,"pid":"one","wait_status":0})")
          .find("task_exit.pid"),
      std::string::npos);
  const std::string huge = R"({"op":"ping","pad":")" + std::string(size_t{70} * 1024, 'a') + "\"}";
  EXPECT_NE(socket_request(h.socket(), huge).find("larger than 65536 bytes"), std::string::npos);
  const std::string binary(size_t{80} * 1024, '\x01');  // no newline at all
  EXPECT_NE(socket_request(h.socket(), binary).find("larger than"), std::string::npos);
  EXPECT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true);
  const std::string metrics = h.agent().metrics();
  EXPECT_NE(metrics.find("triage_socket_rejected_total{host=\"node001\",reason=\"oversized\"} 2"),
            std::string::npos);
}

TEST_F(AgentSocket, ManyClientsAtOnceAreServedByOneThread) {
  std::vector<int> fds;
  for (int i = 0; i < 200; ++i) {
    const int fd = connect_unix(h.socket());
    ASSERT_GE(fd, 0);
    fds.push_back(fd);
  }
  for (int fd : fds) {
    const std::string ping = "{\"op\":\"ping\"}\n";
    ASSERT_EQ(::send(fd, ping.data(), ping.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(ping.size()));
  }
  int answered = 0;
  for (int fd : fds) {
    char buf[256];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0 && std::string(buf, static_cast<size_t>(n)).find("\"ok\":true") != std::string::npos)
      ++answered;
    ::close(fd);
  }
  EXPECT_EQ(answered, 200);
}

TEST_F(AgentSocket, AnIdleClientIsDisconnected) {
  const int fd = connect_unix(h.socket());
  ASSERT_GE(fd, 0);
  const auto t0 = std::chrono::steady_clock::now();
  char c = 0;
  const ssize_t n = ::recv(fd, &c, 1, 0);  // blocks until the agent hangs up
  EXPECT_EQ(n, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ::close(fd);
  EXPECT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true);
}

TEST_F(AgentSocket, AnyoneMayAskForTheNodesHealth) {
  const nlohmann::json health = socket_json(h.socket(), {{"op", "health"}}, kNobody);
  ASSERT_EQ(health["ok"], true) << health.dump();
  EXPECT_EQ(health["verdict"]["verdict"], "healthy");
  EXPECT_EQ(health["drain"]["policy"], "recommend");
}

TEST(AgentSocketLimits, ClientsBeyondTheCapAreRefused) {
  AgentHarness h("sock", "node001", "SocketMaxClients=3\nSocketReservedClients=1\n");
  h.start();
  std::vector<int> fds;
  fds.reserve(3);
  for (int i = 0; i < 3; ++i)
    fds.push_back(connect_unix(h.socket()));
  ASSERT_TRUE(eventually([&] {
    return h.agent().metrics().find("triage_socket_clients{host=\"node001\"} 3") !=
           std::string::npos;
  }));
  // Root may use every slot; beyond them even root hears "no" at once: one line, then the end.
  const int extra = connect_unix(h.socket());
  char buf[512] = {};
  const ssize_t n = ::recv(extra, buf, sizeof buf - 1, MSG_WAITALL);
  ASSERT_GT(n, 0);
  const nlohmann::json refusal = nlohmann::json::parse(std::string(buf), nullptr, false);
  EXPECT_EQ(refusal["refused"], "full") << buf;
  EXPECT_EQ(refusal["ok"], false) << buf;
  ::close(extra);
  for (int fd : fds)
    ::close(fd);
  EXPECT_TRUE(eventually([&] { return socket_json(h.socket(), {{"op", "ping"}})["ok"] == true; }));
  EXPECT_GE(testing::metric_value(
                h.agent().metrics(),
                "triage_socket_refused_connections_total{host=\"node001\",reason=\"full\"}")
                .value_or(0),
            1);
}

TEST(AgentInbox, ThePluginsFallbackFilesAreAppliedAndForeignOnesRefused) {
  AgentHarness h("inbox", "node001");
  const std::string inbox = h.config.inbox_dir;
  testing::make_dirs(inbox, 0700);
  // Left by the plugin while the agent was down.
  write_file(inbox + "/job_end.900.1", job_start(900, kNobody, "inbox-1").dump() + "\n", 0600);
  h.start();
  EXPECT_TRUE(std::filesystem::exists(h.dir() + "/spool/jobs/900.jsonl")) << "drained at start";
  EXPECT_FALSE(std::filesystem::exists(inbox + "/job_end.900.1"));

  // A file a user planted (owned by nobody), a symlink and a FIFO are refused, never followed,
  // and never block the agent.
  write_file(inbox + "/forged", job_start(901, kNobody, "inbox-2").dump() + "\n", 0644);
  ASSERT_EQ(::chown((inbox + "/forged").c_str(), kNobody, testing::kNogroup), 0);
  write_file(h.dir() + "/elsewhere", job_start(902, kNobody, "inbox-3").dump() + "\n", 0600);
  std::filesystem::create_symlink(h.dir() + "/elsewhere", inbox + "/link");
  ASSERT_EQ(::mkfifo((inbox + "/fifo").c_str(), 0600), 0);
  write_file(inbox + "/.partial", "{\"op\":", 0600);
  write_file(inbox + "/task.903",
             lifecycle("task_start", 903, "inbox-4", {{"pid", 5}, {"task", 0}}).dump() + "\n",
             0600);
  EXPECT_EQ(socket_json(h.socket(), {{"op", "poke"}})["ok"], true);
  EXPECT_TRUE(std::filesystem::exists(h.dir() + "/spool/jobs/903.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(h.dir() + "/spool/jobs/901.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(h.dir() + "/spool/jobs/902.jsonl"));
  EXPECT_FALSE(std::filesystem::exists(inbox + "/forged"));
  EXPECT_FALSE(std::filesystem::exists(inbox + "/fifo"));
  EXPECT_TRUE(std::filesystem::exists(h.dir() + "/elsewhere"))
      << "the symlink's target is untouched";
  EXPECT_TRUE(std::filesystem::exists(inbox + "/.partial"))
      << "temporaries being written are left alone";
  EXPECT_NE(
      h.agent().metrics().find("triage_inbox_files_total{host=\"node001\",result=\"refused\"} 3"),
      std::string::npos);

  // Files dropped while the agent runs are picked up without a poke (inotify).
  write_file(inbox + "/.tmp", job_start(904, kNobody, "inbox-5").dump() + "\n", 0600);
  std::filesystem::rename(inbox + "/.tmp", inbox + "/job_start.904");
  EXPECT_TRUE(
      eventually([&] { return std::filesystem::exists(h.dir() + "/spool/jobs/904.jsonl"); }, 5000));
}

}  // namespace
}  // namespace triage::agent
