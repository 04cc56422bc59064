// spank_triage.so inside a real Slurm: munged, slurmctld and slurmd from Debian on loopback, jobs
// submitted by a non-root user, no slurm-triage agent (or a fake one on the plugin's socket).
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/e2e/cluster_environment.h"
#include "tests/spank/fake_agent.h"

namespace triage::testing {
namespace {

using nlohmann::json;
using std::chrono::milliseconds;

ClusterEnvironment* g_env = nullptr;

// The spank epilog of a job (slurmstepd spank epilog: exec, plugin load, callback) on this VM
// takes about 20 ms; a second means the plugin held the node in COMPLETING.
constexpr double kEpilogBudgetMs = 1000;

std::vector<json> of_op(const std::vector<json>& msgs, const std::string& op) {
  std::vector<json> out;
  for (const auto& m : msgs) {
    if (m.value("op", "") == op) out.push_back(m);
  }
  return out;
}

json job_end(const SlurmCluster& c, uint32_t id) {
  const auto ends = of_op(c.inbox_messages(id), "job_end");
  if (ends.size() != 1) {
    ADD_FAILURE() << "job " << id << ": " << ends.size() << " job_end messages\n" << c.logs();
    return json::object();
  }
  return ends[0];
}

std::vector<json> lines_as_json(const FakeAgent& agent, uint32_t job_id) {
  std::vector<json> out;
  for (const auto& l : agent.lines()) {
    auto j = json::parse(l, nullptr, false);
    if (!j.is_discarded() && j.value("job_id", 0u) == job_id) out.push_back(j);
  }
  return out;
}

// Appends arguments to the plugin's plugstack line for the scope of a test. slurmstepd and the
// spank epilog read plugstack.conf afresh for every job, so this takes effect at once.
class ExtraPluginArgs {
 public:
  ExtraPluginArgs(const SlurmCluster& c, const std::string& args)
      : path_(c.state_dir() + "/etc/plugstack.conf") {
    std::ifstream in(path_);
    std::getline(in, original_);
    std::ofstream(path_) << original_ << " " << args << "\n";
  }
  ~ExtraPluginArgs() { std::ofstream(path_) << original_ << "\n"; }
  ExtraPluginArgs(const ExtraPluginArgs&) = delete;
  ExtraPluginArgs& operator=(const ExtraPluginArgs&) = delete;

 private:
  std::string path_;
  std::string original_;
};

TEST(SlurmPlugin, TriageIsInTheHelpOfSbatchSrunAndSalloc) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  for (const char* cmd : {"sbatch", "srun", "salloc"}) {
    const CommandResult r = c.as_user("/", {cmd, "--help"});
    EXPECT_NE(r.output.find("--triage=off|basic|full"), std::string::npos) << cmd << r.output;
  }
}

TEST(SlurmPlugin, EveryWayOfChoosingAModeReachesTheEpilogAndSlurmstepd) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("modes");
  {
    std::ofstream script(dir + "/job.sh");
    script << "#!/bin/bash\n#SBATCH --triage=off\n#SBATCH -o job-%j.out\necho from a script\n";
  }
  struct Case {
    std::string what;
    std::vector<std::string> args;
    std::vector<std::string> env;
    std::string mode;
  };
  const std::vector<Case> cases = {
      {"nothing: the plugstack default", {"--wrap", "true"}, {}, "basic"},
      {"--triage=off", {"--triage=off", "--wrap", "true"}, {}, "off"},
      {"--triage=full", {"--triage=full", "--wrap", "true"}, {}, "full"},
      {"a bare --triage", {"--triage", "--wrap", "true"}, {}, "full"},
      {"SLURM_TRIAGE=full", {"--wrap", "true"}, {"SLURM_TRIAGE=full"}, "full"},
      {"#SBATCH --triage=off", {"job.sh"}, {}, "off"},
      {"the option beats SLURM_TRIAGE",
       {"--triage=basic", "--wrap", "true"},
       {"SLURM_TRIAGE=off"},
       "basic"},
  };
  std::vector<uint32_t> ids;
  ids.reserve(cases.size());
  for (const auto& k : cases)
    ids.push_back(c.sbatch(dir, k.args, k.env));
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(cases[i].what);
    EXPECT_EQ(c.wait_job(ids[i]), "COMPLETED");
    const auto msgs = c.inbox_messages(ids[i]);
    for (const char* op : {"job_start", "task_start", "task_exit", "job_end"}) {
      const auto some = of_op(msgs, op);
      ASSERT_EQ(some.size(), 1u) << op << "\n" << c.logs();
      EXPECT_EQ(some[0]["mode"], cases[i].mode) << op;
    }
  }
}

