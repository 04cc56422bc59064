// One user cannot take the agent away from everybody else (issue 29): an ordinary user holding a
// thousand connections to the local socket (idle ones, half-sent lines, clients that never read
// their answers) while another user asks for their job and the node's health and root posts the
// plugin's task_exit and job_end; and the same on the HTTP port, a flood of /metrics connections
// from one address while a peer fetches a job's evidence. Everyone else is answered directly,
// within 50 ms.
#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/net/munge_auth.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using namespace std::chrono_literals;
using testing::AgentHarness;
using testing::connect_unix;
using testing::kNobody;
using testing::kNogroup;
using testing::lifecycle;
using testing::metric_value;
using testing::socket_json;
using testing::socket_request;

constexpr int kFloodConnections = 1000;
// The issue's budget for an answer during the flood. This machine runs the tests sanitized and
// shared (a lifecycle message's fsync alone can take tens of milliseconds under I/O load), so a
// flood passes when nine answers in ten meet the budget and none takes more than kCeiling; a
// starved agent answers in seconds, or not at all.
constexpr auto kBudget = 50ms;
constexpr auto kCeiling = 250ms;
constexpr uid_t kOtherUser = 2;  // bin: an ordinary user who is not the flooder
constexpr uid_t kJobOwner = 3;   // sys: the owner of the job whose plugin messages root posts

// The flooder needs a descriptor per connection it holds, and so does this process's children.
void raise_fd_limit() {
  rlimit rl{};
  ASSERT_EQ(::getrlimit(RLIMIT_NOFILE, &rl), 0);
  rl.rlim_cur = rl.rlim_max;
  ASSERT_EQ(::setrlimit(RLIMIT_NOFILE, &rl), 0);
  ASSERT_GE(rl.rlim_cur, static_cast<rlim_t>(kFloodConnections + 200))
      << "the hard descriptor limit is too low for this test";
}

