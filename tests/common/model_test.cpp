#include "common/model.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/error.h"

namespace triage {
namespace {

TEST(Evidence, RoundTripsThroughJson) {
  Evidence e;
  e.job.job_id = 4242;
  e.job.name = "llama-70b";
  e.job.uid = 1000;
  e.job.nodes = {"node001", "node002"};
  e.job.mode = "full";
  NodeEvidence n;
  n.host = "node002";
  TaskExit t;
  t.host = "node002";
  t.job_id = 4242;
  t.step = "0";
  t.task = 3;
  t.rank = 11;
  t.pid = 777;
  t.wait_status = 9;  // killed by SIGKILL
  t.decode();
  n.tasks.push_back(t);
  KernelEvent k;
  k.id = "boot:17";
  k.kind = "oom-kill";
  k.severity = Severity::kCritical;
  k.job_id = 4242;
  k.pid = 777;
  k.lines = {"oom-kill:constraint=CONSTRAINT_MEMCG,..."};
  n.events.push_back(k);
  e.nodes.push_back(n);

  const nlohmann::json j = e;
  EXPECT_EQ(j["nodes"][0]["tasks"][0]["signal_name"], "SIGKILL");
  const Evidence back = parse_evidence(j.dump(), "pipe");
  ASSERT_EQ(back.nodes.size(), 1u);
  EXPECT_EQ(back.nodes[0].tasks[0].signal, 9);
  EXPECT_FALSE(back.nodes[0].tasks[0].exit_code.has_value());
  EXPECT_EQ(back.nodes[0].events[0].severity, Severity::kCritical);
  EXPECT_EQ(back.nodes[0].events[0].job_id, 4242u);
  EXPECT_EQ(back.job.mode, "full");
}

TEST(Evidence, TheMovedJobsRefusalAndTheNodesLeafSwitchRoundTrip) {
  Evidence e;
  NodeEvidence n;
  n.host = "node002";
  n.leaf_switch = "s1";
  e.nodes.push_back(n);
  e.moved.push_back({"node001", "triage preflight: port down: mlx5_0/1"});
  const Evidence back = parse_evidence(nlohmann::json(e).dump(), "pipe");
  EXPECT_EQ(back.nodes.at(0).leaf_switch, "s1");
  ASSERT_EQ(back.moved.size(), 1u);
  EXPECT_EQ(back.moved[0].node, "node001");
  EXPECT_EQ(back.moved[0].reason, "triage preflight: port down: mlx5_0/1");
  // Neither field is written when there is nothing to say: older readers see what they saw.
  const nlohmann::json plain = Evidence{};
  EXPECT_FALSE(plain.contains("moved"));
  try {
    (void)parse_evidence(R"({"schema_version":1,"moved":[{"reason":"x"}]})", "pipe");
    FAIL() << "expected an error";
  } catch (const InputError& err) {
    EXPECT_EQ(std::string(err.what()), "pipe: moved[0].node: missing");
  }
}

TEST(Evidence, TypeErrorsNameTheField) {
  const std::string bad =
      R"({"schema_version":1,"nodes":[{"host":"a"},{"host":"b","tasks":[{"pid":"x"}]}]})";
  try {
    (void)parse_evidence(bad, "pipe");
    FAIL() << "expected an error";
  } catch (const InputError& err) {
    EXPECT_EQ(std::string(err.what()), "pipe: nodes[1].tasks[0].pid: expected an integer");
  }
}

TEST(Evidence, RejectsGarbageAndUnknownVersions) {
  EXPECT_THROW((void)parse_evidence("{not json", "pipe"), InputError);
  EXPECT_THROW((void)parse_evidence(R"({"schema_version":99})", "pipe"), InputError);
  EXPECT_THROW((void)parse_evidence("\xff\xfe", "pipe"), InputError);
  // Found by fuzz_evidence: a number too large for a double is not a crash.
  EXPECT_THROW((void)parse_evidence(R"({"schema_version":1e999})", "pipe"), InputError);
}

}  // namespace
}  // namespace triage