TEST(SlurmPlugin, SrunAndSallocCarryTheModeToTheirJobs) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("srun salloc");
  // srun outside an allocation makes its own job; salloc's job runs srun steps inside it.
  const CommandResult srun =
      c.as_user(dir, {"srun", "--triage=off", "-n", "1", "sh", "-c", "echo $SLURM_JOB_ID"});
  ASSERT_TRUE(srun.ok()) << srun.output;
  const CommandResult salloc = c.as_user(
      dir, {"salloc", "--triage=full", "-n", "1", "sh", "-c", "srun true; echo $SLURM_JOB_ID"},
      {"SLURM_TRIAGE=off"});
  ASSERT_TRUE(salloc.ok()) << salloc.output;
  const auto last_number = [](const std::string& out) {
    std::istringstream in(out);
    std::string line;
    uint32_t id = 0;
    while (std::getline(in, line)) {
      if (!line.empty() && std::all_of(line.begin(), line.end(), ::isdigit)) {
        id = static_cast<uint32_t>(std::stoul(line));
      }
    }
    return id;
  };
  const uint32_t srun_job = last_number(srun.output);
  const uint32_t salloc_job = last_number(salloc.output);
  ASSERT_NE(srun_job, 0u) << srun.output;
  ASSERT_NE(salloc_job, 0u) << salloc.output;
  c.wait_job(srun_job);
  c.wait_job(salloc_job);
  EXPECT_EQ(job_end(c, srun_job)["mode"], "off");
  EXPECT_EQ(job_end(c, salloc_job)["mode"], "full");
  for (const auto& m : of_op(c.inbox_messages(srun_job), "task_exit"))
    EXPECT_EQ(m["mode"], "off");
  const auto steps = of_op(c.inbox_messages(salloc_job), "task_exit");
  ASSERT_FALSE(steps.empty());
  for (const auto& m : steps)
    EXPECT_EQ(m["mode"], "full") << m.dump();
}

TEST(SlurmPlugin, ATypoInTriageIsRefusedAtSubmission) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("typo");
  const CommandResult r = c.as_user(dir, {"sbatch", "--triage=ful", "--wrap", "true"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--triage=ful: expected off, basic or full"), std::string::npos)
      << r.output;
}

TEST(SlurmPlugin, TheJobEndCarriesWhatTheEpilogKnows) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("job end");
  const uint32_t id =
      c.sbatch(dir, {"-J", "llama-70b", "-o", "outputs-%j-%x.log", "--wrap", "exit 3"});
  EXPECT_EQ(c.wait_job(id), "FAILED");
  const json end = job_end(c, id);
  EXPECT_EQ(end["uid"], c.user_uid());
  EXPECT_EQ(end["gid"], c.user_gid());
  EXPECT_EQ(end["user"], SlurmCluster::kUser);
  EXPECT_EQ(end["host"], c.node());
  EXPECT_EQ(end["nodelist"], c.node());
  EXPECT_EQ(end["work_dir"], dir);
  EXPECT_EQ(end["wait_status"], 3 << 8);
  EXPECT_EQ(end["stdout_pattern"], dir + "/outputs-%j-%x.log") << "the raw pattern, unexpanded";
  EXPECT_FALSE(end.contains("stderr_pattern")) << "no -e given";
}

TEST(SlurmPlugin, ARankKilledBySignalIsCapturedWithItsRankPidAndStep) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("sigkill");
  const uint32_t id =
      c.sbatch(dir, {"-n", "2", "-o", "out.log", "--wrap",
                     "srun sh -c 'if [ $SLURM_PROCID = 1 ]; then kill -9 $$; fi; sleep 0.5'"});
  EXPECT_EQ(c.wait_job(id), "FAILED");
  const auto msgs = c.inbox_messages(id);
  std::map<int64_t, json> starts;
  std::map<int64_t, json> exits;
  for (const auto& m : msgs) {
    if (m.value("step", "") != "0") continue;
    if (m["op"] == "task_start") starts[m["rank"]] = m;
    if (m["op"] == "task_exit") exits[m["rank"]] = m;
  }
  ASSERT_EQ(starts.size(), 2u) << c.logs();
  ASSERT_EQ(exits.size(), 2u) << c.logs();
  EXPECT_EQ(exits[0]["exit_code"], 0);
  EXPECT_EQ(exits[1]["signal"], 9);
  EXPECT_EQ(exits[1]["wait_status"], 9);
  for (int64_t rank : {0, 1}) {
    EXPECT_EQ(starts[rank]["pid"], exits[rank]["pid"]) << "rank " << rank;
    EXPECT_GT(starts[rank]["pid"].get<int64_t>(), 1);
    EXPECT_EQ(exits[rank]["uid"], c.user_uid());
  }
  const auto batch = of_op(msgs, "task_exit");
  EXPECT_TRUE(
      std::any_of(batch.begin(), batch.end(), [](const json& m) { return m["step"] == "batch"; }));
  EXPECT_NE(job_end(c, id).value("wait_status", 0), 0);
}

