// Folds what the node agents saw (trusted: kernel events, task exit statuses, node verdicts) and
// what the log says about nodes (untrusted: NODE_EXIT lines, srun task errors) into the report's
// node table, and turns trusted facts into findings the diagnosis can rank.
#pragma once

#include <string>
#include <vector>

#include "analyzer/finding.h"
#include "analyzer/hang_origin.h"
#include "analyzer/log_facts.h"
#include "analyzer/signature_catalog.h"
#include "analyzer/triage_report.h"
#include "common/model.h"

namespace triage {

struct TrustedFinding {
  Finding finding;
  // Decisive findings name the primary failure on their own (a rank SIGKILLed on a node whose
  // kernel OOM-killed it, a GPU that fell off the bus); the others are ranked with the log's.
  bool decisive = false;
};

// Findings from the agent's evidence. `slurm_state` is the trusted Slurm job state ("" = unknown).
std::vector<TrustedFinding> trusted_findings(const Evidence* evidence,
                                             const std::string& slurm_state,
                                             const SignatureCatalog& catalog);

// The node table: agent evidence first (in the evidence's order), then hosts only the log names.
std::vector<NodeRow> build_node_table(const Evidence* evidence, const LogFacts* facts);

// What the node table and the agents' evidence tell where_hang_began (hang_origin.h): the rank ->
// node layout (the table's, which has the agents' task exits and the log's srun lines), and from
// the evidence the ranks of the job step, each task's end, the nodes' D-state tasks and their
// kernel events. The log's collective facts are not filled in.
HangOriginInput hang_origin_evidence(const Evidence* evidence, const std::vector<NodeRow>& nodes);

// True when every NODE_EXIT line reports 143: a clean cancellation, not a node failure.
bool all_nodes_exited_sigterm(const LogFacts& facts);

// Slurm job states of a job that has not ended.
bool slurm_state_alive(const std::string& state);

}  // namespace triage
