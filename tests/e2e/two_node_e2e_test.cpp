// Two nodes on one host: two slurmd (<host>1 at 127.0.0.1, <host>2 at 127.0.0.2), each with its
// own slurm-triage-agent (the plugin finds its node's agent through socket=.../%n/...). A job on
// both nodes leaves one report that holds both nodes' evidence; with one agent down, the report
// names that node as unreachable.
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <thread>

#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

using nlohmann::json;

ClusterEnvironment* g_env = nullptr;

constexpr int kStallMinSeconds = 20;
constexpr const char* kXid79 =
    "NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python, GPU has fallen off the bus.";

const json* node_entry(const json& report, const std::string& host) {
  for (const auto& n : report["nodes"]) {
    if (n.value("host", "") == host) return &n;
  }
  return nullptr;
}

TEST(TwoNodes, BothAgentsEvidenceEndsUpInOneReport) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_EQ(c.nodes().size(), 2u);
  const LayoutJob j = submit_rank1_killed_on_second_node(c, "merge");
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id, c.nodes()[0]);  // the batch host's agent leads
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  ASSERT_EQ(r["nodes"].size(), 2u) << r["nodes"].dump(1);
  const json* first = node_entry(r, c.nodes()[0]);
  const json* second = node_entry(r, c.nodes()[1]);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ((*first)["ranks"], json::array({0}));
  EXPECT_EQ((*second)["reachable"], true) << second->dump() << "\n" << c.logs();
  EXPECT_EQ((*second)["from_agent"], true) << "rank 1's exit came from the second node's agent";
  EXPECT_EQ((*second)["ranks"], json::array({1}));
  EXPECT_NE((*second)["exit"].get<std::string>().find("SIGKILL"), std::string::npos)
      << second->dump();
}

// Issue 27, part 1: the second node's InfiniBand port flaps (down 3 s, then back) while a two-node
// job runs; then both ranks fail with NCCL's network error. The second node's agent read the port
// in its fake sysfs tree (scripts/dev-cluster's `ib` verb moves it), so the report blames the
// platform on trusted evidence and names the node and the port. Before the flaps and the Xid 79
// of the next tests, which make the second node drain-recommended (and that decides blame first).
void write_active_port(const std::string& ib_dir) {
  const std::filesystem::path p = std::filesystem::path(ib_dir) / "mlx5_0/ports/1";
  std::filesystem::create_directories(p / "counters");
  std::ofstream(p / "state") << "4: ACTIVE\n";
  std::ofstream(p / "phys_state") << "5: LinkUp\n";
  std::ofstream(p / "rate") << "400 Gb/sec (4X NDR)\n";
  std::ofstream(p / "counters/link_downed") << "0\n";
}

void ib(const SlurmCluster& c, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {
      "env", "TRIAGE_DEV_STATE=" + c.state_dir(),
      (std::filesystem::path(slurm_cluster_script()).parent_path() / "dev-cluster").string(), "ib"};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = c.as_root(argv);
  ASSERT_TRUE(r.ok()) << r.output;
}

