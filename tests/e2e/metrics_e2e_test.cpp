// The Grafana dashboard against real parts: two slurmd with an agent each (scripts/slurm-cluster),
// Debian's prometheus on loopback scraping both agents' /metrics, a kernel Xid on the second
// node and a few failed jobs; then every query of every panel of
// packaging/grafana/slurm-triage.json (and its node variable) must return data from Prometheus'
// HTTP API.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "analyzer/tsdb/local_prometheus.h"
#include "analyzer/tsdb/prom_client.h"
#include "analyzer/tsdb/server_guardian.h"
#include "common/child_process.h"
#include "tests/e2e/cluster_environment.h"
#include "tests/e2e/layout_job.h"

namespace triage::testing {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

ClusterEnvironment* g_env = nullptr;

// A query of a panel, and where it is.
struct PanelQuery {
  std::string panel;
  std::string expr;
};

void collect_queries(const json& panels, std::vector<PanelQuery>& out) {
  for (const json& p : panels) {
    if (p.contains("panels")) collect_queries(p["panels"], out);  // inside a collapsed row
    if (!p.contains("targets")) continue;
    for (const json& t : p["targets"])
      out.push_back({p.value("title", "?"), t.value("expr", "")});
  }
}

// Grafana's variables as a dashboard at its defaults would set them: every node, a short interval.
std::string with_variables(std::string expr) {
  expr = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "1m");
  expr = std::regex_replace(expr, std::regex(R"(\$__range)"), "10m");
  return std::regex_replace(expr, std::regex(R"(\$host)"), ".*");
}

std::string agent_http_port(const SlurmCluster& c, const std::string& node) {
  std::ifstream conf(fs::path(c.state_dir()) / "etc" / ("triage-" + node + ".conf"));
  std::string line;
  while (std::getline(conf, line)) {
    if (line.rfind("HttpPort=", 0) == 0) return line.substr(9);
  }
  return "";
}

