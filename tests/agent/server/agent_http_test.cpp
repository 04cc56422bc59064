// The HTTP endpoint: Prometheus metrics under the seed's names, munge-authenticated peer
// endpoints, and a server that survives slow, oversized and malformed clients.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <thread>

#include "agent/net/munge_auth.h"
#include "agent/node/attribution.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::connect_tcp;
using testing::eventually;
using testing::http_get;
using testing::http_get_munged;
using testing::kDaemon;
using testing::kNobody;
using testing::make_event;
using testing::metric_value;
using testing::MungeDaemon;
using testing::TempDir;

// promtool's own verdict on the exposition, when promtool is installed.
std::string promtool_check(const std::string& metrics, const std::string& dir) {
  if (::access("/usr/bin/promtool", X_OK) != 0) return "skipped";
  const std::string file = dir + "/metrics.txt";
  testing::write_file(file, metrics);
  const std::string cmd = "/usr/bin/promtool check metrics < " + file + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr)
    out += buf;
  const int rc = p != nullptr ? ::pclose(p) : -1;
  return rc == 0 ? "ok" : "promtool failed (" + std::to_string(rc) + "): " + out;
}

TEST(AgentMetrics, TheSeedsMetricNamesAreServedWithHostLabels) {
  AgentHarness h("metrics", "gpu007");
  h.options.collectors = true;
  testing::write_sysfs_tree(h.config.sysfs_root,
                            {{0,
                              "0000:c1:00.0",
                              {{"umc", {1, 4}},
                               {"xgmi_wafl", {0, 2}},
                               {"gfx", {0, 0}},
                               {"mmhub", {0, 0}},
                               {"sdma", {0, 0}},
                               {"hdp", {0, 0}}},
                              {{"correctable", 3}, {"nonfatal", 0}, {"fatal", 0}}}});
  testing::write_proc_tree(h.config.proc_root,
                           {{100, "cat", 'D', "amdgpu_cper_ring_write"}, {101, "python3", 'S'}}, 5);
  h.start();
  KernelEvent oom = make_event("boot-a:1", "oom-kill", 1000);
  oom.severity = Severity::kCritical;
  KernelEvent ring = make_event("boot-a:2", "gpu-ring-timeout", 2000);
  ring.count = 3;
  ASSERT_TRUE(h.agent().ingest({oom, ring}, "cursor-2"));

  std::string body;
  ASSERT_TRUE(eventually([&] {
    body = http_get(h.port(), "/metrics").body;
    return body.find("hw_gpu_ras_umc_ue_total") != std::string::npos &&
           body.find("triage_dstate_tasks_by_wchan") != std::string::npos;
  }));
  const std::string gpu = R"({device="0000:c1:00.0",gpu="card0",host="gpu007"})";
  EXPECT_EQ(metric_value(body, "hw_gpu_ras_umc_ue_total" + gpu), 1);
  EXPECT_EQ(metric_value(body, "hw_gpu_ras_umc_ce_total" + gpu), 4);
  EXPECT_EQ(metric_value(body, "hw_gpu_ras_xgmi_ce_total" + gpu), 2);
  for (const char* name :
       {"hw_gpu_ras_gfx_ue_total", "hw_gpu_ras_mmhub_ce_total", "hw_gpu_ras_sdma_ue_total"}) {
    EXPECT_EQ(metric_value(body, name + gpu), 0) << name;
  }
  EXPECT_EQ(metric_value(body, "hw_gpu_pcie_correctable_total" + gpu), 3);
  EXPECT_EQ(metric_value(body, "hw_gpu_pcie_fatal_total" + gpu), 0);
  EXPECT_EQ(
      metric_value(
          body,
          R"(triage_gpu_ras_errors_total{block="hdp",device="0000:c1:00.0",gpu="card0",host="gpu007",type="ue"})"),
      0)
      << "blocks outside the seed's list are still exported";
  EXPECT_EQ(metric_value(body, R"(hw_oom_kills_total{host="gpu007"})"), 1);
  EXPECT_EQ(metric_value(body, R"(hw_dmesg_gpu_errors_total{host="gpu007"})"), 3)
      << "a folded flood counts its repeats";
  EXPECT_EQ(metric_value(body, R"(hw_procs_blocked{host="gpu007"})"), 5);
  EXPECT_EQ(metric_value(body, R"(triage_events_total{host="gpu007",kind="oom-kill"})"), 1);
  EXPECT_EQ(
      metric_value(body,
                   R"(triage_dstate_tasks_by_wchan{host="gpu007",wchan="amdgpu_cper_ring_write"})"),
      1);
  // A UE in the sysfs counters makes the node drain-recommended.
  ASSERT_TRUE(eventually([&] {
    return metric_value(http_get(h.port(), "/metrics").body,
                        R"(triage_drain_recommended{host="gpu007"})") == 1.0;
  }));
  body = http_get(h.port(), "/metrics").body;
  EXPECT_EQ(metric_value(body, R"(triage_node_health{host="gpu007",verdict="drain-recommended"})"),
            1);
  EXPECT_EQ(metric_value(body, R"(triage_spool_write_failures_total{host="gpu007"})"), 0);
  TempDir scratch("promtool");
  const std::string verdict = promtool_check(body, scratch.path());
  EXPECT_TRUE(verdict == "ok" || verdict == "skipped") << verdict;
}