TEST(TwoNodes, APortThatFlapsDuringAnNcclFailureIsThePlatformsNamingNodeAndPort) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  for (const std::string& n : c.nodes())
    write_active_port(c.state_dir() + "/ib/" + n);
  const LayoutJob j = submit_layout_job(
      c, "ib-flap", "ib-flap",
      std::string(kStepLines) +
          "\nsrun bash -c 'for i in $(seq 1 120); do [ -e go ] && break; sleep 0.5; done; "
          "echo \"$SLURM_PROCID: $(hostname):4242:4300 [0] NCCL WARN Net : Call to recv from "
          "127.0.0.2<4242> failed : Broken pipe\"; exit 1'",
      {"-N", "2", "--ntasks-per-node", "1"});
  c.wait_running(j.id);
  const std::string& second = c.nodes()[1];
  ib(c, {second, "mlx5_0", "1", "state", "DOWN"});
  std::this_thread::sleep_for(std::chrono::seconds(3));  // SysfsSampleInterval=1s: seen down
  ib(c, {second, "mlx5_0", "1", "state", "ACTIVE"});
  std::this_thread::sleep_for(std::chrono::seconds(2));  // and back up
  std::ofstream(j.dir + "/go") << "";
  EXPECT_EQ(c.wait_job(j.id), "FAILED") << c.logs();
  wait_for_analysis(c, j.id, c.nodes()[0]);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r.value("primary_failure", ""), "nccl-timeout") << r.dump(1);
  EXPECT_EQ(r.value("blame", ""), "platform") << r.dump(1);
  EXPECT_EQ(r.value("blame_trusted", false), true);
  const std::string basis = r.value("blame_basis", "");
  EXPECT_NE(basis.find("port mlx5_0/1"), std::string::npos) << basis;
  EXPECT_NE(basis.find(second), std::string::npos) << basis;
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("port mlx5\\_0/1"), std::string::npos) << md;  // Markdown escapes the '_'
  EXPECT_NE(md.find("Not your code"), std::string::npos) << md;
  const json* node = node_entry(r, second);
  ASSERT_NE(node, nullptr) << r["nodes"].dump(1);
  bool port_event = false;
  for (const auto& e : (*node)["kernel_events"])
    port_event = port_event || e.get<std::string>().rfind("ib-port-down", 0) == 0;
  EXPECT_TRUE(port_event) << node->dump(1);
}

// Issue 27, part 1 again, with the port flapping: down 3 s and back 3 times while the job runs.
// GPUd's flap is a down of at least 25 s; this cluster's agents read the thresholds from a site
// rules layer (RulesDir, written by main() below, as /etc/slurm/triage.d would be) that counts a
// down of 1 s, so that the test takes 15 s. The flap drain-recommends the second node, so the
// report blames the platform on that node's verdict, which names the port and says it flapped.
TEST(TwoNodes, APortThatFlapsThreeTimesDuringAnNcclFailureMakesItThePlatformsSayingSo) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(
      c, "ib-flaps", "ib-flaps",
      std::string(kStepLines) +
          "\nsrun bash -c 'for i in $(seq 1 120); do [ -e go ] && break; sleep 0.5; done; "
          "echo \"$SLURM_PROCID: $(hostname):4242:4300 [0] NCCL WARN Net : Call to recv from "
          "127.0.0.2<4242> failed : Broken pipe\"; exit 1'",
      {"-N", "2", "--ntasks-per-node", "1"});
  c.wait_running(j.id);
  const std::string& second = c.nodes()[1];
  for (int i = 0; i < 3; ++i) {
    ib(c, {second, "mlx5_0", "1", "state", "DOWN"});
    std::this_thread::sleep_for(std::chrono::seconds(3));  // >= 1 s down at 1 s sampling
    ib(c, {second, "mlx5_0", "1", "state", "ACTIVE"});
    std::this_thread::sleep_for(std::chrono::seconds(2));  // seen back up
  }
  std::ofstream(j.dir + "/go") << "";
  EXPECT_EQ(c.wait_job(j.id), "FAILED") << c.logs();
  wait_for_analysis(c, j.id, c.nodes()[0]);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  EXPECT_EQ(r.value("blame", ""), "platform") << r.dump(1);
  EXPECT_EQ(r.value("blame_trusted", false), true);
  const std::string basis = r.value("blame_basis", "");
  EXPECT_NE(basis.find("port mlx5_0/1 flapped"), std::string::npos) << basis;
  EXPECT_NE(basis.find(second), std::string::npos) << basis;
  const std::string md = slurp(j.job_dir() / "triage.md");
  EXPECT_NE(md.find("port mlx5\\_0/1 flapped"), std::string::npos) << md;
  const json* node = node_entry(r, second);
  ASSERT_NE(node, nullptr) << r["nodes"].dump(1);
  EXPECT_EQ((*node)["verdict"], "drain-recommended") << node->dump(1);
  bool flap_event = false;
  for (const auto& e : (*node)["kernel_events"])
    flap_event = flap_event || e.get<std::string>().rfind("ib-port-flap", 0) == 0;
  EXPECT_TRUE(flap_event) << node->dump(1);
}

