// Issue 27, part 5 against a real slurmctld that knows the switch topology: four nodes on one
// host, leaf1 = the first two and leaf2 = the other two (scripts/slurm-cluster --topology writes
// topology.conf and TopologyPlugin=topology/tree). Each node's outcome history is served by a
// stand-in agent (tests/agent/fake_history_agent.h): the histories are the input here, the
// topology is what comes from Slurm. Two suspect nodes under leaf1 must name leaf1, not the two
// nodes; with the topology switched off, the same history names the two nodes, as before. A real
// two-node NCCL failure under leaf1 (this build's plugin and agents) must say, in its report, that
// both its nodes hang off leaf1.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/agent/fake_history_agent.h"
#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

using nlohmann::json;

ClusterEnvironment* g_env = nullptr;

// A record of one two-node job as GET /v1/history serves it; a failure is an NCCL timeout that
// `culprit`'s own agent pinned on it (a link-down line in its kernel log: trusted).
json record(uint64_t id, const std::string& a, const std::string& b, const std::string& culprit) {
  json r = {{"v", 1},
            {"job_id", id},
            {"user", "alice"},
            {"end_time", 1790000000 + static_cast<int64_t>(id)},
            {"status", culprit.empty() ? "completed" : "failed"},
            {"nodes", {a, b}},
            {"implicated", json::array()},
            {"gpu_hours_lost", nullptr}};
  if (!culprit.empty()) {
    r["class"] = "nccl-timeout";
    r["blame"] = "platform";
    r["implicated"].push_back(
        {{"node", culprit}, {"why", "mlx5_core: link down on port 1"}, {"trusted", true}});
  }
  return r;
}

// A busy history in which n1 and n2 (both under leaf1) each fail six jobs and nothing else does.
std::vector<json> history(const std::vector<std::string>& n) {
  std::vector<json> jobs;
  jobs.reserve(1000 + 60 * 4 + 20 + 12);
  uint64_t id = 1;
  for (int i = 0; i < 1000; ++i)
    jobs.push_back(record(id++, n[2], n[3], ""));
  for (int i = 0; i < 60; ++i) {
    for (size_t a : {0u, 1u}) {
      for (size_t b : {2u, 3u})
        jobs.push_back(record(id++, n[a], n[b], ""));
    }
  }
  for (int i = 0; i < 20; ++i)
    jobs.push_back(record(id++, n[0], n[1], ""));
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(record(id++, n[0], n[2], n[0]));
    jobs.push_back(record(id++, n[1], n[3], n[1]));
  }
  return jobs;
}

struct Agents {
  std::vector<std::unique_ptr<agent::testing::FakeHistoryAgent>> fakes;
  std::string list;  // 127.0.0.1:<port>,...
};

Agents serve_histories(const SlurmCluster& c) {
  std::map<std::string, std::vector<json>> by_node;
  for (const json& r : history(c.nodes())) {
    for (const json& node : r["nodes"])
      by_node[node.get<std::string>()].push_back(r);
  }
  Agents out;
  for (const auto& [node, records] : by_node) {
    const json answer = {{"host", node},
                         {"records", records},
                         {"kept", records.size()},
                         {"dropped", 0},
                         {"window", {{"days", 30}, {"max_jobs", 10000}}}};
    out.fakes.push_back(std::make_unique<agent::testing::FakeHistoryAgent>(answer.dump()));
    out.list += (out.list.empty() ? "" : ",") + std::string("127.0.0.1:") +
                std::to_string(out.fakes.back()->port());
  }
  return out;
}

CommandResult suspects(const SlurmCluster& c, const Agents& agents,
                       const std::vector<std::string>& more) {
  const std::string conf = c.state_dir() + "/etc/triage-cli.conf";
  std::ofstream(conf) << "";
  std::vector<std::string> argv = {SLURM_TRIAGE_CLI, "nodes",
                                   "--config",       conf,
                                   "--munge-socket", c.state_dir() + "/munge/munge.sock",
                                   "--nodes",        agents.list,
                                   "--suspects"};
  argv.insert(argv.end(), more.begin(), more.end());
  return c.as_root(argv);
}

