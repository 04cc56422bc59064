// `slurm-triage nodes`: node verdicts and drain recommendations, from the local agent (socket
// `health`) or from a list of nodes (HTTP /v1/health with a munge credential); with --suspects,
// the nodes whose jobs fail improbably often, from the list's outcome histories (/v1/history),
// and, where Slurm knows the switch topology, the leaf switches those failures cluster under.
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/base/config.h"
#include "agent/history/history_gather.h"
#include "agent/history/suspect_nodes.h"
#include "agent/history/suspect_switches.h"
#include "agent/history/switch_topology.h"
#include "agent/net/peer_client.h"
#include "common/build_config.h"
#include "common/child_process.h"
#include "common/cli_args.h"
#include "common/cli_registry.h"
#include "common/error.h"
#include "common/hostlist.h"
#include "common/text.h"

namespace triage::agent {

namespace {

void usage(FILE* out) {
  (void)std::fprintf(
      out,
      "usage: slurm-triage nodes [--nodes HOSTLIST] [--suspects] [--format table|json] [options]\n"
      "\n"
      "Node health verdicts and drain recommendations from slurm-triage agents, and whose\n"
      "drain each node carries in Slurm (DRAIN: ours, admin, none; ? when not known).\n"
      "Without --nodes, asks the local agent over its socket.\n"
      "\n"
      "  --nodes HOSTLIST     ask these nodes' agents over HTTP (node[01-04],gpu7;\n"
      "                       host:port picks a port per node)\n"
      "  --suspects           rank the nodes whose multi-node jobs fail on trusted platform "
      "evidence\n"
      "                       improbably often, from the agents' job histories (needs --nodes);\n"
      "                       where Slurm knows the topology (topology/tree), failures that\n"
      "                       cluster under one leaf switch name the switch\n"
      "  --topology FILE|none with --suspects: the switches from FILE (what `scontrol show\n"
      "                       topology` printed), or none; default: ask scontrol\n"
      "  --port N             their HTTP port (default: HttpPort from the config, 6829)\n"
      "  --munge-socket PATH  munged's socket (default: MungeSocket from the config)\n"
      "  --socket PATH        the local agent's socket (default: SocketPath)\n"
      "  --config PATH        triage.conf to take defaults from (default %s/triage.conf)\n"
      "  --timeout SECONDS    how long to wait for the agents (default 10)\n"
      "  --format table|json  output format (default table)\n"
      "\n"
      "Exit status: 0 when every agent answered, 1 when some did not, 2 on usage errors.\n",
      kSysconfDir);
}

struct NodeAnswer {
  std::string host;
  bool reachable = false;
  std::string error;
  nlohmann::json health;
};

NodeAnswer ask_socket(const std::string& path, int timeout_ms) {
  NodeAnswer a;
  a.host = "local";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (fd < 0 || path.size() >= sizeof addr.sun_path) {
    a.error = "bad socket path " + path;
    if (fd >= 0) ::close(fd);
    return a;
  }
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    a.error = "cannot reach the agent at " + path + ": " + std::strerror(errno);
    ::close(fd);
    return a;
  }
  const std::string req = "{\"op\":\"health\"}\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    a.error = std::string("send: ") + std::strerror(errno);
    ::close(fd);
    return a;
  }
  std::string line;
  char buf[65536];
  while (line.find('\n') == std::string::npos && line.size() < (64u << 20)) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) {
      a.error = "the agent did not answer in time";
      break;
    }
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    line.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  if (!a.error.empty()) return a;
  nlohmann::json j = nlohmann::json::parse(line.substr(0, line.find('\n')), nullptr, false);
  if (!j.is_object() || !j.value("ok", false)) {
    a.error =
        j.is_object() ? j.value("error", "the agent refused") : "the agent's answer is not JSON";
    return a;
  }
  a.reachable = true;
  a.host = j.value("host", "local");
  a.health = std::move(j);
  return a;
}