class AgentHttpAuth : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(agent.start());
    ASSERT_TRUE(eventually([&] { return h.agent().verdict().verdict == "drain-recommended"; }));
  }
  testing::PeerEvidenceAgent agent{"http", "SlurmUser=daemon\n"};
  AgentHarness& h = agent.h;
  MungeDaemon& munge = agent.munge;
};

TEST_F(AgentHttpAuth, PeerEndpointsWantAMungeCredential) {
  EXPECT_EQ(http_get(h.port(), "/v1/health").status, 401);
  EXPECT_EQ(http_get(h.port(), "/v1/jobs/4242/events").status, 401);
  EXPECT_EQ(http_get(h.port(), "/v1/health", "Munge MUNGE:AAAAforged==:").status, 401);
  EXPECT_EQ(http_get(h.port(), "/v1/health", "Basic cm9vdDpyb290").status, 401);
  const auto ok = http_get_munged(h.port(), "/v1/health", munge.socket());
  ASSERT_EQ(ok.status, 200) << ok.body;
  const auto health = nlohmann::json::parse(ok.body);
  EXPECT_EQ(health["host"], "node001");
  EXPECT_EQ(health["verdict"]["verdict"], "drain-recommended");
}

TEST_F(AgentHttpAuth, ACredentialIsBoundToItsRequestAndCannotBeReplayed) {
  // A credential made for job 1's events does not open job 4242's.
  EXPECT_EQ(
      http_get_munged(h.port(), "/v1/jobs/4242/events", munge.socket(), "/v1/jobs/1/events").status,
      401);
  std::string error;
  const auto cred = munge_credential(munge.socket(), "/v1/health", error);
  ASSERT_TRUE(cred) << error;
  EXPECT_EQ(http_get(h.port(), "/v1/health", "Munge " + *cred).status, 200);
  EXPECT_EQ(http_get(h.port(), "/v1/health", "Munge " + *cred).status, 401)
      << "munged refuses a replay";
}

TEST_F(AgentHttpAuth, OnlyRootSlurmUserAndTheOwnerReadAJobsEvidence) {
  const auto root = http_get_munged(h.port(), "/v1/jobs/4242/events", munge.socket());
  ASSERT_EQ(root.status, 200) << root.body;
  const NodeEvidence n = node_evidence_from_json(nlohmann::json::parse(root.body), "http");
  EXPECT_EQ(n.host, "node001");
  ASSERT_EQ(n.events.size(), 1u) << "the UE happened while the job ran";
  EXPECT_EQ(n.events[0].id, "boot-a:7");

  EXPECT_EQ(http_get(h.port(), "/v1/jobs/4242/events", "", kNobody, munge.socket()).status, 200)
      << "the owner";
  EXPECT_EQ(http_get(h.port(), "/v1/jobs/4242/events", "", kDaemon, munge.socket()).status, 200)
      << "SlurmUser";
  const auto other = http_get(h.port(), "/v1/jobs/4242/events", "", 2u, munge.socket());
  EXPECT_EQ(other.status, 403) << other.head;
  EXPECT_EQ(http_get(h.port(), "/v1/jobs/9999/events", "", kNobody, munge.socket()).status, 403)
      << "a job the node does not know has no owner to match";
}

