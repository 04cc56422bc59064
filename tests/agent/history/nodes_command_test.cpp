// `slurm-triage nodes`, run as the real CLI against real agents.
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <cstdio>
#include <memory>

#include "common/time_util.h"
#include "tests/agent/fake_history_agent.h"
#include "tests/agent/history_fixture.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::eventually;
using testing::make_event;
using testing::MungeDaemon;
using testing::TempDir;

struct CliRun {
  int status = -1;
  std::string out;
};

CliRun run_cli(const std::string& args) {
  CliRun r;
  const std::string cmd = testing::cli_path() + " nodes " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  char buf[4096];
  while (p != nullptr && std::fgets(buf, sizeof buf, p) != nullptr)
    r.out += buf;
  const int st = p != nullptr ? ::pclose(p) : -1;
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return r;
}

TEST(NodesCommand, TheLocalAgentsVerdictAsJsonAndTable) {
  AgentHarness h("nodes", "gpu001");
  h.start();
  KernelEvent ue = make_event("boot-a:9", "gpu-ras-uncorrectable", now_usec());
  ue.summary = "uncorrectable umc error on card0";
  ASSERT_TRUE(h.agent().ingest({ue}, "c"));
  ASSERT_TRUE(eventually([&] { return h.agent().verdict().verdict == "drain-recommended"; }));
  testing::write_file(h.dir() + "/empty.conf", "");
  const std::string common = "--config " + h.dir() + "/empty.conf --socket " + h.socket();
  const CliRun json = run_cli(common + " --format json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["nodes"].size(), 1u);
  EXPECT_EQ(j["nodes"][0]["host"], "gpu001");
  EXPECT_EQ(j["nodes"][0]["verdict"]["verdict"], "drain-recommended");
  EXPECT_EQ(j["nodes"][0]["drain"]["policy"], "recommend");

  const CliRun table = run_cli(common);
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("HOST"), std::string::npos);
  EXPECT_NE(table.out.find("gpu001"), std::string::npos);
  EXPECT_NE(table.out.find("drain-recommended"), std::string::npos);
  EXPECT_NE(table.out.find("uncorrectable umc error on card0"), std::string::npos);
}

TEST(NodesCommand, WhoseDrainTheNodeCarriesIsShown) {
  AgentHarness h("nodes", "gpu001");
  SlurmNodeState n;
  n.name = "gpu001";
  n.state = "DRAINED";
  n.drain = true;
  n.reason = "bios upgrade";
  h.slurm().set_node(n);
  h.start();
  testing::write_file(h.dir() + "/empty.conf", "");
  const std::string common = "--config " + h.dir() + "/empty.conf --socket " + h.socket();
  ASSERT_TRUE(eventually([&] {
    return testing::socket_json(h.socket(), {{"op", "health"}})["drain"]["owner"] == "admin";
  }));
  const CliRun json = run_cli(common + " --format json");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["nodes"][0]["drain"]["owner"], "admin") << json.out;
  EXPECT_EQ(j["nodes"][0]["drain"]["slurm_reason"], "bios upgrade");
  const CliRun table = run_cli(common);
  ASSERT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find("DRAIN"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" admin "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("[drained by an admin: bios upgrade]"), std::string::npos) << table.out;
}

TEST(NodesCommand, AListOfNodesIsAskedOverMungeHttpAndADeadOneIsNamed) {
  TempDir munge_dir("munge");
  MungeDaemon munge(munge_dir.path());
  ASSERT_TRUE(munge.ok());
  AgentHarness a("nodes-a", "gpu001");
  AgentHarness b("nodes-b", "gpu002");
  a.config.munge_socket = munge.socket();
  b.config.munge_socket = munge.socket();
  a.start();
  b.start();
  testing::write_file(a.dir() + "/empty.conf", "");
  const std::string list = "127.0.0.1:" + std::to_string(a.port()) +
                           ",127.0.0.1:" + std::to_string(b.port()) + ",127.0.0.1:1";
  const CliRun r = run_cli("--config " + a.dir() + "/empty.conf --munge-socket " + munge.socket() +
                           " --timeout 5 --format json --nodes " + list);
  EXPECT_EQ(r.status, 1) << "one agent did not answer: " << r.out;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_EQ(j["nodes"].size(), 3u);
  EXPECT_EQ(j["nodes"][0]["host"], "gpu001");
  EXPECT_EQ(j["nodes"][1]["host"], "gpu002");
  EXPECT_EQ(j["nodes"][1]["verdict"]["verdict"], "healthy");
  EXPECT_EQ(j["nodes"][2]["reachable"], false);
  EXPECT_FALSE(j["nodes"][2]["error"].get<std::string>().empty());

  // Without munge the agents refuse, and the CLI says so per node.
  const CliRun bad = run_cli(
      "--config " + a.dir() +
      "/empty.conf --munge-socket /nonexistent.sock --nodes 127.0.0.1:" + std::to_string(a.port()));
  EXPECT_EQ(bad.status, 1);
  EXPECT_NE(bad.out.find("unreachable"), std::string::npos) << bad.out;
}