std::vector<NodeAnswer> ask_peers(const std::vector<std::string>& nodes, int port,
                                  const std::string& munge_socket, int timeout_ms) {
  std::vector<PeerRequest> requests;
  requests.reserve(nodes.size());
  for (const std::string& n : nodes)
    requests.push_back({n, peer_base_url(n, port), "/v1/health"});
  PeerFetchOptions opt;
  opt.munge_socket = munge_socket;
  opt.timeout_ms = timeout_ms;
  std::vector<NodeAnswer> out;
  for (const PeerResponse& r : fetch_from_peers(requests, opt)) {
    NodeAnswer a;
    a.host = r.host;
    if (!r.ok) {
      a.error = r.error;
    } else {
      a.health = nlohmann::json::parse(r.body, nullptr, false);
      if (a.health.is_object()) {
        a.reachable = true;
      } else {
        a.error = "the agent's answer is not JSON";
      }
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::string cell(const std::string& s, size_t width) {
  std::string p = printable(s);
  if (p.size() > width) return std::string(truncate_utf8(p, width - 3)) + "...";
  return p + std::string(width - p.size(), ' ');
}

// Whose drain the node carries in Slurm (ours, admin, none), as its agent last saw it.
std::string drain_owner_cell(const nlohmann::json& drain) {
  const nlohmann::json owner = drain.value("owner", nlohmann::json("unknown"));
  if (!owner.is_string() || owner == "unknown") return "?";
  return owner.get<std::string>();
}

void print_table(const std::vector<NodeAnswer>& answers) {
  std::printf("%s %s %s %s %s %s\n", cell("HOST", 16).c_str(), cell("VERDICT", 18).c_str(),
              cell("DRAIN", 6).c_str(), cell("ACTION", 23).c_str(), cell("D-STATE", 8).c_str(),
              "REASON");
  for (const NodeAnswer& a : answers) {
    if (!a.reachable) {
      std::printf("%s %s %s %s %s %s\n", cell(a.host, 16).c_str(), cell("unreachable", 18).c_str(),
                  cell("-", 6).c_str(), cell("-", 23).c_str(), cell("-", 8).c_str(),
                  printable(a.error).c_str());
      continue;
    }
    const nlohmann::json& v = a.health.value("verdict", nlohmann::json::object());
    const nlohmann::json reasons = v.value("reasons", nlohmann::json::array());
    const std::string verdict = v.value("verdict", "?");
    std::string action = "-";
    std::string reason;
    if (!reasons.empty() && reasons[0].is_object()) {
      action = reasons[0].value("action", "-");
      reason = reasons[0].value("reason", "");
      if (reasons.size() > 1) reason += " (+" + std::to_string(reasons.size() - 1) + " more)";
    }
    const nlohmann::json drain = a.health.value("drain", nlohmann::json::object());
    if (drain.value("policy", "") == "auto" && drain.value("state", "none") != "none") {
      reason += " [auto-drain: " + drain.value("state", "") + "]";
    }
    if (drain.value("owner", "") == "admin") {
      reason += " [drained by an admin: " + drain.value("slurm_reason", "") + "]";
    }
    std::string dstate = "-";
    if (a.health.contains("dstate") && a.health["dstate"].is_object()) {
      dstate = std::to_string(a.health["dstate"].value("count", uint64_t{0}));
    }
    std::printf("%s %s %s %s %s %s\n", cell(a.health.value("host", a.host), 16).c_str(),
                cell(verdict, 18).c_str(), cell(drain_owner_cell(drain), 6).c_str(),
                cell(action, 23).c_str(), cell(dstate, 8).c_str(), printable(reason).c_str());
  }
}

nlohmann::json suspect_json(const SuspectNode& s, const std::string& drain_policy) {
  nlohmann::json reasons = s.reasons;
  const auto drain = suspect_drain_recommendation(s, drain_policy);
  if (drain) reasons.push_back(*drain);
  return {{"node", s.node},
          {"failures", s.failures},
          {"jobs", s.jobs},
          {"expected", s.expected},
          {"cluster_rate", s.cluster_rate},
          {"p_value", s.p_value},
          {"failed_jobs", s.failed_jobs},
          {"drain", {{"recommended", drain.has_value()}, {"policy", drain_policy}}},
          {"reasons", std::move(reasons)}};
}

// Where the switch topology came from, and the topology itself (empty: none, or not usable).
struct TopologySource {
  std::string source;  // "scontrol show topology", the file's path, or "none"
  SwitchTopology topology;
  std::string warning;  // why a topology that was there is not used
};

// The switch topology: from `file` (a saved `scontrol show topology`; "none": no topology), or
// from scontrol. Slurm without a topology, or a scontrol that is missing or fails (no controller
// to ask), is no topology, silently: the ranking is then the nodes' alone, as it always was.
TopologySource read_topology(const std::string& file, int timeout_ms) {
  TopologySource t;
  if (file == "none") {
    t.source = "none";
    return t;
  }
  std::string text;
  if (!file.empty()) {
    t.source = file;
    std::ifstream in(file);
    if (!in) throw UsageError("--topology: cannot read " + printable(file));
    std::ostringstream buf;
    buf << in.rdbuf();
    text = buf.str();
  } else {
    t.source = "scontrol show topology";
    std::optional<std::string> printed = query_topology_text(timeout_ms);
    if (!printed) return t;
    text = std::move(*printed);
  }
  try {
    t.topology = parse_topology(text, t.source);
  } catch (const InputError& e) {
    t.warning = std::string("switch topology not used: ") + e.what();
  }
  return t;
}

nlohmann::json switch_json(const SuspectSwitch& s, const std::string& drain_policy) {
  nlohmann::json nodes = nlohmann::json::array();
  for (const SuspectNode& n : s.suspect_nodes) {
    // The switch is the suspect: no drain is recommended for its nodes (a policy that allows none
    // gives none).
    nlohmann::json j = suspect_json(n, "");
    j["drain"] = {{"recommended", false}, {"policy", drain_policy}, {"withheld_for", s.name}};
    nodes.push_back(std::move(j));
  }
  nlohmann::json out = {{"switch", s.name},
                        {"nodes", s.nodes},
                        {"p_value", s.p_value},
                        {"suspect_nodes", std::move(nodes)},
                        {"reasons", s.reasons}};
  if (s.pooled) {
    out["pooled"] = {{"failures", s.pooled->failures},
                     {"jobs", s.pooled->jobs},
                     {"expected", s.pooled->expected},
                     {"cluster_rate", s.pooled->cluster_rate},
                     {"p_value", s.pooled->p_value},
                     {"failed_jobs", s.pooled->failed_jobs},
                     {"failing_nodes", s.pooled->failing_nodes}};
  }
  return out;
}

nlohmann::json suspects_report(const GatheredHistory& g, const SuspectRanking& r,
                               const SwitchRanking& sw, const TopologySource& topo,
                               const std::string& drain_policy) {
  nlohmann::json unreachable = nlohmann::json::array();
  for (const UnreachableAgent& u : g.unreachable)
    unreachable.push_back({{"host", u.host}, {"error", u.error}});
  nlohmann::json suspects = nlohmann::json::array();
  for (const SuspectNode& s : sw.nodes)
    suspects.push_back(suspect_json(s, drain_policy));
  nlohmann::json switches = nlohmann::json::array();
  for (const SuspectSwitch& s : sw.switches)
    switches.push_back(switch_json(s, drain_policy));
  nlohmann::json topology = {{"source", topo.source},
                             {"leaf_switches", topo.topology.leaves.size()},
                             {"switches_tested", sw.switches_tested},
                             {"test", sw.test}};
  if (!topo.warning.empty()) topology["warning"] = topo.warning;
  return {
      {"suspects", std::move(suspects)},
      {"switches", std::move(switches)},
      {"topology", std::move(topology)},
      {"jobs", r.jobs},
      {"multi_node_jobs", r.multi_node_jobs},
      {"nodes", r.nodes_tested},
      {"records",
       {{"received", g.records}, {"skipped", g.skipped}, {"skipped_reasons", g.skipped_reasons}}},
      {"agents", {{"reached", g.reached.size()}, {"unreachable", std::move(unreachable)}}},
      {"test", r.test}};
}

void print_suspects(const nlohmann::json& report) {
  for (const nlohmann::json& s : report["switches"]) {
    const auto& reasons = s["reasons"];
    std::printf("switch %s: %s\n", printable(s["switch"].get<std::string>()).c_str(),
                printable(reasons.empty() ? "" : reasons[0].get<std::string>()).c_str());
    for (size_t i = 1; i < reasons.size(); ++i)
      std::printf("  %s\n", printable(reasons[i].get<std::string>()).c_str());
  }
  for (const nlohmann::json& s : report["suspects"]) {
    const auto& reasons = s["reasons"];
    std::printf("%s: %s\n", printable(s["node"].get<std::string>()).c_str(),
                printable(reasons.empty() ? "" : reasons[0].get<std::string>()).c_str());
    for (size_t i = 1; i < reasons.size(); ++i)
      std::printf("  %s\n", printable(reasons[i].get<std::string>()).c_str());
  }
  if (report["suspects"].empty() && report["switches"].empty()) {
    std::printf("no suspect nodes among %s nodes tested\n", report["nodes"].dump().c_str());
  }
  const auto& agents = report["agents"];
  std::printf("%s jobs (%s multi-node) from %s agents", report["jobs"].dump().c_str(),
              report["multi_node_jobs"].dump().c_str(), agents["reached"].dump().c_str());
  if (!agents["unreachable"].empty())
    std::printf(", %zu unreachable", agents["unreachable"].size());
  std::printf("; %s records skipped\n", report["records"]["skipped"].dump().c_str());
  for (const nlohmann::json& u : agents["unreachable"]) {
    std::printf("  unreachable %s: %s\n", printable(u["host"].get<std::string>()).c_str(),
                printable(u["error"].get<std::string>()).c_str());
  }
  for (const nlohmann::json& why : report["records"]["skipped_reasons"])
    std::printf("  skipped %s\n", printable(why.get<std::string>()).c_str());
  std::printf("test: %s\n", report["test"].get<std::string>().c_str());
  const auto& topology = report["topology"];
  if (topology.contains("warning")) {
    std::printf("%s\n", printable(topology["warning"].get<std::string>()).c_str());
  } else if (topology["leaf_switches"] != 0) {
    std::printf(
        "switches: %s leaf switches from %s; a leaf is named when 2 of its nodes are "
        "suspects, or by the same test over the switches: %s\n",
        topology["leaf_switches"].dump().c_str(),
        printable(topology["source"].get<std::string>()).c_str(),
        topology["test"].get<std::string>().c_str());
  }
}

int run_suspects(const std::vector<std::string>& nodes, int port, const PeerFetchOptions& fetch,
                 const std::string& drain_policy, const std::string& format,
                 const std::string& topology_file) {
  const TopologySource topo = read_topology(topology_file, static_cast<int>(fetch.timeout_ms));
  const GatheredHistory g = gather_history(nodes, port, fetch);
  const SuspectPolicy policy;
  const SuspectRanking ranking = rank_suspects(g.jobs, policy);
  const SwitchRanking switches =
      rank_switches(g.jobs, ranking, topo.topology, policy, SwitchPolicy{});
  const nlohmann::json report = suspects_report(g, ranking, switches, topo, drain_policy);
  if (format == "json") {
    std::printf("%s\n",
                report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_suspects(report);
  }
  return g.unreachable.empty() ? 0 : 1;
}

int run_nodes(int argc, char** argv) {
  std::string config_path = std::string(kSysconfDir) + "/triage.conf";
  bool config_given = false;
  std::string nodes_expr, socket_path, munge_socket, format = "table";
  std::optional<int> port;
  int timeout_s = 10;
  bool suspects = false;
  std::string topology_file;
  ArgCursor args(argc, argv);
  while (args.next()) {
    const std::string& a = args.arg();
    if (args.is_help()) {
      usage(stdout);
      return 0;
    } else if (a == "--nodes" || a == "-w") {
      nodes_expr = args.value();
    } else if (a == "--port") {
      port = static_cast<int>(args.whole(1, 65535));
    } else if (a == "--suspects") {
      suspects = true;
    } else if (a == "--topology") {
      topology_file = args.value();
    } else if (a == "--munge-socket") {
      munge_socket = args.value();
    } else if (a == "--socket") {
      socket_path = args.value();
    } else if (a == "--config") {
      config_path = args.value();
      config_given = true;
    } else if (a == "--timeout") {
      timeout_s = static_cast<int>(args.whole(1, 3600));
    } else if (a == "--format") {
      format = args.value();
      if (format != "table" && format != "json") throw UsageError("--format must be table or json");
    } else {
      throw UsageError("unknown argument '" + printable(a) + "'");
    }
  }
  if (suspects && nodes_expr.empty()) {
    throw UsageError(
        "--suspects needs --nodes HOSTLIST: the ranking compares every node's history");
  }
  if (!topology_file.empty() && !suspects) {
    throw UsageError("--topology goes with --suspects: only the ranking uses the switches");
  }
  const bool use_file = config_given || ::access(config_path.c_str(), R_OK) == 0;
  ConfigLoad load = load_agent_config(use_file ? config_path : "");
  if (!load.errors.empty()) {
    for (const auto& e : load.errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (socket_path.empty()) socket_path = load.config.socket_path;
  if (munge_socket.empty()) munge_socket = load.config.munge_socket;
  const int http_port = port.value_or(load.config.http_port);

  if (suspects) {
    PeerFetchOptions fetch;
    fetch.munge_socket = munge_socket;
    fetch.timeout_ms = int64_t{timeout_s} * 1000;
    return run_suspects(expand_hostlist(nodes_expr, "--nodes"), http_port, fetch,
                        load.config.drain_policy, format, topology_file);
  }
  std::vector<NodeAnswer> answers;
  if (nodes_expr.empty()) {
    answers.push_back(ask_socket(socket_path, timeout_s * 1000));
  } else {
    answers = ask_peers(expand_hostlist(nodes_expr, "--nodes"), http_port, munge_socket,
                        timeout_s * 1000);
  }
  bool all = true;
  for (const auto& a : answers)
    all = all && a.reachable;
  if (format == "json") {
    nlohmann::json out = {{"nodes", nlohmann::json::array()}};
    for (const NodeAnswer& a : answers) {
      nlohmann::json n = {{"host", a.reachable ? a.health.value("host", a.host) : a.host},
                          {"reachable", a.reachable}};
      if (!a.reachable) n["error"] = a.error;
      for (const char* k : {"verdict", "drain", "dstate", "stuck_sysfs_reads", "recent_analyses"}) {
        if (a.reachable && a.health.contains(k)) n[k] = a.health[k];
      }
      out["nodes"].push_back(std::move(n));
    }
    std::printf("%s\n", out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    print_table(answers);
  }
  return all ? 0 : 1;
}

int nodes_main(int argc, char** argv) {
  try {
    return run_nodes(argc, argv);
  } catch (const InputError& e) {
    // A malformed --nodes hostlist: the argument is wrong, so it is reported as one.
    throw UsageError(e.what());
  }
}

}  // namespace

}  // namespace triage::agent

TRIAGE_CLI_COMMAND(nodes, "node health verdicts and drain recommendations from the agents",
                   triage::agent::nodes_main);
