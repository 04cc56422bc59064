#include "agent/history/switch_topology.h"

#include <unistd.h>

#include <chrono>
#include <cstring>
#include <optional>
#include <set>

#include "common/child_process.h"
#include "common/error.h"
#include "common/hostlist.h"
#include "common/text.h"

namespace triage::agent {

namespace {

struct SwitchLine {
  std::string name;
  uint64_t level = 0;
  std::vector<std::string> nodes;
};

// One SwitchName= line; nullopt for any other line. Fields are space-separated Key=Value pairs:
// Slurm prints names and hostlists without spaces.
std::optional<SwitchLine> read_switch_line(std::string_view line, const std::string& origin,
                                           int line_no) {
  std::optional<std::string> name;
  std::optional<std::string> level;
  std::string nodes;
  for (std::string_view field : split(trim(line), ' ')) {
    if (field.empty()) continue;
    const size_t eq = field.find('=');
    const std::string_view key = field.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? "" : field.substr(eq + 1);
    if (key == "SwitchName") {
      name = std::string(value);
    } else if (key == "Level") {
      level = std::string(value);
    } else if (key == "Nodes") {
      nodes = std::string(value);
    }
  }
  if (!name) return std::nullopt;
  if (name->empty()) throw InputError(origin, line_no, "SwitchName: empty");
  if (!level) throw InputError(origin, line_no, "Level: missing for switch " + printable(*name));
  const auto lv = parse_uint(*level);
  if (!lv) throw InputError(origin, line_no, "Level: '" + printable(*level) + "' is not a number");
  SwitchLine s{*name, *lv, {}};
  if (!nodes.empty()) {
    try {
      s.nodes = expand_hostlist(nodes);
    } catch (const InputError& e) {
      throw InputError(origin, line_no, "Nodes: " + e.message());
    }
  }
  return s;
}

}  // namespace

std::vector<std::string> topology_argv() {
  return {"scontrol", "show", "topology"};
}

SwitchTopology parse_topology(std::string_view text, const std::string& origin) {
  std::vector<SwitchLine> switches;
  std::set<std::string> names;
  int line_no = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_no;
    auto s = read_switch_line(line, origin, line_no);
    if (!s) continue;
    if (!names.insert(s->name).second) {
      throw InputError(origin, line_no, "SwitchName: " + printable(s->name) + " named twice");
    }
    switches.push_back(std::move(*s));
  }
  SwitchTopology t;
  std::map<std::string, uint64_t> level_of_leaf;  // node -> the level of its leaf so far
  for (const SwitchLine& s : switches) {
    for (const std::string& node : s.nodes) {
      auto [it, fresh] = level_of_leaf.emplace(node, s.level);
      if (!fresh && it->second <= s.level) continue;
      it->second = s.level;
      t.leaf_of[node] = s.name;
    }
  }
  for (const SwitchLine& s : switches) {
    for (const std::string& node : s.nodes) {
      if (t.leaf_of[node] == s.name) t.leaves[s.name].push_back(node);
    }
  }
  return t;
}

std::optional<std::string> query_topology_text(int timeout_ms) {
  const std::string program = find_executable("scontrol");
  if (program.empty()) return std::nullopt;
  ChildSpec spec;
  spec.argv = topology_argv();
  spec.argv.front() = program;
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "SLURM_TOPO_LEN=", 15) != 0) env.emplace_back(*e);
  }
  spec.env = std::move(env);
  ChildLimits limits;
  limits.timeout = std::chrono::milliseconds(timeout_ms);
  limits.stdout_max = size_t{16} << 20;
  try {
    ChildResult c = run_child(spec, limits);
    if (!c.exited_ok() || c.timed_out) return std::nullopt;
    return std::move(c.out);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

SwitchTopology current_topology(int timeout_ms) {
  const std::optional<std::string> text = query_topology_text(timeout_ms);
  if (!text) return {};
  try {
    return parse_topology(*text, "scontrol show topology");
  } catch (const InputError&) {
    return {};
  }
}

}  // namespace triage::agent