TEST(NodesCommand, SuspectsAreRankedFromEveryAgentsHistoryAndTheDrainNamesTheJobs) {
  TempDir dir("suspects");
  MungeDaemon munge(dir.path());
  ASSERT_TRUE(munge.ok());
  const testing::HistorySpec spec;
  // Each node's agent serves the jobs it ran on; one also serves two records it cannot vouch for.
  std::vector<std::unique_ptr<testing::FakeHistoryAgent>> agents;
  std::string list;
  for (auto& [node, records] : testing::histories_by_node(testing::generate_history(spec), 10000)) {
    if (node == "gpu-a005") {
      records.push_back({{"v", 1}, {"user", "x"}, {"nodes", {"gpu-a005", "gpu-a006"}}});
      records.push_back(nlohmann::json::parse(R"({"v": 1, "job_id": 99999, "user": "x",
          "end_time": "yesterday", "status": "failed", "nodes": ["gpu-a005", "gpu-a006"],
          "implicated": []})"));
    }
    agents.push_back(
        std::make_unique<testing::FakeHistoryAgent>(testing::history_answer(node, records)));
    list += (list.empty() ? "" : ",") + std::string("127.0.0.1:") +
            std::to_string(agents.back()->port());
  }
  ASSERT_EQ(agents.size(), 40u);
  testing::write_file(dir.path() + "/empty.conf", "");
  const std::string common = "--config " + dir.path() + "/empty.conf --munge-socket " +
                             munge.socket() + " --timeout 20 --suspects";

  const CliRun json = run_cli(common + " --format json --nodes " + list + ",127.0.0.1:1");
  EXPECT_EQ(json.status, 1) << "one agent did not answer: " << json.out;
  const auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["jobs"], 400);
  EXPECT_EQ(j["nodes"], 40);
  EXPECT_EQ(j["agents"]["reached"], 40);
  ASSERT_EQ(j["agents"]["unreachable"].size(), 1u);
  EXPECT_EQ(j["agents"]["unreachable"][0]["host"], "127.0.0.1:1");
  EXPECT_EQ(j["records"]["skipped"], 2);
  EXPECT_NE(j["test"].get<std::string>().find("Bonferroni"), std::string::npos);
  // No slurmctld to ask here: no topology, silently, and the nodes are ranked as ever.
  EXPECT_EQ(j["topology"]["leaf_switches"], 0) << j["topology"].dump();
  EXPECT_FALSE(j["topology"].contains("warning")) << j["topology"].dump();
  EXPECT_EQ(j["switches"], nlohmann::json::array());
  ASSERT_EQ(j["suspects"].size(), 1u) << json.out;
  const auto& lemon = j["suspects"][0];
  EXPECT_EQ(lemon["node"], spec.lemon);
  EXPECT_GE(lemon["failures"].get<int>(), 3);
  EXPECT_GT(lemon["jobs"].get<int>(), lemon["failures"].get<int>());
  EXPECT_LT(lemon["p_value"].get<double>(), 0.01 / 40);
  EXPECT_GT(lemon["cluster_rate"].get<double>(), 0.0);
  EXPECT_EQ(lemon["drain"]["recommended"], true);
  const std::string drain = lemon["reasons"].back().get<std::string>();
  EXPECT_EQ(drain.rfind("drain recommended: jobs " +
                            std::to_string(lemon["failed_jobs"][0].get<uint64_t>()) + ", ",
                        0),
            0u)
      << drain;

  const CliRun table = run_cli(common + " --nodes " + list);
  EXPECT_EQ(table.status, 0) << table.out;
  EXPECT_NE(table.out.find(spec.lemon + ": "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("multi-node jobs failed on platform evidence trusted on this node"),
            std::string::npos)
      << table.out;
  EXPECT_NE(table.out.find("  drain recommended: jobs "), std::string::npos);
  EXPECT_EQ(table.out.find(spec.busy + ":"), std::string::npos) << "the busy node is no suspect";
  EXPECT_NE(table.out.find("test: binomial tail"), std::string::npos);
}

// One two-node job of a history; a failure is pinned on `culprit` by its own agent (trusted).
nlohmann::json two_node_job(uint64_t id, const std::string& a, const std::string& b,
                            const std::string& culprit = "") {
  nlohmann::json r = {{"v", 1},
                      {"job_id", id},
                      {"user", "alice"},
                      {"end_time", 1790000000 + static_cast<int64_t>(id)},
                      {"status", culprit.empty() ? "completed" : "failed"},
                      {"nodes", {a, b}},
                      {"implicated", nlohmann::json::array()}};
  if (!culprit.empty()) {
    r["class"] = "nccl-timeout";
    r["blame"] = "platform";
    r["implicated"].push_back(
        {{"node", culprit}, {"why", "mlx5_core: link down on port 1"}, {"trusted", true}});
  }
  return r;
}