TEST(SlurmPlugin, WithNoAgentJobsFinishTheEpilogStaysFastAndTheNodeIsNotDrained) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  ASSERT_FALSE(std::filesystem::exists(c.socket_path()));
  const std::string dir = c.make_job_dir("no agent");
  std::vector<uint32_t> ids;
  for (const char* body : {"true", "exit 1", "kill -9 $$", "sleep 0.3"}) {
    ids.push_back(c.sbatch(dir, {"--wrap", body}));
  }
  const std::vector<std::string> expected = {"COMPLETED", "FAILED", "FAILED", "COMPLETED"};
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(c.wait_job(ids[i]), expected[i]);
    const auto ms = c.epilog_ms(ids[i]);
    ASSERT_TRUE(ms.has_value()) << c.logs();
    EXPECT_LT(*ms, kEpilogBudgetMs);
    EXPECT_EQ(job_end(c, ids[i])["job_id"], ids[i]);
  }
  EXPECT_EQ(c.node_state(), "idle");
  EXPECT_EQ(c.node_reason(), "none");
}

TEST(SlurmPlugin, AStuckOrFullAgentDoesNotHoldJobsUp) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("stuck agent");
  for (const auto behaviour : {FakeAgent::Behaviour::kSilent, FakeAgent::Behaviour::kBacklogFull}) {
    SCOPED_TRACE(behaviour == FakeAgent::Behaviour::kSilent ? "silent" : "backlog full");
    FakeAgent agent(c.socket_path(), behaviour);
    const uint32_t id = c.sbatch(dir, {"-n", "2", "--wrap", "srun true"});
    EXPECT_EQ(c.wait_job(id), "COMPLETED");
    const auto ms = c.epilog_ms(id);
    ASSERT_TRUE(ms.has_value());
    EXPECT_LT(*ms, kEpilogBudgetMs);
    const auto msgs = c.inbox_messages(id);
    EXPECT_EQ(of_op(msgs, "job_end").size(), 1u);
    EXPECT_EQ(of_op(msgs, "task_exit").size(), 3u) << "batch + two ranks";
    if (behaviour == FakeAgent::Behaviour::kSilent) {
      agent.wait_for_lines(msgs.size(), milliseconds(5000));  // its reader may lag behind
      EXPECT_EQ(lines_as_json(agent, id).size(), msgs.size())
          << "it was offered every message it then failed to acknowledge";
    }
  }
  EXPECT_EQ(c.node_state(), "idle");
}

TEST(SlurmPlugin, AnAcknowledgingAgentGetsEveryMessageAndTheInboxStaysEmpty) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  const std::string dir = c.make_job_dir("acking agent");
  // The default 10 ms is meant for a real agent on a quiet node; this one shares a loaded test
  // machine, and a late acknowledgement would (rightly) send the message to the inbox as well.
  const ExtraPluginArgs patient(c, "timeout_ms=1000");
  FakeAgent agent(c.socket_path(), FakeAgent::Behaviour::kAck);
  const uint32_t id = c.sbatch(dir, {"-n", "2", "--triage=full", "--wrap", "srun true"});
  EXPECT_EQ(c.wait_job(id), "COMPLETED");
  const auto got = lines_as_json(agent, id);
  std::multiset<std::string> ops;
  std::set<std::string> ids;
  for (const auto& m : got) {
    ops.insert(m["op"].get<std::string>());
    ids.insert(m["msg_id"].get<std::string>());
  }
  EXPECT_EQ(ops.count("job_start"), 1u);
  EXPECT_EQ(ops.count("task_start"), 3u);
  EXPECT_EQ(ops.count("task_exit"), 3u);
  EXPECT_EQ(ops.count("job_end"), 1u);
  EXPECT_EQ(ids.size(), got.size()) << "every msg_id is unique";
  EXPECT_TRUE(c.inbox_messages(id).empty());
}

TEST(SlurmPlugin, ABadPlugstackArgumentIsLoggedAndJobsStillRun) {
  SlurmCluster& c = CLUSTER_OR_FAIL(g_env);
  std::string state;
  uint32_t id = 0;
  {
    const ExtraPluginArgs typos(c, "defualt=off timeout_ms=forever");
    const std::string dir = c.make_job_dir("bad args");
    id = c.sbatch(dir, {"--wrap", "true"});
    state = c.wait_job(id);
  }
  EXPECT_EQ(state, "COMPLETED");
  EXPECT_EQ(job_end(c, id)["mode"], "basic");
  std::ifstream log(c.state_dir() + "/log/slurmd.log");
  std::stringstream text_stream;
  text_stream << log.rdbuf();
  const std::string text = text_stream.str();
  EXPECT_NE(text.find("spank_triage: plugstack argument 'defualt=off': unknown argument"),
            std::string::npos);
  EXPECT_EQ(c.node_state(), "idle");
}

}  // namespace
}  // namespace triage::testing

int main(int argc, char** argv) {
  triage::testing::ClusterOptions options;
  options.plugin = SPANK_TRIAGE_SO;
  return triage::testing::run_with_cluster(argc, argv, "plugin_e2e_tests", options,
                                           &triage::testing::g_env);
}
