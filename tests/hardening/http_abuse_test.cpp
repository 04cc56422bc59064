// The agent's HTTP endpoint faces every host that can reach the node: peer endpoints without a
// credential or with forged ones (garbage, a credential from another munge realm, one made for
// another request), request heads far beyond the limit, and slowloris clients holding
// connections open. Each is refused cleanly and the agent answers a ping within budget afterwards.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "agent/net/munge_auth.h"
#include "tests/hardening/abuse_support.h"

namespace triage::hardening {
namespace {

using agent::testing::AgentHarness;
using agent::testing::http_get;
using agent::testing::http_get_munged;
using agent::testing::metric_value;
using agent::testing::MungeDaemon;
using agent::testing::TempDir;
using namespace std::chrono_literals;

constexpr auto kPingBudget = 500ms;

int status_of(const std::string& response) {
  if (response.size() < 12 || response.compare(0, 5, "HTTP/") != 0) return 0;
  return std::stoi(response.substr(9, 3));
}

class HttpAbuse : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(munge.ok()) << "munged did not start";
    ASSERT_TRUE(other_realm.ok()) << "the second munged did not start";
    h.config.munge_socket = munge.socket();
    h.start();
  }
  void TearDown() override {
    EXPECT_LT(ping_time(h.socket()), kPingBudget);
    EXPECT_EQ(http_get(h.port(), "/metrics").status, 200);
  }
  TempDir munge_dir{"hmunge"};
  MungeDaemon munge{munge_dir.path()};
  TempDir other_dir{"hmunge2"};
  MungeDaemon other_realm{other_dir.path()};  // its own key: a different cluster
  AgentHarness h{"hhttp", "node001",
                 "SlurmUser=daemon\nHttpTimeout=1s\nHttpMaxHeaderSize=4K\nHttpMaxConnections=16\n"};
};

TEST_F(HttpAbuse, ForgedAndMisplacedCredentialsAreRefused) {
  const std::string target = "/v1/health";
  std::string error;
  const auto foreign = agent::munge_credential(other_realm.socket(), target, error);
  ASSERT_TRUE(foreign) << error;
  const std::vector<std::string> forged = {
      "",                                             // none at all
      "Munge",                                        // the scheme alone
      "Munge ",                                       // an empty credential
      "Munge MUNGE:" + std::string(3000, 'A') + ":",  // long garbage that looks like one
      "Munge MUNGE:\x01\x02\xff:",                    // binary in the header
      "munge " + *foreign,                            // another realm's key
      "Munge " + *foreign,
      "Bearer " + *foreign,  // the right bytes under the wrong scheme
  };
  for (const auto& auth : forged) {
    EXPECT_EQ(http_get(h.port(), target, auth).status, 401)
        << "Authorization: " << auth.substr(0, 40);
  }
  // A genuine credential still works (the refusals did not wedge munge or the agent).
  EXPECT_EQ(http_get_munged(h.port(), target, munge.socket()).status, 200);
}

TEST_F(HttpAbuse, HugeHeadsAreRefusedWith431AndTheConnectionClosed) {
  struct Case {
    std::string name;
    std::string head;
  };
  const std::vector<Case> cases = {
      {"one huge header",
       "GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(1 << 20, 'a') + "\r\n\r\n"},
      {"many small headers",
       [] {
         std::string s = "GET /metrics HTTP/1.1\r\n";
         for (int i = 0; i < 5000; ++i)
           s += "X-" + std::to_string(i) + ": y\r\n";
         return s + "\r\n";
       }()},
      {"a huge request line", "GET /" + std::string(1 << 20, 'p') + " HTTP/1.1\r\n\r\n"},
      {"no end of head at all", std::string(1 << 20, 'G')},
  };
  for (const auto& c : cases) {
    const int fd = connect_tcp(h.port());
    ASSERT_GE(fd, 0);
    // The agent may hang up before the whole megabyte is sent; that is its right.
    send_all(fd, c.head);
    const std::string answer = read_some(fd, 3000, false);
    const int status = status_of(answer);
    EXPECT_TRUE(status == 431 || status == 400 || status == 414)
        << c.name << ": " << answer.substr(0, 80);
    EXPECT_TRUE(closed_within(fd, 3000)) << c.name;
    ::close(fd);
  }
}

TEST_F(HttpAbuse, SlowlorisClientsAreCutOffAndOthersStillGetIn) {
  // More slow clients than the connection cap, each sending a header line every 300 ms: the
  // whole-exchange deadline (1 s) ends them however busy they look.
  std::vector<int> slow;
  for (int i = 0; i < 24; ++i) {
    const int fd = connect_tcp(h.port());
    if (fd >= 0) {
      send_all(fd, "GET /metrics HTTP/1.1\r\n");
      slow.push_back(fd);
    }
  }
  ASSERT_FALSE(slow.empty());
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(1500)) {
    for (int fd : slow)
      send_all(fd, "X-Keep: alive\r\n");
    std::this_thread::sleep_for(300ms);
    EXPECT_LT(ping_time(h.socket()), kPingBudget) << "the local socket is not starved";
  }
  int cut = 0;
  for (int fd : slow) {
    if (closed_within(fd, 3000)) ++cut;
    ::close(fd);
  }
  EXPECT_EQ(cut, static_cast<int>(slow.size()));
  EXPECT_EQ(http_get(h.port(), "/metrics").status, 200) << "a normal client gets in afterwards";
  EXPECT_GE(metric_value(h.agent().metrics(), R"(triage_http_timeouts_total{host="node001"})")
                .value_or(0),
            1);
}

}  // namespace
}  // namespace triage::hardening
