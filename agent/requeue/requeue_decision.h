// Whether the agent requeues an ended job away from the nodes that failed it, the user's
// --triage-requeue[=N] honoured only as far as the admin's plugstack requeue=allow, Slurm's own
// rules and the evidence allow. Pure: the job-end path gathers the facts, this decides,
// agent/requeue/job_requeue.h carries it out.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/history/outcome_record.h"

namespace triage::agent {

struct RequeueFacts {
  int asked_max = 0;          // --triage-requeue=N (0: the user did not ask)
  bool admin_allows = false;  // the job registered with the plugstack's requeue=allow
  // Slurm's view of the job now (SlurmClient::load_job); `known` false when it could not be asked.
  bool known = false;
  bool batch = false;
  bool requeueable = false;  // Requeue=1
  int restarts = 0;          // requeues before the analysed attempt (Slurm's restart count)
  // Why Slurm's job is no longer the analysed attempt (agent/requeue/attempt_check.h), and why it
  // cannot be named as one attempt (agent/slurm/job_ref.h); "" when it is and it can.
  std::string attempt_changed;
  std::string unnamed;
  // The analysis.
  std::string status;  // triage.json status: failed, hanging, completed, cancelled, ...
  std::string blame;   // "" when the analysis gave none
  std::string cls;
  std::vector<ImplicatedNode> implicated;
  std::vector<std::string> job_nodes;
  // Nodes this agent's history ranks as suspects (agent/history/suspect_nodes.h).
  std::set<std::string> suspects;
  // Why this attempt ends a crashloop (agent/requeue/crashloop.h): "" when it does not.
  std::string crashloop;
};

enum class RequeueOutcome {
  kNotAsked,  // no --triage-requeue: nothing to say
  kDecline,   // asked, but this failure is not one a requeue elsewhere can help (or none left)
  kRefuse,    // asked and warranted, but not allowed here or not possible in Slurm
  kRequeue,   // requeue held, exclude `exclude`, release
};

std::string_view to_string(RequeueOutcome o);

struct RequeueDecision {
  RequeueOutcome outcome = RequeueOutcome::kNotAsked;
  std::vector<std::string> exclude;  // the nodes to keep the next attempt off (kRequeue)
  std::string reason;                // one sentence for the log and the report
  // For kRequeue and kRefuse, a short label for the metrics: why it was warranted (platform,
  // suspect-node) or why it was refused (not-allowed, slurm-unknown, attempt-changed,
  // job-unnamed, not-requeueable); "crashloop" for the decline of a crashloop.
  std::string code;
};

// Contract: requeue only a failed (or hung) job whose user asked and has requeues left, whose
// blame is not user-code, user-config or input-data, that is not in a crashloop, and that either
// has platform blame with a node implicated by trusted evidence or ran on a suspect node (blame
// platform or unknown), then only when the admin allows it and Slurm can (a batch job with
// Requeue=1) and still shows the analysed attempt under a name that is that attempt alone,
// excluding those nodes; every other asked-for case is declined or refused with the reason why.
RequeueDecision decide_requeue(const RequeueFacts& f);

}  // namespace triage::agent