// Debian's prometheus on a free loopback port, scraping the agents every second with the shipped
// recording rules loaded; its guardian
// stops it (by pid) and removes its scratch directory when this goes away, or when the test dies.
class ScrapingPrometheus {
 public:
  explicit ScrapingPrometheus(const std::vector<std::string>& targets) {
    char tmpl[] = "/tmp/triage-metrics-e2e-XXXXXX";
    if (::mkdtemp(tmpl) == nullptr) throw std::runtime_error("mkdtemp failed");
    scratch_ = tmpl;
    std::string list;
    for (const std::string& t : targets)
      list += (list.empty() ? "'" : ", '") + t + "'";
    std::ofstream(scratch_ + "/prometheus.yml")
        << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        << "rule_files: ['" << SOURCE_DIR << "/packaging/prometheus/slurm-triage.rules.yml']\n"
        << "scrape_configs:\n  - job_name: slurm-triage\n    static_configs:\n"
        << "      - targets: [" << list << "]\n";
    tsdb::ServerGuardian::Spec spec;
    spec.scratch_dir = scratch_;
    spec.binary = find_executable("prometheus");
    spec.log_path = scratch_ + "/prometheus.log";
    spec.args = {"--config.file=" + scratch_ + "/prometheus.yml",
                 "--storage.tsdb.path=" + scratch_ + "/data",
                 "--web.listen-address=127.0.0.1:{port}"};
    guardian_ = std::make_unique<tsdb::ServerGuardian>(spec);
    port_ = tsdb::pick_free_loopback_port(std::nullopt);
    (void)guardian_->start_server(port_);
    client_ = std::make_unique<tsdb::PromClient>(url());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!client_->ready(std::chrono::milliseconds(500))) {
      if (std::chrono::steady_clock::now() > deadline || guardian_->server_exit())
        throw std::runtime_error("prometheus did not become ready: " + log());
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  ~ScrapingPrometheus() {
    client_.reset();
    guardian_->stop();
  }
  ScrapingPrometheus(const ScrapingPrometheus&) = delete;
  ScrapingPrometheus& operator=(const ScrapingPrometheus&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  tsdb::PromClient& client() { return *client_; }
  std::string log() const { return slurp(scratch_ + "/prometheus.log"); }

  std::vector<tsdb::Sample> query(const std::string& expr) {
    return client_->query(expr, static_cast<double>(std::time(nullptr))).samples;
  }

 private:
  std::string scratch_;
  uint16_t port_ = 0;
  std::unique_ptr<tsdb::ServerGuardian> guardian_;
  std::unique_ptr<tsdb::PromClient> client_;
};

// A user's own bug on one node.
LayoutJob user_failure(const SlurmCluster& c, const std::string& case_name) {
  return submit_layout_job(c, case_name, "bug",
                           std::string(kStepLines) +
                               "\necho 'Traceback (most recent call last):'\n"
                               "echo '  File \"train.py\", line 12, in <module>'\n"
                               "echo \"ZeroDivisionError: division by zero\"\nexit 1",
                           {"-w", c.node()});
}

TEST(Metrics, EveryDashboardPanelHasDataAfterAFewFailedJobs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_EQ(c.nodes().size(), 2u);
  std::vector<std::string> targets;
  for (size_t i = 0; i < c.nodes().size(); ++i) {
    const std::string port = agent_http_port(c, c.nodes()[i]);
    ASSERT_FALSE(port.empty()) << "no HttpPort in the agent config of " << c.nodes()[i];
    targets.push_back("127.0.0." + std::to_string(i + 1) + ":" + port);
  }
  ScrapingPrometheus prom(targets);
  // Both agents scraped before anything happens, so that the counters' steps are increases.
  ASSERT_TRUE([&] {
    for (int i = 0; i < 200; ++i) {
      const auto up = prom.query("sum(up{job=\"slurm-triage\"})");
      if (!up.empty() && up[0].point.v == 2) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }()) << prom.log();

  {
    std::ofstream k(fs::path(c.state_dir()) / ("kernel-" + c.nodes()[1] + ".log"), std::ios::app);
    k << "[ 8001.000001] NVRM: Xid (PCI:0000:c1:00): 79, pid=4242, name=python3, GPU has fallen "
         "off the bus.\n";
  }
  std::vector<LayoutJob> jobs = {submit_rank1_killed_on_second_node(c, "m1"), user_failure(c, "m2"),
                                 submit_rank1_killed_on_second_node(c, "m3"),
                                 user_failure(c, "m4")};
  for (const LayoutJob& j : jobs) {
    EXPECT_EQ(c.wait_job(j.id), "FAILED");
    wait_for_analysis(c, j.id, c.nodes()[0]);
  }
  std::this_thread::sleep_for(std::chrono::seconds(4));  // a few scrapes after the last analysis

  const json dashboard =
      json::parse(slurp(fs::path(SOURCE_DIR) / "packaging/grafana/slurm-triage.json"));
  std::vector<PanelQuery> queries;
  collect_queries(dashboard["panels"], queries);
  ASSERT_GE(queries.size(), 12u);
  for (const PanelQuery& q : queries) {
    SCOPED_TRACE(q.panel + ": " + q.expr);
    ASSERT_FALSE(q.expr.empty());
    std::vector<tsdb::Sample> got;
    EXPECT_NO_THROW(got = prom.query(with_variables(q.expr)));
    EXPECT_FALSE(got.empty()) << "no data for panel '" << q.panel << "'";
  }
  for (const json& v : dashboard["templating"]["list"]) {
    if (v.value("type", "") != "query") continue;
    const std::string def = v.value("definition", "");
    const std::smatch m = [&] {
      std::smatch s;
      std::regex_match(def, s, std::regex(R"(label_values\((\w+), *(\w+)\))"));
      return s;
    }();
    ASSERT_EQ(m.size(), 3u) << def;
    EXPECT_EQ(prom.client().label_values(m[2].str(), {m[1].str()}).size(), 2u)
        << "variable " << v.value("name", "") << ": both nodes";
  }
  // The figures behind the panels, not only their presence.
  const auto outcomes = prom.query("sum(triage_job_outcomes_total)");
  ASSERT_FALSE(outcomes.empty());
  EXPECT_EQ(outcomes[0].point.v, 4.0) << "each job counted once, by the node that led it";
  const auto scores = prom.query("host:triage_suspect_score:ratio");
  EXPECT_EQ(scores.size(), 2u) << "the shipped recording rule scores every node";
  const auto xid = prom.query("max by (host, action) (triage_drain_recommendation{host=\"" +
                              c.nodes()[1] + "\"})");
  EXPECT_EQ(xid.size(), 1u) << "the Xid 79 node is drain-recommended";
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  return triage::testing::run_with_cluster(argc, argv, "metrics_e2e_tests",
                                           triage::testing::this_build_two_nodes(),
                                           &triage::testing::g_env);
}
