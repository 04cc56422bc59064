#include "agent/health/drain_limit.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "common/text.h"

namespace triage::agent {

namespace {

constexpr char kSep = '|';

// A state in which Slurm schedules nothing new on the node (sinfo's long names, any flag suffix).
bool out_of_service(std::string_view state) {
  for (const std::string_view s : {"drain", "down", "fail", "reboot", "maint"}) {
    if (state.find(s) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> partition_nodes_argv() {
  return {"sinfo", "-h", "-N", "-o", "%R|%N|%T|%E"};
}

std::optional<std::vector<PartitionNode>> parse_partition_nodes(std::string_view out,
                                                                std::string& error) {
  std::vector<PartitionNode> nodes;
  int line_no = 0;
  for (std::string_view line : split(out, '\n')) {
    ++line_no;
    if (trim(line).empty()) continue;
    PartitionNode n;
    std::string* fields[3] = {&n.partition, &n.node, &n.state};
    bool ok = true;
    for (std::string* f : fields) {
      const size_t sep = line.find(kSep);
      if (sep == std::string_view::npos) {
        ok = false;
        break;
      }
      *f = std::string(trim(line.substr(0, sep)));
      line.remove_prefix(sep + 1);
    }
    if (!ok || n.partition.empty() || n.node.empty() || n.state.empty()) {
      error = "sinfo line " + std::to_string(line_no) + ": expected partition|node|state|reason";
      return std::nullopt;
    }
    n.state = to_lower(n.state);
    n.reason = std::string(trim(line));
    nodes.push_back(std::move(n));
  }
  return nodes;
}

bool taken_by_triage(const PartitionNode& n) {
  return out_of_service(n.state) && n.reason.rfind("triage", 0) == 0;
}

int64_t partition_limit(int64_t size, const DrainLimits& limits) {
  const double share = std::floor(limits.fraction * static_cast<double>(size) + 1e-9);
  int64_t limit = std::max<int64_t>(1, static_cast<int64_t>(share));
  if (limits.max_nodes > 0) limit = std::min(limit, limits.max_nodes);
  return limit;
}

LimitDecision decide_drain_limit(const std::vector<PartitionNode>& nodes, const std::string& node,
                                 const DrainLimits& limits) {
  struct Count {
    int64_t size = 0;
    int64_t taken = 0;  // by triage, this node aside
    bool has_node = false;
  };
  std::map<std::string, Count> parts;
  for (const PartitionNode& n : nodes) {
    Count& c = parts[n.partition];
    ++c.size;
    if (n.node == node) {
      c.has_node = true;
    } else if (taken_by_triage(n)) {
      ++c.taken;
    }
  }
  std::string within;
  for (const auto& [name, c] : parts) {
    if (!c.has_node) continue;
    const int64_t limit = partition_limit(c.size, limits);
    const std::string counts = "partition " + name + " has " + std::to_string(c.taken) + " of " +
                               std::to_string(c.size) + " nodes out by triage, limit " +
                               std::to_string(limit);
    if (c.taken + 1 > limit) return {false, counts};
    within += within.empty() ? counts : "; " + counts;
  }
  if (within.empty()) return {false, "Slurm lists " + node + " in no partition"};
  return {true, within};
}

}  // namespace triage::agent