TEST(SwitchSuspects, SlurmKnowsTwoLeafSwitches) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const CommandResult topo = c.as_root({"scontrol", "show", "topology"});
  ASSERT_TRUE(topo.ok()) << topo.output << c.logs();
  EXPECT_NE(topo.output.find("SwitchName=leaf1 Level=0"), std::string::npos) << topo.output;
  EXPECT_NE(topo.output.find("SwitchName=leaf2 Level=0"), std::string::npos) << topo.output;
  EXPECT_NE(topo.output.find("SwitchName=spine Level=1"), std::string::npos) << topo.output;
}

TEST(SwitchSuspects, TwoSuspectNodesUnderOneLeafNameTheLeaf) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_EQ(c.nodes().size(), 4u);
  const Agents agents = serve_histories(c);
  const CommandResult ranked = suspects(c, agents, {"--format", "json"});
  ASSERT_TRUE(ranked.ok()) << ranked.output;
  const json report = json::parse(ranked.output, nullptr, false);
  ASSERT_TRUE(report.is_object()) << ranked.output;
  EXPECT_EQ(report["topology"]["source"], "scontrol show topology") << report.dump(1);
  EXPECT_EQ(report["topology"]["leaf_switches"], 2) << report.dump(1);
  ASSERT_EQ(report["switches"].size(), 1u) << report.dump(1);
  const json& leaf = report["switches"][0];
  EXPECT_EQ(leaf["switch"], "leaf1");
  ASSERT_EQ(leaf["suspect_nodes"].size(), 2u) << leaf.dump(1);
  EXPECT_EQ(leaf["suspect_nodes"][0]["drain"]["recommended"], false) << leaf.dump(1);
  EXPECT_EQ(report["suspects"], json::array()) << "the switch is named, not each of its nodes";

  const CommandResult table = suspects(c, agents, {});
  ASSERT_TRUE(table.ok()) << table.output;
  EXPECT_NE(table.output.find("switch leaf1: leaf switch of "), std::string::npos) << table.output;
  EXPECT_NE(table.output.find("2 of its 2 nodes are suspects"), std::string::npos) << table.output;
}

TEST(SwitchSuspects, WithoutTheTopologyTheSameHistoryNamesTheTwoNodes) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const Agents agents = serve_histories(c);
  const CommandResult ranked = suspects(c, agents, {"--topology", "none", "--format", "json"});
  ASSERT_TRUE(ranked.ok()) << ranked.output;
  const json report = json::parse(ranked.output, nullptr, false);
  ASSERT_TRUE(report.is_object()) << ranked.output;
  EXPECT_EQ(report["switches"], json::array());
  ASSERT_EQ(report["suspects"].size(), 2u) << report.dump(1);
  EXPECT_EQ(report["suspects"][0]["drain"]["recommended"], true) << report.dump(1);
}

// The single job's report: a two-node job under leaf1 whose ranks both fail with NCCL's network
// error. The batch host's agent gives each node its leaf switch from slurmctld's topology, so the
// report says both nodes hang off leaf1.
TEST(SwitchSuspects, ANetworkFailureOfTwoNodesUnderLeaf1SaysTheyShareIt) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::vector<std::string>& n = c.nodes();
  const LayoutJob j = submit_layout_job(
      c, "shared-leaf", "shared-leaf",
      "srun bash -c 'echo \"$SLURM_PROCID: $(hostname):4242:4300 [0] NCCL WARN Net : Call to recv "
      "from 127.0.0.2<4242> failed : Broken pipe\"; exit 1'",
      {"-N", "2", "--ntasks-per-node", "1", "-w", n[0] + "," + n[1]});
  EXPECT_EQ(c.wait_job(j.id), "FAILED") << c.logs();
  wait_for_analysis(c, j.id, n[0]);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r.value("primary_failure", ""), "nccl-timeout") << r.dump(1);
  ASSERT_TRUE(r.contains("shared_switch")) << r.dump(1);
  EXPECT_EQ(r["shared_switch"]["switch"], "leaf1");
  EXPECT_EQ(r["shared_switch"]["nodes"], json::array({n[0], n[1]}));
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("hang off leaf switch leaf1"), std::string::npos) << md;
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  // The plugin, agents and analyzer of this build: the shared-leaf test runs a real job.
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.agent_settings = {"EvidenceSettleDelay=1s", "PeerFetchTimeout=3s"};
  options.nodes = 4;
  options.topology = true;
  return triage::testing::run_with_cluster(argc, argv, "switch_suspects_e2e_tests", options,
                                           &triage::testing::g_env);
}
