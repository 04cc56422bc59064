// The prolog's preflight question against a stand-in agent: a clear "unfit" with evidence is the
// only answer that fails the prolog; an agent that is down, slow or talks nonsense lets the job go
// ahead, and never after more than the 50 ms budget (measured).
#include "spank/preflight_client.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <string>

#include "tests/spank/fake_agent.h"
#include "tests/spank/temp_dir.h"

namespace triage::spank {
namespace {

using std::chrono::milliseconds;
using testing::FakeAgent;

// The budget, and what a loaded CI machine may add to it before the test calls it a wait.
constexpr int64_t kSlackMs = 25;

class Preflight : public ::testing::Test {
 protected:
  std::string ask_line() {
    char line[512];
    EXPECT_TRUE(preflight_request(4242, "gpu-a017", "0,1", line, sizeof(line)));
    return line;
  }
  PreflightResult ask() { return ask_preflight(socket_.c_str(), kPreflightBudgetMs, ask_line()); }

  testing::TempDir dir_;
  std::string socket_ = dir_ / "agent.sock";
};

TEST_F(Preflight, TheRequestNamesTheJobTheNodeAndTheJobsGpus) {
  char line[512];
  ASSERT_TRUE(preflight_request(4242, "gpu-a017", "0,1", line, sizeof(line)));
  EXPECT_STREQ(line,
               "{\"op\":\"preflight\",\"job_id\":4242,\"host\":\"gpu-a017\",\"gpus\":\"0,1\"}\n");
  ASSERT_TRUE(preflight_request(7, "n1", nullptr, line, sizeof(line)));
  EXPECT_STREQ(line, "{\"op\":\"preflight\",\"job_id\":7,\"host\":\"n1\"}\n");
  EXPECT_FALSE(preflight_request(7, "n1", "0\",\"fit\":true", line, sizeof(line)));
  EXPECT_FALSE(preflight_request(7, "n1", "0,1", line, 20));
}

TEST_F(Preflight, AFitNodeLetsTheJobIn) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer("{\"fit\":true,\"ok\":true}");
  const PreflightResult r = ask();
  EXPECT_EQ(r.outcome, PreflightOutcome::kFit);
  ASSERT_TRUE(agent.wait_for_lines(1, milliseconds(1000)));
  EXPECT_EQ(agent.lines()[0],
            "{\"op\":\"preflight\",\"job_id\":4242,\"host\":\"gpu-a017\",\"gpus\":\"0,1\"}");
}

TEST_F(Preflight, AnUnfitNodeGivesTheReasonWithItsEvidence) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer(
      "{\"evidence\":[\"drain recommended: GPU 0000:c1:00.0 fell off the bus (Xid 79)\"],"
      "\"fit\":false,\"ok\":true,\"reason\":\"triage preflight: drain recommended: GPU "
      "0000:c1:00.0 fell off the bus (Xid 79) \\\"quoted\\\"\"}");
  const PreflightResult r = ask();
  ASSERT_EQ(r.outcome, PreflightOutcome::kUnfit) << r.why;
  EXPECT_STREQ(r.reason,
               "triage preflight: drain recommended: GPU 0000:c1:00.0 fell off the bus (Xid 79) "
               "\"quoted\"");
}

TEST_F(Preflight, NoAgentFailsOpenAtOnce) {
  const auto t0 = std::chrono::steady_clock::now();
  const PreflightResult r = ask();
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(r.outcome, PreflightOutcome::kNoAnswer);
  EXPECT_NE(std::strstr(r.why, "connect"), nullptr) << r.why;
  EXPECT_LT(ms.count(), 10);
}

TEST_F(Preflight, ASlowAgentFailsOpenWithinTheBudget) {
  // Answers "unfit" after 200 ms: too late to count, and the prolog must not wait for it.
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck, milliseconds(200));
  agent.set_answer("{\"fit\":false,\"ok\":true,\"reason\":\"triage preflight: port down: x\"}");
  const auto t0 = std::chrono::steady_clock::now();
  const PreflightResult r = ask();
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_EQ(r.outcome, PreflightOutcome::kNoAnswer);
  EXPECT_GE(ms.count(), kPreflightBudgetMs - 1);
  EXPECT_LE(ms.count(), kPreflightBudgetMs + kSlackMs);
  EXPECT_LE(r.elapsed_ms, kPreflightBudgetMs + kSlackMs);
}

TEST_F(Preflight, ASilentAgentFailsOpenWithinTheBudget) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kSilent);
  const PreflightResult r = ask();
  EXPECT_EQ(r.outcome, PreflightOutcome::kNoAnswer);
  EXPECT_LE(r.elapsed_ms, kPreflightBudgetMs + kSlackMs);
}

TEST_F(Preflight, GarbageFailsOpen) {
  for (const char* answer :
       {"garbage", "{\"ok\":true}", "{\"ok\":true,\"fit\":\"no\"}", "{\"ok\":true,\"fit\":false}",
        "{\"ok\":true,\"fit\":false,\"reason\":\"the node is bad\"}",
        "{\"ok\":true,\"fit\":false,\"reason\":\"triage preflight: \"}",
        "{\"ok\":true,\"fit\":false,\"reason\":\"triage preflight: unterminated",
        "{\"ok\":false,\"error\":\"permission denied\"}"}) {
    SCOPED_TRACE(answer);
    const PreflightResult r = parse_preflight_answer(answer);
    EXPECT_EQ(r.outcome, PreflightOutcome::kNoAnswer);
    EXPECT_NE(r.why[0], '\0');
  }
}

TEST_F(Preflight, GarbageFromALiveAgentFailsOpen) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer("\x01\x02 not json at all");
  EXPECT_EQ(ask().outcome, PreflightOutcome::kNoAnswer);
}

TEST_F(Preflight, AnAgentThatHangsUpFailsOpen) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kHangUp);
  EXPECT_EQ(ask().outcome, PreflightOutcome::kNoAnswer);
}

TEST_F(Preflight, ALongReasonIsCutNotOverrun) {
  const std::string reason = "triage preflight: " + std::string(1000, 'x');
  const PreflightResult r =
      parse_preflight_answer("{\"ok\":true,\"fit\":false,\"reason\":\"" + reason + "\"}");
  ASSERT_EQ(r.outcome, PreflightOutcome::kUnfit);
  EXPECT_EQ(std::strlen(r.reason), kMaxPreflightReason);
}

}  // namespace
}  // namespace triage::spank
