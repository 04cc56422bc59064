// Where each node hangs in the network, as Slurm's topology/tree plugin knows it: the leaf switch
// of each node, read from `scontrol show topology`. Both Slurm 22.05 (src/api/topo_info.c,
// slurm_print_topo_record) and 24.11 (src/plugins/topology/tree/topology_tree.c,
// _print_topo_record) print one line per switch:
//   SwitchName=<name> Level=<n> LinkSpeed=<n>[ Nodes=<hostlist>][ Switches=<hostlist>]
// A node's leaf switch is the lowest-level switch whose Nodes= names it (the first such line on a
// tie): slurmctld lists under an upper switch every node below it. No topology reads as an empty
// one: no topology.conf, TopologyPlugin none or flat (nothing printed; "No topology information
// available" goes to stderr), topology/block (24.11; its BlockName= lines are not switches).
// Callers then work as without switches, silently.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace triage::agent {

struct SwitchTopology {
  std::map<std::string, std::string> leaf_of;              // node -> its leaf switch
  std::map<std::string, std::vector<std::string>> leaves;  // leaf switch -> its nodes, in order

  bool empty() const { return leaf_of.empty(); }
};

// `scontrol show topology`: every switch.
std::vector<std::string> topology_argv();

// The leaf switches of `text` (what topology_argv printed). Lines that are not SwitchName= lines
// are skipped (other plugins' shapes); a SwitchName= line that does not read (no Level, a Level
// that is not a number, a Nodes= that is not a hostlist, a switch named twice) throws InputError
// naming `origin`, the line and the field.
SwitchTopology parse_topology(std::string_view text, const std::string& origin);

// What `scontrol show topology` prints now, run with the agent's environment (its SLURM_CONF) less
// SLURM_TOPO_LEN, which would cut each line short; nothing when scontrol is missing, fails (no
// controller to ask) or outlasts `timeout_ms`: callers then work as without switches.
std::optional<std::string> query_topology_text(int timeout_ms);

// Contract: query_topology_text read by parse_topology; an empty topology when either gives
// nothing usable (the job-end path's switches are a bonus, never a reason to fail).
SwitchTopology current_topology(int timeout_ms);

}  // namespace triage::agent
