// Everything the agent asks slurmctld, behind one interface so that the agent's logic can be
// tested without a controller. The real implementation (slurm_client.cpp) uses libslurm; it is
// never called from inside an epilog, which must not talk to slurmctld.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/model.h"

namespace triage::agent {

struct SlurmNodeState {
  std::string name;
  std::string state;   // "IDLE", "ALLOCATED", "DRAINING", "DRAINED", "DOWN", ... (+ flags)
  bool drain = false;  // DRAIN flag set (DRAINING or DRAINED)
  bool down = false;
  std::string reason;       // the reason someone gave, if any
  uint32_t reason_uid = 0;  // who set the reason
  std::string addr;         // NodeAddr: where the node is reached (may differ from its name)
  int64_t reason_time = 0;  // when the reason was set (slurmctld's clock, seconds; 0: no reason)
};

class SlurmClient {
 public:
  virtual ~SlurmClient() = default;

  // A job's facts from slurmctld (slurm_load_job; slurm_get_job_stdout for the expanded StdOut):
  // name, user, uid/gid, state, exit code, work dir, node list, batch host, times, restart count,
  // array and het job fields, ExcNodeList, batch and requeue flags. Read as structures: nothing a
  // user wrote (a job name, a comment) can pose as another field.
  // `error` says why when nullopt is returned (controller down, job purged, ...).
  virtual std::optional<JobFacts> load_job(uint64_t job_id, std::string& error) = 0;

  virtual std::optional<SlurmNodeState> load_node(const std::string& node, std::string& error) = 0;

  // Where each of `nodes` is reached (NodeAddr), from one load of the node table: a job end on a
  // 256-node job asks slurmctld once, not once per peer. Nodes slurmctld does not know are left
  // out; on failure the map is empty and `error` says why.
  virtual std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes,
                                                            std::string& error) = 0;

  // Sets DRAIN on `node` with reason "triage: <why>". Refuses (returns false with `error`) when the
  // node is already drained or down for another reason: the agent never overrides, and never
  // resumes, a drain someone else made.
  virtual bool drain_node(const std::string& node, const std::string& why, std::string& error) = 0;

  // Clears DRAIN on `node` (UNDRAIN: a DOWN node stays down) only while its reason is still
  // exactly `expected_reason`, the drain the caller decided to lift; otherwise returns false with
  // `error` saying what changed. Slurm has no compare-and-set, so a drain made between the check
  // and the update (milliseconds) could be lifted; the caller only lifts its own.
  virtual bool undrain_node(const std::string& node, const std::string& expected_reason,
                            std::string& error) = 0;

  // Gives the drain of a node whose prolog the preflight failed `reason` ("triage preflight:
  // ...": agent/slurm/drain_steps.h label_preflight_drain). A client that cannot reach slurmctld
  // refuses with `error`.
  virtual bool label_preflight_drain(const std::string& node, const std::string& reason,
                                     std::string& error) {
    (void)node;
    (void)reason;
    error = "this Slurm client cannot update nodes";
    return false;
  }
};

// The libslurm-backed client (reads slurm.conf the usual way: SLURM_CONF or /etc/slurm/slurm.conf).
std::unique_ptr<SlurmClient> make_libslurm_client();

}  // namespace triage::agent
