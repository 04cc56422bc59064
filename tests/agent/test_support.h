// Helpers for the agent's tests: temporary trees, a private munged, a scriptable SlurmClient,
// fixture /proc and sysfs trees, and socket/HTTP clients that can run as another uid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "agent/agent.h"
#include "agent/base/config.h"
#include "agent/slurm/slurm_client.h"
#include "agent/slurm/slurm_command_runner.h"
#include "common/model.h"
#include "tests/agent/munge_daemon.h"
#include "tests/agent/server/floods.h"

namespace triage::agent::testing {

inline constexpr uid_t kNobody = 65534;
inline constexpr gid_t kNogroup = 65534;
inline constexpr uid_t kDaemon = 1;

// A directory under /tmp removed at the end of the test. Mode 0755 so that processes dropped to
// another uid (the analyzer, forked clients) can reach what is inside.
class TempDir {
 public:
  explicit TempDir(const std::string& tag);
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& rel) const { return path_ + "/" + rel; }

 private:
  std::string path_;
};

void write_file(const std::string& path, const std::string& content, mode_t mode = 0644);
// Appends as a syslog daemon or the kernel would: to the end of a file someone is reading.
void append_file(const std::string& path, const std::string& text);
// A kernel line as `dmesg --time-format iso` prints it.
std::string iso_line(int64_t usec, const std::string& message);
std::string read_file(const std::string& path);
void make_dirs(const std::string& path, mode_t mode = 0755);

// A SlurmClient whose answers the test sets; it records drains and undrains.
class FakeSlurm : public SlurmClient {
 public:
  std::optional<JobFacts> load_job(uint64_t job_id, std::string& error) override;
  std::optional<SlurmNodeState> load_node(const std::string& node, std::string& error) override;
  std::map<std::string, std::string> node_addresses(const std::vector<std::string>& nodes,
                                                    std::string& error) override;
  bool drain_node(const std::string& node, const std::string& why, std::string& error) override;
  bool undrain_node(const std::string& node, const std::string& expected_reason,
                    std::string& error) override;

  void set_job(JobFacts facts);
  void set_node(SlurmNodeState state);
  // Runs on the node's state as drain_node begins: somebody else's update landing between the
  // caller's check and its drain.
  void set_before_drain(std::function<void(SlurmNodeState&)> fn);
  // The preflight's drain reason: the node drained with `reason` (recorded in preflight_labels()).
  bool label_preflight_drain(const std::string& node, const std::string& reason,
                             std::string& error) override;
  std::vector<std::pair<std::string, std::string>> preflight_labels() const;
  std::vector<std::pair<std::string, std::string>> drains() const;
  std::vector<std::string> undrains() const;
  int load_job_calls() const;
  int node_table_loads() const;

  // The drain controller's scontrol and sinfo, answered from the fake's nodes: `sinfo` lists every
  // node in partition "debug", `scontrol reboot ASAP nextstate=DOWN reason=R NODE` drains NODE
  // with R (the reboot itself is complete_reboot()), `scontrol update NodeName=N State=RESUME`
  // returns N to IDLE without a reason, `... State=DOWN Reason=R` sets DOWN with R. Every command
  // line is recorded; anything else fails.
  SlurmCommandResult run_command(const std::vector<std::string>& argv);
  std::vector<std::string> commands() const;
  // What slurmctld does when the node comes back from a reboot asked with nextstate=DOWN: DOWN,
  // DRAIN cleared, " : reboot issued : reboot complete" after the reason (22.05).
  void complete_reboot(const std::string& node);

 private:
  mutable std::mutex mu_;
  std::map<uint64_t, JobFacts> jobs_;
  std::map<std::string, SlurmNodeState> nodes_;
  std::vector<std::pair<std::string, std::string>> drains_;
  std::vector<std::pair<std::string, std::string>> preflight_labels_;
  std::vector<std::string> undrains_;
  std::function<void(SlurmNodeState&)> before_drain_;
  int load_job_calls_ = 0;
  int node_table_loads_ = 0;
  std::vector<std::string> commands_;
};

// A configuration rooted in `dir`: spool, socket, inbox, loopback HTTP on a free port, fixture
// roots, fast intervals, no settle delay. `extra` is more triage.conf text.
AgentConfig test_config(const std::string& dir, const std::string& node,
                        const std::string& extra = "");

// Sends one line on the agent's socket and returns the answer line. With `as_uid`, a forked child
// drops to that uid (and gid) before connecting, so SO_PEERCRED sees it.
std::string socket_request(const std::string& socket_path, const std::string& line,
                           std::optional<uid_t> as_uid = std::nullopt);
// A TCP connection to 127.0.0.1:port, or -1.
int connect_tcp(int port);
// connect_tcp_from and connect_unix: tests/agent/server/floods.h.

nlohmann::json socket_json(const std::string& socket_path, const nlohmann::json& request,
                           std::optional<uid_t> as_uid = std::nullopt);