TEST_F(AgentHttpAuth, TheOwnerReadsOnlyTheJobsOwnSpanHoweverWideTheWindowAsked) {
  // A node-wide line from an hour before job 4242 started here (at the fixture's job_start, a
  // moment ago), naming another user's process; the UE boot-a:7 came while the job ran.
  const int64_t now = now_usec();
  KernelEvent before = make_event("boot-a:3", "gpu-ras-uncorrectable", now - 3600LL * 1000000);
  before.task = "secret-model";
  before.lines = {"amdgpu: uncorrectable error while secret-model (pid 4711) ran"};
  ASSERT_TRUE(h.agent().ingest({before}, "c8"));
  const std::string wide = "/v1/jobs/4242/events?start=" + std::to_string(now / 1000000 - 7200) +
                           "&end=" + std::to_string(now / 1000000 + 7200);
  const auto owner = http_get(h.port(), wide, "", kNobody, munge.socket());
  ASSERT_EQ(owner.status, 200) << owner.body;
  const NodeEvidence mine = node_evidence_from_json(nlohmann::json::parse(owner.body), "owner");
  ASSERT_EQ(mine.events.size(), 1u) << owner.body;
  EXPECT_EQ(mine.events[0].id, "boot-a:7") << "the line from while the job ran";
  EXPECT_EQ(owner.body.find("secret-model"), std::string::npos);

  // A peer's agent (root) asks with slurmctld's times, which may reach before what this node saw.
  const auto peer = http_get_munged(h.port(), wide, munge.socket());
  ASSERT_EQ(peer.status, 200) << peer.body;
  const NodeEvidence all = node_evidence_from_json(nlohmann::json::parse(peer.body), "peer");
  ASSERT_EQ(all.events.size(), 2u) << peer.body;
  EXPECT_EQ(all.events[0].id, "boot-a:3");
}

TEST(OwnerWindow, AnAskedWindowIsKeptInsideTheJobsSpanPlusTheMargin) {
  constexpr int64_t kSec = 1000000;
  JobRecord job;
  job.start_usec = 1000 * kSec;
  job.end_usec = 2000 * kSec;
  job.ended = true;
  const int64_t now = 5000 * kSec;
  const auto w = owner_window(job, {1 * kSec, 4000 * kSec}, 2 * kSec, now);
  EXPECT_EQ(w.start_usec, 998 * kSec);
  EXPECT_EQ(w.end_usec, 2002 * kSec);
  const auto inside = owner_window(job, {1500 * kSec, 1600 * kSec}, 2 * kSec, now);
  EXPECT_EQ(inside.start_usec, 1500 * kSec) << "a narrower window is the owner's to ask";
  EXPECT_EQ(inside.end_usec, 1600 * kSec);
  const auto own = owner_window(job, {0, 0}, 2 * kSec, now);
  EXPECT_EQ(own.start_usec, 0) << "0 still means the job's own";
  EXPECT_EQ(own.end_usec, 0);

  job.ended = false;  // still running: its span ends now
  EXPECT_EQ(owner_window(job, {1 * kSec, 9000 * kSec}, 2 * kSec, now).end_usec, 5002 * kSec);

  JobRecord unseen;  // no start seen on this node: no span, so no node-wide window at all
  const auto none = owner_window(unseen, {1 * kSec, 9000 * kSec}, 2 * kSec, now);
  EXPECT_EQ(none.start_usec, 0);
  EXPECT_EQ(none.end_usec, 0);
}

TEST(AgentHttpServer, SlowMalformedAndOversizedClientsAreCutOffAndOthersStillServed) {
  AgentHarness h("httpd", "node001", "HttpTimeout=1s\nHttpMaxHeaderSize=2K\n");
  h.start();
  // Slowloris: half a request head, then nothing.
  const int slow = connect_tcp(h.port());
  ASSERT_GE(slow, 0);
  const std::string part = "GET /metrics HTTP/1.1\r\nHost: x\r\n";
  ASSERT_GT(::send(slow, part.data(), part.size(), MSG_NOSIGNAL), 0);
  EXPECT_EQ(http_get(h.port(), "/metrics").status, 200) << "others are served meanwhile";
  char c = 0;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(::recv(slow, &c, 1, 0), 0) << "the slow client is dropped";
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  ::close(slow);

  EXPECT_EQ(http_get(h.port(), "/metrics", std::string(4000, 'a')).status, 431);
  EXPECT_EQ(http_get(h.port(), "/nope").status, 404);
  EXPECT_EQ(testing::http_get(h.port(), "/v1/jobs/abc/events").status, 404);
  const int post = connect_tcp(h.port());
  const std::string req = "POST /metrics HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
  ::send(post, req.data(), req.size(), MSG_NOSIGNAL);
  char buf[256] = {};
  ASSERT_GT(::recv(post, buf, sizeof buf - 1, 0), 12);
  EXPECT_EQ(std::string(buf).substr(9, 3), "413");
  ::close(post);
  const int junk = connect_tcp(h.port());
  const std::string bin =
      std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) + "\r\n\r\n";
  ::send(junk, bin.data(), bin.size(), MSG_NOSIGNAL);
  char jb[256] = {};
  ASSERT_GT(::recv(junk, jb, sizeof jb - 1, 0), 12);
  EXPECT_EQ(std::string(jb).substr(9, 3), "400");
  ::close(junk);
  EXPECT_EQ(http_get(h.port(), "/metrics").status, 200);
  EXPECT_GE(metric_value(h.agent().metrics(), R"(triage_http_timeouts_total{host="node001"})")
                .value_or(0),
            1);
}

}  // namespace
}  // namespace triage::agent