// Issue 15's corroboration across nodes: a two-node job that asked for --triage-on-hang=cancel
// prints steps for 12 s and then sleeps; meanwhile the second node's kernel says its GPU fell off
// the bus. When the batch host flags the stall it asks the other node, whose Xid backs the
// verdict, so the cancel goes ahead at the first flag instead of waiting for twice the threshold.
TEST(TwoNodes, AStallBackedByTheOtherNodesKernelIsCancelledAtTheFirstFlag) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const LayoutJob j = submit_layout_job(
      c, "live-peer", "stalls", steps_then(12, "srun bash -c 'sleep 600'"),
      {"-N", "2", "--ntasks-per-node", "1", "-t", "30", "--triage-on-hang=cancel"});
  c.wait_running(j.id);
  std::this_thread::sleep_for(std::chrono::seconds(5));
  c.kernel_line(c.nodes()[1], kXid79);
  EXPECT_EQ(c.wait_job(j.id, std::chrono::seconds(12 + kStallMinSeconds + 90)), "CANCELLED")
      << c.logs();
  wait_for_analysis(c, j.id, c.nodes()[0]);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  const json& live = r["live_record"];
  EXPECT_EQ(live["action"], "cancel") << live.dump(1);
  const std::string reason = live.value("action_reason", "");
  EXPECT_NE(reason.find("corroborated by"), std::string::npos) << reason;
  bool from_peer = false;
  for (const auto& line : live["corroboration"])
    from_peer = from_peer || line.get<std::string>().rfind(c.nodes()[1] + ": kernel", 0) == 0;
  EXPECT_TRUE(from_peer) << live.dump(1);
}

// Last: it stops the second node's agent for the rest of the run.
TEST(TwoNodes, ANodeWhoseAgentIsDownIsNamedUnreachable) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  c.stop_daemon("agent-" + c.nodes()[1]);
  const LayoutJob j = submit_rank1_killed_on_second_node(c, "unreachable");
  EXPECT_EQ(c.wait_job(j.id), "FAILED");
  wait_for_analysis(c, j.id, c.nodes()[0]);
  const json r = json::parse(slurp(j.job_dir() / "triage.json"));
  const json* second = node_entry(r, c.nodes()[1]);
  ASSERT_NE(second, nullptr) << r["nodes"].dump(1);
  // An intermittent failure here once found the stopped node reachable: what answered is in the
  // leader's log.
  ASSERT_EQ((*second)["reachable"], false) << second->dump() << "\n" << c.logs();
  EXPECT_FALSE((*second).value("unreachable_reason", "").empty()) << second->dump();
  EXPECT_NE(slurp(j.job_dir() / "triage.md").find(c.nodes()[1]), std::string::npos);
}

}  // namespace
}  // namespace triage::testing

namespace triage::testing {
namespace {

// The site's rules layer for the flap test: the shipped [ib-port-thresholds default] with a flap
// counted from a 1 s down (the section replaces the shipped one whole: what it leaves out keeps the
// built-in default, and it names no counters).
std::string write_site_rules() {
  char dir[] = "/tmp/two-node-rules.XXXXXX";
  if (mkdtemp(dir) == nullptr) throw std::runtime_error("mkdtemp failed");
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  std::ofstream(std::string(dir) + "/ib-ports.rules")
      << "[ib-port-thresholds default]\nflap-down-min-s = 1\nflap-count = 3\n"
         "flap-window-s = 43200\nflap-action = drain\n";
  return dir;
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options = triage::testing::this_build_cluster();
  options.nodes = 2;
  options.plugin_more = "hang_action=allow";
  options.agent_settings = {
      "EvidenceSettleDelay=1s",
      "PeerFetchTimeout=3s",
      "KernelSource=file",
      "KernelPath=@STATE@/kernel-@NODE@.log",
      "InfinibandDir=@STATE@/ib/@NODE@",
      "SysfsSampleInterval=1s",
      "HangStallMin=" + std::to_string(triage::testing::kStallMinSeconds) + "s"};
  std::string rules_dir;
  const int rc = triage::testing::run_with_cluster(
      argc, argv, "two_node_e2e_tests", options, &triage::testing::g_env,
      [&](triage::testing::ClusterOptions& o) {
        rules_dir = triage::testing::write_site_rules();
        o.agent_settings.push_back("RulesDir=" + rules_dir);
      });
  if (!rules_dir.empty()) std::filesystem::remove_all(rules_dir);
  return rc;
}