// g1 and g2 (leaf1 of the saved topology) fail six jobs each; g3 and g4 (leaf2) never do.
std::vector<nlohmann::json> two_lemons_under_one_leaf() {
  std::vector<nlohmann::json> jobs;
  uint64_t id = 1;
  jobs.reserve(1000 + 60 * 4 + 12);
  for (int i = 0; i < 1000; ++i)
    jobs.push_back(two_node_job(id++, "g3", "g4"));
  for (int i = 0; i < 60; ++i) {
    for (const char* a : {"g1", "g2"}) {
      for (const char* b : {"g3", "g4"})
        jobs.push_back(two_node_job(id++, a, b));
    }
  }
  for (int i = 0; i < 6; ++i) {
    jobs.push_back(two_node_job(id++, "g1", "g3", "g1"));
    jobs.push_back(two_node_job(id++, "g2", "g4", "g2"));
  }
  return jobs;
}

TEST(NodesCommand, TwoSuspectsUnderOneLeafSwitchNameTheSwitch) {
  TempDir dir("switches");
  MungeDaemon munge(dir.path());
  ASSERT_TRUE(munge.ok());
  testing::FakeHistoryAgent agent(testing::history_answer("g1", two_lemons_under_one_leaf()));
  testing::write_file(dir.path() + "/empty.conf", "");
  testing::write_file(dir.path() + "/topology.txt",
                      "SwitchName=leaf1 Level=0 LinkSpeed=1 Nodes=g[1-2]\n"
                      "SwitchName=leaf2 Level=0 LinkSpeed=1 Nodes=g[3-4]\n"
                      "SwitchName=spine Level=1 LinkSpeed=1 Switches=leaf[1-2]\n");
  testing::write_file(dir.path() + "/garbage.txt", "SwitchName=leaf1 Level=zero Nodes=g1\n");
  const std::string common = "--config " + dir.path() + "/empty.conf --munge-socket " +
                             munge.socket() +
                             " --suspects --nodes 127.0.0.1:" + std::to_string(agent.port());

  const CliRun json = run_cli(common + " --format json --topology " + dir.path() + "/topology.txt");
  ASSERT_EQ(json.status, 0) << json.out;
  const auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << json.out;
  EXPECT_EQ(j["topology"]["leaf_switches"], 2);
  EXPECT_EQ(j["topology"]["switches_tested"], 2);
  ASSERT_EQ(j["switches"].size(), 1u) << json.out;
  EXPECT_EQ(j["switches"][0]["switch"], "leaf1");
  EXPECT_EQ(j["switches"][0]["nodes"], nlohmann::json({"g1", "g2"}));
  ASSERT_EQ(j["switches"][0]["suspect_nodes"].size(), 2u);
  EXPECT_EQ(j["switches"][0]["suspect_nodes"][0]["drain"]["recommended"], false);
  EXPECT_EQ(j["switches"][0]["suspect_nodes"][0]["drain"]["withheld_for"], "leaf1");
  EXPECT_EQ(j["suspects"], nlohmann::json::array()) << "the switch, not each of its nodes";

  const CliRun table = run_cli(common + " --topology " + dir.path() + "/topology.txt");
  EXPECT_EQ(table.status, 0);
  EXPECT_EQ(table.out.rfind("switch leaf1: leaf switch of g[1-2]: 2 of its 2 nodes are suspects "
                            "(g[1-2])",
                            0),
            0u)
      << table.out;
  EXPECT_NE(table.out.find("switches: 2 leaf switches from "), std::string::npos) << table.out;

  // Without a topology, or with one that does not read, the two nodes are named as before.
  for (const std::string& topology : {std::string("none"), dir.path() + "/garbage.txt"}) {
    const CliRun plain =
        run_cli(std::string(common).append(" --format json --topology ").append(topology));
    ASSERT_EQ(plain.status, 0) << plain.out;
    const auto p = nlohmann::json::parse(plain.out, nullptr, false);
    ASSERT_TRUE(p.is_object()) << plain.out;
    EXPECT_EQ(p["switches"], nlohmann::json::array());
    EXPECT_EQ(p["suspects"].size(), 2u) << plain.out;
    EXPECT_EQ(p["topology"].contains("warning"), topology != "none") << plain.out;
  }
  const CliRun garbage = run_cli(common + " --topology " + dir.path() + "/garbage.txt");
  EXPECT_NE(garbage.out.find("switch topology not used: " + dir.path() +
                             "/garbage.txt:1: Level: 'zero' is not a number"),
            std::string::npos)
      << garbage.out;
  EXPECT_EQ(run_cli(common + " --topology " + dir.path() + "/missing.txt").status, 2);
}

TEST(NodesCommand, BadArgumentsAreUsageErrors) {
  EXPECT_EQ(run_cli("--suspects").status, 2) << "suspects need the list of nodes";
  EXPECT_EQ(run_cli("--format yaml").status, 2);
  EXPECT_EQ(run_cli("--bogus").status, 2);
  EXPECT_EQ(run_cli("--topology none").status, 2) << "the switches are for --suspects";
  EXPECT_EQ(run_cli("--nodes 'node[1-'").status, 2);
  const CliRun help = run_cli("--help");
  EXPECT_EQ(help.status, 0);
  EXPECT_NE(help.out.find("--nodes HOSTLIST"), std::string::npos);
}

}  // namespace
}  // namespace triage::agent