struct HttpAnswer {
  int status = 0;
  std::string head;
  std::string body;
};
// A raw HTTP/1.1 GET to 127.0.0.1:port. `auth` is the Authorization value ("" = none). With
// `as_uid`, a child drops to that uid first and, when `munge_socket` is set, makes the munge
// credential for `target` itself (so the credential carries that uid).
HttpAnswer http_get(int port, const std::string& target, const std::string& auth = "",
                    std::optional<uid_t> as_uid = std::nullopt,
                    const std::string& munge_socket = "");
// Like http_get with a credential made for `payload` by the current process.
HttpAnswer http_get_munged(int port, const std::string& target, const std::string& munge_socket,
                           const std::string& payload = "");

// Like http_get (no uid change), from `source` (a loopback address); status 0 when it could not
// connect.
HttpAnswer http_get_from(const std::string& source, int port, const std::string& target,
                         const std::string& auth = "");

// A /proc look-alike: <root>/<pid>/{stat,wchan,cgroup} and <root>/stat.
struct FakeProcess {
  int64_t pid = 0;
  std::string comm = "python3";
  char state = 'S';
  std::string wchan = "0";
  std::string cgroup = "0::/user.slice\n";
  uint64_t start_ticks = 1000;
};
void write_proc_tree(const std::string& root, const std::vector<FakeProcess>& procs,
                     uint64_t procs_blocked = 0);

// A sysfs look-alike: class/drm/cardN/device -> ../../devices/<addr>, with ras/ and aer files.
struct FakeGpu {
  int card = 0;
  std::string address = "0000:c1:00.0";
  std::map<std::string, std::pair<uint64_t, uint64_t>> ras;  // block -> (ue, ce)
  std::map<std::string, uint64_t> aer;                       // correctable|nonfatal|fatal -> total
};
void write_sysfs_tree(const std::string& root, const std::vector<FakeGpu>& gpus);

// The value of one series ("name{labels}" exactly as rendered) in Prometheus text, if present.
std::optional<double> metric_value(const std::string& text, const std::string& series);

// `record`'s `key`, or null when it has none (or is no object): a missing key then fails the
// check that reads it, with the record in the message, instead of aborting the test binary as a
// const json's operator[] does.
nlohmann::json field(const nlohmann::json& record, const std::string& key);

// The analysis summaries ({"r":"analysis",...}) in a job's spool file, oldest first.
std::vector<nlohmann::json> analysis_summaries(const std::string& spool, uint64_t job);

// Waits up to `ms` for `pred`; true if it became true.
bool eventually(const std::function<bool()>& pred, int ms = 10000);

// The agent runs the analyzer as the job's owner, who may not reach the build tree (a checkout
// under /root or a mktemp -d is closed to other users). So an agent under test runs a copy in its
// own world-traversable directory `dir` (as a package puts it under /usr); these return the copy.
// The fake analyzer (built beside the tests), copied to `dir`/bin/.
std::string fake_analyzer_in(const std::string& dir);
// The slurm-triage CLI built in this tree, copied to `dir`/analyzer/ with the shipped rules it
// reads; the returned path is a wrapper pointing SLURM_TRIAGE_DATADIR at them (the agent starts
// the analyzer with a clean environment).
std::string analyzer_cli_in(const std::string& dir);
// The slurm-triage CLI built in this tree, for running as root.
std::string cli_path();

// A lifecycle message as the plugin sends it.
nlohmann::json lifecycle(const std::string& op, uint64_t job_id, const std::string& msg_id,
                         nlohmann::json fields = nlohmann::json::object());

KernelEvent make_event(const std::string& id, const std::string& kind, int64_t time_usec,
                       const std::string& boot_id = "boot-a");

// An in-process agent in its own temporary tree. Adjust `config`/`options` before start().
class AgentHarness {
 public:
  AgentHarness(const std::string& tag, const std::string& node, const std::string& extra = "");
  ~AgentHarness();
  AgentHarness(const AgentHarness&) = delete;
  AgentHarness& operator=(const AgentHarness&) = delete;

  void start();
  void stop();
  Agent& agent() { return *agent_; }
  FakeSlurm& slurm() { return *slurm_; }
  const std::string& dir() const { return dir_.path(); }
  const std::string& socket() const { return config.socket_path; }
  int port() { return agent_->http_port(); }

  AgentConfig config;
  AgentOptions options;

 private:
  TempDir dir_;
  FakeSlurm* slurm_ = nullptr;
  std::unique_ptr<SlurmClient> slurm_owned_;
  std::unique_ptr<Agent> agent_;
};

// An agent on node001 serving HTTP beside a private munged, with what a peer's evidence fetch
// reads: job kJob (owned by nobody) and a GPU uncorrectable error (event "boot-a:7") while it
// runs. Adjust h.config before start().
class PeerEvidenceAgent {
 public:
  static constexpr uint64_t kJob = 4242;
  PeerEvidenceAgent(const std::string& tag, const std::string& extra);
  // munged, the agent, the job and the event; a failure says which did not come up.
  ::testing::AssertionResult start();

  TempDir munge_dir{"munge"};
  MungeDaemon munge{munge_dir.path()};
  AgentHarness h;
};

}  // namespace triage::agent::testing