void drop_to(uid_t uid) {
  const gid_t gid = uid == kNobody ? kNogroup : static_cast<gid_t>(uid);
  if (::setgroups(0, nullptr) != 0 || ::setresgid(gid, gid, gid) != 0 ||
      ::setresuid(uid, uid, uid) != 0) {
    ::_exit(99);
  }
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

std::string describe(const std::vector<double>& ms) {
  std::ostringstream out;
  for (double m : ms)
    out << static_cast<int>(m * 10) / 10.0 << " ";
  return out.str();
}

// Fails, listing every time, unless the answers kept to the budget as above.
void expect_within_budget(const std::vector<double>& ms, const std::string& who) {
  ASSERT_FALSE(ms.empty()) << who;
  const auto within = std::count_if(
      ms.begin(), ms.end(), [](double m) { return m < static_cast<double>(kBudget.count()); });
  EXPECT_GE(within * 10, static_cast<long>(ms.size()) * 9) << who << ", ms: " << describe(ms);
  EXPECT_LT(*std::max_element(ms.begin(), ms.end()), static_cast<double>(kCeiling.count()))
      << who << ", ms: " << describe(ms);
}

// A child process, dropped to `uid`, that keeps `kFloodConnections` connections open until the
// parent closes its pipe: every connection the agent closes (refused at once, cut off as idle or
// slow) is opened again. `open_one(i)` connects and sends what connection i sends (-1: failed).
class Flood {
 public:
  Flood(uid_t uid, const std::function<int(int)>& open_one) {
    int ready[2];
    int stop[2];
    if (::pipe(ready) != 0 || ::pipe(stop) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      ::close(ready[0]);
      ::close(stop[1]);
      drop_to(uid);
      run(open_one, ready[1], stop[0]);
      ::_exit(0);
    }
    ::close(ready[1]);
    ::close(stop[0]);
    stop_ = stop[1];
    // The child says it holds its first thousand attempts.
    char c = 0;
    pollfd p{ready[0], POLLIN, 0};
    started_ = ::poll(&p, 1, 30000) == 1 && ::read(ready[0], &c, 1) == 1;
    ::close(ready[0]);
  }
  ~Flood() { end(); }
  Flood(const Flood&) = delete;
  Flood& operator=(const Flood&) = delete;

  bool started() const { return started_; }
  void end() {
    if (pid_ <= 0) return;
    ::close(stop_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
  }

 private:
  static void run(const std::function<int(int)>& open_one, int ready, int stop) {
    std::vector<int> fds(kFloodConnections, -1);
    for (int i = 0; i < kFloodConnections; ++i)
      fds[static_cast<size_t>(i)] = open_one(i);
    (void)!::write(ready, "r", 1);
    ::close(ready);
    for (;;) {
      pollfd s{stop, POLLIN, 0};
      if (::poll(&s, 1, 0) != 0) return;  // the parent is done (its end closed)
      // Whatever the agent closed is opened again, about a thousand a second: the pressure
      // never lets up. (Faster than the agent refuses, a flooder would queue in the listener's
      // backlog ahead of everybody else; docs/security.md, "Fair shares".)
      for (int i = 0; i < kFloodConnections; ++i) {
        int& fd = fds[static_cast<size_t>(i)];
        if (fd >= 0) {
          pollfd p{fd, POLLRDHUP, 0};
          if (::poll(&p, 1, 0) == 0) continue;
          ::close(fd);
        }
        fd = open_one(i);
        ::usleep(1000);
      }
      ::usleep(1000);
    }
  }

  pid_t pid_ = -1;
  int stop_ = -1;
  bool started_ = false;
};

void send_some(int fd, const std::string& data) {
  (void)!::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// One of the flooder's socket connections: idle, half a line, or a pipeline never read.
int socket_flood_connection(const std::string& path, int i) {
  const int fd = connect_unix(path);
  if (fd < 0) return -1;
  if (i % 3 == 1) send_some(fd, R"({"op":"health","pad":")");
  if (i % 3 == 2) {
    std::string pipeline;
    for (int k = 0; k < 2000; ++k)
      pipeline += "{\"op\":\"health\"}\n";
    send_some(fd, pipeline);
  }
  return fd;
}

TEST(FairShares, OneUserHoldingAThousandSocketConnectionsStarvesNobody) {
  raise_fd_limit();
  AgentHarness h("shares", "node001",
                 "SlurmUser=daemon\nSocketTimeout=1s\nSocketWriteTimeout=1s\n");
  h.start();
  // Another user's job, and the job whose plugin messages root posts during the flood.
  ASSERT_EQ(
      socket_json(
          h.socket(),
          lifecycle("job_start", 700, "s700",
                    {{"uid", kOtherUser}, {"gid", kOtherUser}, {"nodelist", "node001"}}))["ok"],
      true);
  ASSERT_EQ(socket_json(
                h.socket(),
                lifecycle("job_start", 702, "s702",
                          {{"uid", kJobOwner}, {"gid", kJobOwner}, {"nodelist", "node001"}}))["ok"],
            true);

  const std::string path = h.socket();
  ASSERT_EQ(socket_json(path, {{"op", "health"}})["ok"], true) << "once before the flood";
  Flood flood(kNobody, [&](int i) { return socket_flood_connection(path, i); });
  ASSERT_TRUE(flood.started());
  // The thousand connects were queued in the listener faster than any server takes them; what is
  // measured is the time the flooder holds its connections, once the agent has refused the rest.
  ASSERT_TRUE(testing::eventually([&] {
    return metric_value(h.agent().metrics(), R"(triage_socket_refused_connections_total{)"
                                             R"(host="node001",reason="per-uid"})")
               .value_or(0) >= kFloodConnections - 8;
  }));
  const auto flood_start = std::chrono::steady_clock::now();

  // The other user, in a child dropped to their uid, times each exchange itself (the fork is
  // not the agent's latency).
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t user = ::fork();
  if (user == 0) {
    ::close(out[0]);
    drop_to(kOtherUser);
    std::string report;
    for (int round = 0; round < 20; ++round) {
      for (const char* req : {R"({"op":"get_job","job_id":700})", R"({"op":"health"})"}) {
        const auto t0 = std::chrono::steady_clock::now();
        const std::string answer = socket_request(path, req);
        const double ms = ms_since(t0);
        const bool ok = answer.find("\"ok\":true") != std::string::npos;
        report += std::to_string(ms) + " " + (ok ? "ok" : "FAILED:" + answer.substr(0, 200)) + "\n";
      }
      ::usleep(50000);
    }
    (void)!::write(out[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(out[1]);

  // Meanwhile root posts what the plugin posts for a job's tasks, each answered directly.
  std::vector<double> root_ms;
  for (int task = 0; task < 20; ++task) {
    const nlohmann::json msg =
        lifecycle("task_exit", 702, "node001:702:0:" + std::to_string(task),
                  {{"step", "0"}, {"task", task}, {"pid", 5000 + task}, {"wait_status", 0}});
    const auto t0 = std::chrono::steady_clock::now();
    const nlohmann::json ack = socket_json(h.socket(), msg);
    root_ms.push_back(ms_since(t0));
    EXPECT_EQ(ack["ok"], true) << "task_exit " << task << ": " << ack.dump();
    std::this_thread::sleep_for(50ms);
  }
  // Long enough for the idle timeout and the write timeout to cut the flooder's holders off.
  while (std::chrono::steady_clock::now() - flood_start < std::chrono::milliseconds(2500))
    std::this_thread::sleep_for(50ms);
  const std::string during = h.agent().metrics();
  const auto t0 = std::chrono::steady_clock::now();
  const nlohmann::json end_ack =
      socket_json(h.socket(), lifecycle("job_end", 702, "node001:702:end", {{"wait_status", 0}}));
  root_ms.push_back(ms_since(t0));
  EXPECT_EQ(end_ack["ok"], true) << end_ack.dump();

  std::string user_report;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    user_report.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  ::waitpid(user, nullptr, 0);
  flood.end();

  expect_within_budget(root_ms, "root's messages");
  std::vector<double> user_ms;
  std::istringstream lines(user_report);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream fields(line);
    double ms = 0;
    std::string verdict;
    fields >> ms >> verdict;
    user_ms.push_back(ms);
    EXPECT_EQ(verdict, "ok") << line;
  }
  ASSERT_EQ(user_ms.size(), 40u) << user_report;
  expect_within_budget(user_ms, "the other user's get_job and health");

  // The flooder held its share and no more; everything else it tried was refused or cut off.
  EXPECT_LE(metric_value(during, R"(triage_socket_clients{host="node001"})").value_or(99), 8 + 1);
  EXPECT_GE(
      metric_value(during,
                   R"(triage_socket_refused_connections_total{host="node001",reason="per-uid"})")
          .value_or(0),
      kFloodConnections - 8);
  EXPECT_GE(metric_value(during,
                         R"(triage_socket_refused_connections_total{host="node001",reason="idle"})")
                .value_or(0),
            1);
  EXPECT_GE(metric_value(during,
                         R"(triage_socket_refused_connections_total{host="node001",reason="slow"})")
                .value_or(0),
            1);
  EXPECT_EQ(metric_value(during,
                         R"(triage_socket_refused_connections_total{host="node001",reason="full"})")
                .value_or(-1),
            0);
  // Every message came over the socket: nothing waited in the plugin's inbox.
  EXPECT_TRUE(!std::filesystem::exists(h.config.inbox_dir) ||
              std::filesystem::is_empty(h.config.inbox_dir));
  EXPECT_EQ(metric_value(h.agent().metrics(),
                         R"(triage_lifecycle_messages_total{host="node001",op="task_exit"})"),
            20);
}

TEST(FairShares, ARefusedUserReadsWhyBeforeTheAgentHangsUp) {
  AgentHarness h("shares", "node001", "SocketMaxClientsPerUser=2\n");
  h.start();
  const std::string path = h.socket();
  int out[2];
  ASSERT_EQ(::pipe(out), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    drop_to(kNobody);
    const int a = connect_unix(path);
    const int b = connect_unix(path);
    // The third is one too many: the agent writes one line and closes.
    const std::string third = socket_request(path, R"({"op":"ping"})");
    (void)!::write(out[1], third.data(), third.size());
    ::close(a);
    ::close(b);
    ::_exit(0);
  }
  ::close(out[1]);
  std::string third;
  char buf[1024];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    third.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  ::waitpid(child, nullptr, 0);
  const nlohmann::json refused = nlohmann::json::parse(third, nullptr, false);
  ASSERT_TRUE(refused.is_object()) << third;
  EXPECT_EQ(refused["ok"], false);
  EXPECT_EQ(refused["refused"], "per-uid");
  EXPECT_EQ(refused["error"],
            "connection refused: too many connections from uid 65534 (at most 2 at once); close "
            "one and try again");
  EXPECT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true) << "root is not affected";
}

// HTTP: a connection from `source` (a loopback address) to 127.0.0.1:port.
int connect_tcp_from(const char* source, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in from{};
  from.sin_family = AF_INET;
  ::inet_pton(AF_INET, source, &from.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
    ::close(fd);
    return -1;
  }
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// One of the flood's HTTP connections: idle, half a request head, or a whole /metrics request
// whose answer is never read.
int http_flood_connection(int port, int i) {
  const int fd = connect_tcp_from("127.0.0.2", port);
  if (fd < 0) return -1;
  // A tiny receive buffer, so that an unread answer stays waiting in the agent.
  const int small = 1;
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
  if (i % 3 == 1) send_some(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n");
  if (i % 3 == 2) send_some(fd, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  return fd;
}

TEST(FairShares, AFloodOfMetricsConnectionsLeavesAPeersEvidenceFetchAlone) {
  raise_fd_limit();
  testing::TempDir munge_dir("munge");
  testing::MungeDaemon munge(munge_dir.path());
  ASSERT_TRUE(munge.ok()) << "munged did not start";
  AgentHarness h("shares-http", "node001",
                 "SlurmUser=daemon\nHttpTimeout=1s\nHttpWriteTimeout=1s\n");
  h.config.munge_socket = munge.socket();
  h.start();
  ASSERT_EQ(
      socket_json(h.socket(),
                  lifecycle("job_start", 4242, "m1",
                            {{"uid", kNobody}, {"gid", kNobody}, {"nodelist", "node001"}}))["ok"],
      true);
  ASSERT_TRUE(h.agent().ingest(
      {testing::make_event("boot-a:7", "gpu-ras-uncorrectable", now_usec())}, "c7"));

  const int port = h.port();
  // Once before the flood: the first answer's one-time costs (munge's context, the first evidence
  // gathering) are not the flood's.
  ASSERT_EQ(testing::http_get_munged(port, "/v1/jobs/4242/events", munge.socket()).status, 200);
  Flood flood(kNobody, [&](int i) { return http_flood_connection(port, i); });
  ASSERT_TRUE(flood.started());
  const std::string refused = R"(triage_http_refused_connections_total{host="node001",reason=")";
  // As above: measured while the flood holds its connections, once the first thousand are refused.
  ASSERT_TRUE(testing::eventually([&] {
    return metric_value(h.agent().metrics(), refused + "per-address\"}").value_or(0) >=
           kFloodConnections - 16;
  }));
  const auto flood_start = std::chrono::steady_clock::now();

  // The peer (another node's agent, root) asks for the job's evidence from its own address.
  std::vector<double> peer_ms;
  for (int round = 0; round < 20; ++round) {
    std::string error;
    const auto cred = munge_credential(munge.socket(), "/v1/jobs/4242/events", error);
    ASSERT_TRUE(cred) << error;
    const auto t0 = std::chrono::steady_clock::now();
    const testing::HttpAnswer a = testing::http_get(port, "/v1/jobs/4242/events", "Munge " + *cred);
    peer_ms.push_back(ms_since(t0));
    ASSERT_EQ(a.status, 200) << a.head << a.body;
    EXPECT_NE(a.body.find("boot-a:7"), std::string::npos);
    std::this_thread::sleep_for(50ms);
  }
  while (std::chrono::steady_clock::now() - flood_start < std::chrono::milliseconds(2500))
    std::this_thread::sleep_for(50ms);
  const std::string during = h.agent().metrics();
  flood.end();

  expect_within_budget(peer_ms, "the peer's evidence fetches");
  EXPECT_GE(metric_value(during, refused + "per-address\"}").value_or(0), kFloodConnections - 16);
  EXPECT_GE(metric_value(during, refused + "idle\"}").value_or(0), 1);
  EXPECT_EQ(metric_value(during, refused + "full\"}").value_or(-1), 0);
}

}  // namespace
}  // namespace triage::agent
