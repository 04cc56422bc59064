// The built spank_triage.so, loaded like Slurm loads it and driven through its callbacks with a
// fake SPANK host (fake_spank.cpp) and a fake agent on a temporary socket.
#include <slurm/slurm_version.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/spank/fake_agent.h"
#include "tests/spank/fake_spank.h"
#include "tests/spank/plugin_loader.h"
#include "tests/spank/temp_dir.h"

namespace triage::testing {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;
using Json = nlohmann::json;

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0)
    out.append(buf.data(), n);
  pclose(p);
  return out;
}

// Every variable the plugin reads from its environment in the epilog and prolog.
const char* const kEpilogEnv[] = {
    "SLURMD_NODENAME",    "SLURM_NODELIST",          "SLURM_JOB_USER",       "SLURM_JOB_PARTITION",
    "SLURM_JOB_WORK_DIR", "SLURM_JOB_EXIT_CODE",     "SLURM_JOB_DERIVED_EC", "SLURM_JOB_STDOUT",
    "SLURM_JOB_STDERR",   "SLURM_JOB_RESTART_COUNT", "SPANK_TRIAGE",         "SLURM_TRIAGE",
    "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID",     "SLURM_HET_JOB_ID"};

class Plugin : public ::testing::Test {
 protected:
  void SetUp() override {
    fake_spank().reset();
    for (const char* v : kEpilogEnv)
      unsetenv(v);
    socket_ = dir_ / "agent.sock";
    inbox_ = dir_ / "inbox";
    set_args({"socket=" + socket_, "inbox=" + inbox_, "timeout_ms=500"});
    // Fresh static state (config, option seen) for every test: Slurm loads the plugin per process.
    plugin_ = std::make_unique<LoadedPlugin>(SPANK_TRIAGE_SO);
  }
  void TearDown() override {
    plugin_.reset();
    for (const char* v : kEpilogEnv)
      unsetenv(v);
  }

  void set_args(std::vector<std::string> args) {
    args_ = std::move(args);
    argv_.clear();
    for (auto& a : args_)
      argv_.push_back(a.data());
  }

  int call(const char* callback) {
    return plugin_->call(callback, fake_handle(), static_cast<int>(argv_.size()), argv_.data());
  }

  void epilog_environment() {
    setenv("SLURMD_NODENAME", "node007", 1);
    setenv("SLURM_NODELIST", "node[007-008]", 1);
    setenv("SLURM_JOB_USER", "alice", 1);
    setenv("SLURM_JOB_PARTITION", "gpu", 1);
    setenv("SLURM_JOB_WORK_DIR", "/home/alice/run \"7\"", 1);
    setenv("SLURM_JOB_EXIT_CODE", "35072", 1);  // exit 137
    setenv("SLURM_JOB_DERIVED_EC", "0", 1);
    setenv("SLURM_JOB_STDOUT", "/home/alice/run/outputs/%j-%x.log", 1);
    setenv("SLURM_JOB_RESTART_COUNT", "1", 1);
    fake_spank().context = S_CTX_JOB_SCRIPT;
    fake_spank().items = {{S_JOB_ID, 4242}, {S_JOB_UID, 1000}, {S_JOB_GID, 1001}};
  }

  void task_environment(int64_t status) {
    setenv("SLURMD_NODENAME", "node007", 1);
    fake_spank().context = S_CTX_REMOTE;
    fake_spank().items = {{S_JOB_ID, 4242},
                          {S_JOB_STEPID, 0xfffffffb},
                          {S_TASK_ID, 1},
                          {S_TASK_GLOBAL_ID, 9},
                          {S_TASK_PID, 31337},
                          {S_JOB_UID, 1000},
                          {S_TASK_EXIT_STATUS, status}};
  }

  // Runs `callback` against an acknowledging agent and returns the one message it got.
  Json one_message(const char* callback) {
    FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
    EXPECT_EQ(call(callback), 0);
    const auto lines = agent.lines();
    EXPECT_EQ(lines.size(), 1u);
    if (lines.empty()) return Json();
    return Json::parse(lines[0]);
  }

  std::vector<fs::path> inbox_files() const {
    std::vector<fs::path> out;
    if (fs::exists(inbox_)) {
      for (const auto& e : fs::directory_iterator(inbox_))
        out.push_back(e.path());
    }
    return out;
  }

  const RegisteredOption* triage_option() const {
    for (const auto& o : fake_spank().options) {
      if (o.name == "triage") return &o;
    }
    return nullptr;
  }

  // Calls the registered --triage callback as Slurm would.
  int option_cb(const char* arg, int remote) const {
    return named_option_cb("triage", arg, remote);
  }

  int named_option_cb(const std::string& name, const char* arg, int remote) const {
    for (const auto& o : fake_spank().options) {
      if (o.name == name && o.cb != nullptr) return o.cb(0, arg, remote);
    }
    ADD_FAILURE() << "--" << name << " is not registered";
    return -999;
  }

  TempDir dir_;
  std::string socket_;
  std::string inbox_;
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  std::unique_ptr<LoadedPlugin> plugin_;
};

TEST(PluginBinary, ExportsOnlyWhatSlurmLooksUp) {
  const std::string out = run(std::string("nm -D --defined-only ") + SPANK_TRIAGE_SO);
  std::set<std::string> names;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    const auto sp = line.rfind(' ');
    if (sp != std::string::npos) names.insert(line.substr(sp + 1));
  }
  ASSERT_FALSE(names.empty()) << out;
  for (const auto& n : names) {
    EXPECT_TRUE(n.starts_with("slurm_spank_") || n.starts_with("plugin_")) << n << " is exported";
  }
  for (const char* expected :
       {"plugin_name", "plugin_type", "plugin_version", "slurm_spank_init",
        "slurm_spank_init_post_opt", "slurm_spank_job_prolog", "slurm_spank_task_post_fork",
        "slurm_spank_task_exit", "slurm_spank_job_epilog"}) {
    EXPECT_EQ(names.count(expected), 1u) << expected;
  }
  // task_init runs as the user: reporting from there would let a user forge task events.
  EXPECT_EQ(names.count("slurm_spank_task_init"), 0u);
}

TEST(PluginBinary, NeedsNothingButLibcInsideSlurmstepd) {
  const std::string out = run(std::string("readelf -d ") + SPANK_TRIAGE_SO);
  std::vector<std::string> libs;
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t open = line.find('[');
    const size_t close = line.rfind(']');
    if (line.find("(NEEDED)") != std::string::npos && open != std::string::npos &&
        close != std::string::npos && close > open) {
      libs.push_back(line.substr(open + 1, close - open - 1));
    }
  }
  EXPECT_EQ(libs, std::vector<std::string>{"libc.so.6"}) << out;
  EXPECT_EQ(run(std::string("nm -D ") + SPANK_TRIAGE_SO + " | grep -c asan"), "0\n")
      << "the plugin must never carry sanitizer instrumentation";
}

TEST_F(Plugin, LoadsWithTheNameTypeAndVersionSlurmChecks) {
  const auto* name = static_cast<const char*>(plugin_->symbol("plugin_name"));
  const auto* type = static_cast<const char*>(plugin_->symbol("plugin_type"));
  const auto* version = static_cast<const unsigned*>(plugin_->symbol("plugin_version"));
  ASSERT_NE(name, nullptr);
  ASSERT_NE(type, nullptr);
  ASSERT_NE(version, nullptr);
  EXPECT_STREQ(name, "triage");
  EXPECT_STREQ(type, "spank");
  // Slurm compares major and minor for SPANK plugins.
  EXPECT_EQ(*version & 0xffff00u, static_cast<unsigned>(SLURM_VERSION_NUMBER) & 0xffff00u);
}

TEST_F(Plugin, RegistersTriageWhereverAUserOrSlurmstepdParsesIt) {
  for (const auto ctx : {S_CTX_ALLOCATOR, S_CTX_LOCAL, S_CTX_REMOTE}) {
    fake_spank().reset();
    fake_spank().context = ctx;
    EXPECT_EQ(call("init"), 0);
    const RegisteredOption* o = triage_option();
    ASSERT_NE(o, nullptr) << "context " << ctx;
    EXPECT_EQ(o->has_arg, 2) << "the value is optional: --triage alone means full";
    EXPECT_EQ(o->arginfo, "off|basic|full");
    EXPECT_NE(o->usage.find("triage.md"), std::string::npos);
  }
  for (const auto ctx : {S_CTX_SLURMD, S_CTX_JOB_SCRIPT}) {
    fake_spank().reset();
    fake_spank().context = ctx;
    EXPECT_EQ(call("init"), 0);
    EXPECT_EQ(triage_option(), nullptr) << "context " << ctx;
  }
}

TEST_F(Plugin, ATypoInTriageStopsSbatchButNeverAStartedStep) {
  fake_spank().context = S_CTX_ALLOCATOR;
  ASSERT_EQ(call("init"), 0);
  EXPECT_NE(option_cb("ful", 0), 0);
  EXPECT_TRUE(fake_spank().logged("--triage=ful: expected off, basic or full"));
  EXPECT_EQ(option_cb("ful", 1), 0) << "in slurmstepd a bad value is ignored";
  EXPECT_EQ(option_cb("full", 0), 0);
  EXPECT_EQ(option_cb("(null)", 0), 0);
}

TEST_F(Plugin, TriageOnHangIsRegisteredWithARequiredValue) {
  for (const auto ctx : {S_CTX_ALLOCATOR, S_CTX_LOCAL, S_CTX_REMOTE}) {
    fake_spank().reset();
    fake_spank().context = ctx;
    EXPECT_EQ(call("init"), 0);
    const RegisteredOption* found = nullptr;
    for (const auto& o : fake_spank().options) {
      if (o.name == "triage-on-hang") found = &o;
    }
    ASSERT_NE(found, nullptr) << "context " << ctx;
    EXPECT_EQ(found->has_arg, 1);
    EXPECT_EQ(found->arginfo, "notify|cancel|requeue");
  }
}

TEST_F(Plugin, ATypoInTriageOnHangStopsSbatchNamingTheOption) {
  fake_spank().context = S_CTX_ALLOCATOR;
  ASSERT_EQ(call("init"), 0);
  EXPECT_NE(named_option_cb("triage-on-hang", "kill", 0), 0);
  EXPECT_TRUE(fake_spank().logged("--triage-on-hang=kill: expected notify, cancel or requeue"));
  EXPECT_EQ(named_option_cb("triage-on-hang", "kill", 1), 0) << "a started step is never failed";
  EXPECT_EQ(named_option_cb("triage-on-hang", "cancel", 0), 0);
}

TEST_F(Plugin, ThePrologCarriesTheUsersHangChoiceAndTheAdminsRule) {
  struct Case {
    const char* what;
    std::optional<std::string> on_hang;
    std::vector<std::string> extra_args;
    const char* expected_on_hang;
    const char* expected_rule;
  };
  const std::vector<Case> cases = {
      {"nothing asked: notify, admin default", std::nullopt, {}, "notify", "notify"},
      {"cancel asked, admin silent", std::string("cancel"), {}, "cancel", "notify"},
      {"requeue asked, admin allows",
       std::string("requeue"),
       {"hang_action=allow"},
       "requeue",
       "allow"},
      {"garbage slipped past the client",
       std::string("bogus"),
       {"hang_action=allow"},
       "notify",
       "allow"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    plugin_.reset();
    fake_spank().reset();
    std::vector<std::string> args{"socket=" + socket_, "inbox=" + inbox_, "timeout_ms=500"};
    args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
    set_args(args);
    plugin_ = std::make_unique<LoadedPlugin>(SPANK_TRIAGE_SO);
    epilog_environment();
    if (c.on_hang) fake_spank().other_options["triage-on-hang"] = *c.on_hang;
    const Json m = one_message("job_prolog");
    EXPECT_EQ(m["on_hang"], c.expected_on_hang);
    EXPECT_EQ(m["hang_action"], c.expected_rule);
  }
  EXPECT_TRUE(fake_spank().logged("ignoring --triage-on-hang=bogus"));
}

TEST_F(Plugin, SlurmTriageInTheUsersEnvironmentTravelsToTheEpilog) {
  fake_spank().context = S_CTX_ALLOCATOR;
  setenv("SLURM_TRIAGE", "full", 1);
  ASSERT_EQ(call("init"), 0);
  ASSERT_EQ(call("init_post_opt"), 0);
  EXPECT_EQ(fake_spank().control_env["TRIAGE"], "full");
}

TEST_F(Plugin, TheOptionWinsOverSlurmTriage) {
  fake_spank().context = S_CTX_LOCAL;
  setenv("SLURM_TRIAGE", "full", 1);
  ASSERT_EQ(call("init"), 0);
  ASSERT_EQ(option_cb("off", 0), 0);
  ASSERT_EQ(call("init_post_opt"), 0);
  EXPECT_EQ(fake_spank().control_env.count("TRIAGE"), 0u);
}

TEST_F(Plugin, AnInvalidSlurmTriageIsReportedAndIgnored) {
  fake_spank().context = S_CTX_ALLOCATOR;
  setenv("SLURM_TRIAGE", "loud", 1);
  ASSERT_EQ(call("init"), 0);
  EXPECT_EQ(call("init_post_opt"), 0);
  EXPECT_TRUE(fake_spank().logged("SLURM_TRIAGE=loud ignored"));
  EXPECT_TRUE(fake_spank().control_env.empty());
}

TEST_F(Plugin, TheEpilogReportsTheJobEndWithWhatSlurmdKnows) {
  epilog_environment();
  const auto before = std::chrono::system_clock::now();
  const Json m = one_message("job_epilog");
  EXPECT_EQ(m["op"], "job_end");
  EXPECT_EQ(m["job_id"], 4242);
  EXPECT_EQ(m["uid"], 1000);
  EXPECT_EQ(m["gid"], 1001);
  EXPECT_EQ(m["host"], "node007");
  EXPECT_EQ(m["mode"], "basic");
  EXPECT_EQ(m["nodelist"], "node[007-008]");
  EXPECT_EQ(m["user"], "alice");
  EXPECT_EQ(m["partition"], "gpu");
  EXPECT_EQ(m["work_dir"], "/home/alice/run \"7\"");
  EXPECT_EQ(m["wait_status"], 35072);
  EXPECT_EQ(m["derived_wait_status"], 0);
  EXPECT_EQ(m["stdout_pattern"], "/home/alice/run/outputs/%j-%x.log");
  EXPECT_FALSE(m.contains("stderr_pattern")) << "absent in the environment, absent here";
  EXPECT_EQ(m["restart_count"], 1);
  const std::string id = m["msg_id"];
  // <host>:<pid>:<usec>:<n>
  const std::string prefix = "node007:" + std::to_string(getpid()) + ":";
  ASSERT_TRUE(id.starts_with(prefix)) << id;
  const std::string rest = id.substr(prefix.size());
  const size_t colon = rest.find(':');
  ASSERT_NE(colon, std::string::npos) << id;
  EXPECT_GT(std::stoll(rest.substr(0, colon)), 0);
  EXPECT_GT(std::stoll(rest.substr(colon + 1)), 0);
  const int64_t usec = m["time_usec"];
  const int64_t then =
      std::chrono::duration_cast<std::chrono::microseconds>(before.time_since_epoch()).count();
  EXPECT_GE(usec, then);
  EXPECT_LT(usec, then + 10'000'000);
  EXPECT_TRUE(inbox_files().empty());
}

TEST_F(Plugin, TheEpilogReadsTheModeLikeSlurmHandsItOver) {
  struct Case {
    const char* what;
    std::optional<std::string> option;
    const char* spank_triage;
    std::vector<std::string> extra_args;
    const char* expected;
  };
  const std::vector<Case> cases = {
      {"no option: the plugstack default", std::nullopt, nullptr, {}, "basic"},
      {"admin default off", std::nullopt, nullptr, {"default=off"}, "off"},
      {"--triage=full", std::string("full"), nullptr, {"default=off"}, "full"},
      {"bare --triage", std::string("(null)"), nullptr, {}, "full"},
      {"--triage=off", std::string("off"), nullptr, {}, "off"},
      {"SLURM_TRIAGE=off via job control", std::nullopt, "off", {}, "off"},
      {"the option beats SLURM_TRIAGE", std::string("basic"), "full", {}, "basic"},
      {"garbage option value", std::string("bogus"), nullptr, {"default=full"}, "full"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    plugin_.reset();
    fake_spank().reset();
    unsetenv("SPANK_TRIAGE");
    std::vector<std::string> args{"socket=" + socket_, "inbox=" + inbox_, "timeout_ms=500"};
    args.insert(args.end(), c.extra_args.begin(), c.extra_args.end());
    set_args(args);
    plugin_ = std::make_unique<LoadedPlugin>(SPANK_TRIAGE_SO);
    epilog_environment();
    fake_spank().getopt_value = c.option;
    if (c.spank_triage != nullptr) setenv("SPANK_TRIAGE", c.spank_triage, 1);
    const Json m = one_message("job_epilog");
    EXPECT_EQ(m["mode"], c.expected);
  }
  EXPECT_TRUE(fake_spank().logged("ignoring --triage=bogus"));
}

TEST_F(Plugin, AGetoptWithANullArgumentMeansABareTriage) {
  epilog_environment();
  fake_spank().getopt_null_arg = true;
  EXPECT_EQ(one_message("job_epilog")["mode"], "full");
}

TEST_F(Plugin, ThePrologReportsJobStartForTimeWindowAttribution) {
  epilog_environment();
  unsetenv("SLURM_JOB_EXIT_CODE");
  const Json m = one_message("job_prolog");
  EXPECT_EQ(m["op"], "job_start");
  EXPECT_EQ(m["job_id"], 4242);
  EXPECT_EQ(m["nodelist"], "node[007-008]");
  EXPECT_FALSE(m.contains("wait_status"));
  EXPECT_FALSE(m.contains("stdout_pattern"));
}

TEST_F(Plugin, WithNoAgentTheEpilogLeavesTheSameLineInTheInbox) {
  epilog_environment();
  EXPECT_EQ(call("job_epilog"), 0);
  const auto files = inbox_files();
  ASSERT_EQ(files.size(), 1u);
  std::ifstream in(files[0]);
  std::string line;
  std::getline(in, line);
  const Json m = Json::parse(line);
  EXPECT_EQ(m["op"], "job_end");
  EXPECT_EQ(m["job_id"], 4242);
  std::string id = m["msg_id"];
  for (char& c : id) {
    if (c == ':') c = '_';
  }
  EXPECT_EQ(files[0].filename(), id + ".json");
  EXPECT_TRUE(fake_spank().logged("left in"));
}

TEST_F(Plugin, WhenNothingWorksTheEpilogStillSucceedsAndSaysSo) {
  std::ofstream(inbox_) << "not a directory";
  epilog_environment();
  EXPECT_EQ(call("job_epilog"), 0);
  EXPECT_TRUE(
      fake_spank().logged("error: spank_triage: job_end for job 4242 could not be delivered"));
}

TEST_F(Plugin, MissingJobIdsAreLoggedNotFatal) {
  epilog_environment();
  fake_spank().items.clear();
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  EXPECT_EQ(call("job_epilog"), 0);
  EXPECT_TRUE(agent.lines().empty());
  EXPECT_TRUE(fake_spank().logged("not available"));
}

TEST_F(Plugin, JunkInTheEpilogEnvironmentIsLeftOutNotGuessed) {
  epilog_environment();
  setenv("SLURM_JOB_EXIT_CODE", "12abc", 1);
  setenv("SLURM_JOB_WORK_DIR", "/tmp/\xff\xfe\n", 1);
  const Json m = one_message("job_epilog");
  EXPECT_FALSE(m.contains("wait_status"));
  EXPECT_TRUE(fake_spank().logged("SLURM_JOB_EXIT_CODE=12abc is not a number"));
  EXPECT_EQ(m["work_dir"], "/tmp/\xef\xbf\xbd\xef\xbf\xbd\n");
}

TEST_F(Plugin, TaskStartAndExitComeFromSlurmstepdWithRankPidAndStep) {
  task_environment(0);
  const Json start = one_message("task_post_fork");
  EXPECT_EQ(start["op"], "task_start");
  EXPECT_EQ(start["job_id"], 4242);
  EXPECT_EQ(start["step"], "batch");
  EXPECT_EQ(start["task"], 1);
  EXPECT_EQ(start["rank"], 9);
  EXPECT_EQ(start["pid"], 31337);
  EXPECT_EQ(start["host"], "node007");
  EXPECT_FALSE(start.contains("wait_status"));

  task_environment(3 << 8);
  fake_spank().items[S_JOB_STEPID] = 2;
  const Json exit = one_message("task_exit");
  EXPECT_EQ(exit["op"], "task_exit");
  EXPECT_EQ(exit["step"], "2");
  EXPECT_EQ(exit["wait_status"], 768);
  EXPECT_EQ(exit["exit_code"], 3);
  EXPECT_FALSE(exit.contains("signal"));
  EXPECT_NE(exit["msg_id"], start["msg_id"]);
}

// Slurm reads a bare array id as the whole array: the agent names an array task by both ids, and
// the batch step is where slurmstepd has them from slurmctld (an srun step's come from the user's
// environment, so they are not reported).
TEST_F(Plugin, TheBatchStepOfAnArrayTaskReportsItsArrayAndTaskIds) {
  task_environment(0);
  fake_spank().items[S_JOB_ARRAY_ID] = 4240;
  fake_spank().items[S_JOB_ARRAY_TASK_ID] = 2;
  const Json batch = one_message("task_post_fork");
  EXPECT_EQ(batch["array_job_id"], 4240);
  EXPECT_EQ(batch["array_task_id"], 2);

  task_environment(0);
  fake_spank().items[S_JOB_STEPID] = 0;
  fake_spank().items[S_JOB_ARRAY_ID] = 4240;
  fake_spank().items[S_JOB_ARRAY_TASK_ID] = 2;
  const Json step = one_message("task_post_fork");
  EXPECT_FALSE(step.contains("array_job_id")) << step.dump();
  EXPECT_FALSE(step.contains("array_task_id"));
}

TEST_F(Plugin, AJobThatIsNoArrayTaskReportsNoArrayFields) {
  task_environment(0);
  fake_spank().items[S_JOB_ARRAY_ID] = 0;
  fake_spank().items[S_JOB_ARRAY_TASK_ID] = 0xfffffffe;  // NO_VAL
  const Json m = one_message("task_post_fork");
  EXPECT_FALSE(m.contains("array_job_id")) << m.dump();
  EXPECT_FALSE(m.contains("array_task_id"));
  task_environment(0);  // a Slurm that does not answer for them at all
  const Json none = one_message("task_post_fork");
  EXPECT_FALSE(none.contains("array_job_id")) << none.dump();
}

TEST_F(Plugin, TheEpilogPassesOnTheArrayAndHetIdsSlurmdSets) {
  epilog_environment();
  setenv("SLURM_HET_JOB_ID", "4300", 1);
  setenv("SLURM_ARRAY_JOB_ID", "4240", 1);
  setenv("SLURM_ARRAY_TASK_ID", "2", 1);
  const Json m = one_message("job_epilog");
  EXPECT_EQ(m["het_job_id"], 4300);
  EXPECT_EQ(m["array_job_id"], 4240);
  EXPECT_EQ(m["array_task_id"], 2);
}

TEST_F(Plugin, PercentNInTheSocketPathReachesThisNodesAgent) {
  set_args({"socket=" + (dir_ / "%n.sock"), "inbox=" + (dir_ / "inbox-%n"), "timeout_ms=500"});
  task_environment(0);  // SLURMD_NODENAME=node007
  FakeAgent agent(dir_ / "node007.sock", FakeAgent::Behaviour::kAck);
  EXPECT_EQ(call("task_exit"), 0);
  EXPECT_EQ(agent.lines().size(), 1u);
  EXPECT_FALSE(std::filesystem::exists(dir_ / "inbox-node007"));
}

TEST_F(Plugin, ATaskKilledBySignalIsReportedAsTheSignal) {
  task_environment(9);  // SIGKILL, e.g. the OOM killer
  const Json m = one_message("task_exit");
  EXPECT_EQ(m["wait_status"], 9);
  EXPECT_EQ(m["signal"], 9);
  EXPECT_EQ(m["core_dumped"], false);
  EXPECT_FALSE(m.contains("exit_code"));

  task_environment(11 | 0x80);  // SIGSEGV with a core
  const Json core = one_message("task_exit");
  EXPECT_EQ(core["signal"], 11);
  EXPECT_EQ(core["core_dumped"], true);
}

TEST_F(Plugin, SlurmstepdLearnsTheModeFromTheOptionOrTheJobEnvironment) {
  task_environment(0);
  EXPECT_EQ(one_message("task_exit")["mode"], "basic");
  fake_spank().job_env["SLURM_TRIAGE"] = "off";
  EXPECT_EQ(one_message("task_exit")["mode"], "off");
  fake_spank().job_env["SLURM_SPANK_TRIAGE"] = "full";
  EXPECT_EQ(one_message("task_exit")["mode"], "full");
  ASSERT_EQ(call("init"), 0);
  ASSERT_EQ(option_cb("basic", 1), 0);
  EXPECT_EQ(one_message("task_exit")["mode"], "basic");
}

TEST_F(Plugin, TaskCallbacksOutsideSlurmstepdDoNothing) {
  task_environment(0);
  fake_spank().context = S_CTX_LOCAL;
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  EXPECT_EQ(call("task_post_fork"), 0);
  EXPECT_EQ(call("task_exit"), 0);
  EXPECT_TRUE(agent.lines().empty());
  EXPECT_TRUE(inbox_files().empty());
}

TEST_F(Plugin, BadPlugstackArgumentsAreLoggedOnceAndTheDefaultsServe) {
  set_args(
      {"socket=" + socket_, "inbox=" + inbox_, "defualt=off", "timeout_ms=lots", "timeout_ms=500"});
  task_environment(0);
  const Json m = one_message("task_exit");
  EXPECT_EQ(m["mode"], "basic");
  EXPECT_TRUE(fake_spank().logged("error: spank_triage: plugstack argument 'defualt=off'"));
  EXPECT_TRUE(fake_spank().logged("'timeout_ms=lots'"));
  const size_t logged = fake_spank().log.size();
  one_message("task_exit");
  EXPECT_EQ(fake_spank().log.size(), logged) << "reported once per process, not per task";
}

TEST_F(Plugin, UsersDoNotSeePlugstackTyposOnEverySubmit) {
  set_args({"bogus=1"});
  fake_spank().context = S_CTX_ALLOCATOR;
  EXPECT_EQ(call("init"), 0);
  EXPECT_FALSE(fake_spank().logged("error:"));
  EXPECT_TRUE(fake_spank().logged("debug: spank_triage: plugstack argument 'bogus=1'"));
}

TEST_F(Plugin, AStuckAgentDelaysTheEpilogByTheTimeoutOnly) {
  set_args({"socket=" + socket_, "inbox=" + inbox_, "timeout_ms=30"});
  epilog_environment();
  FakeAgent agent(socket_, FakeAgent::Behaviour::kSilent);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(call("job_epilog"), 0);
  const auto ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(ms, 500);
  EXPECT_EQ(inbox_files().size(), 1u);
}

}  // namespace
}  // namespace triage::testing

// preflight=on: the prolog asks the agent first; only a clear "unfit" fails it (Slurm then drains
// the node and requeues the job), and a job refused here is not registered here.
namespace triage::testing {
namespace {

class PluginPreflight : public Plugin {
 protected:
  void SetUp() override {
    Plugin::SetUp();
    set_args({"socket=" + socket_, "inbox=" + inbox_, "timeout_ms=20", "preflight=on"});
    epilog_environment();
    unsetenv("SLURM_JOB_EXIT_CODE");
  }
  void TearDown() override {
    unsetenv("SLURM_JOB_GPUS");
    Plugin::TearDown();
  }
};

TEST_F(PluginPreflight, AnUnfitNodeFailsThePrologWithTheEvidenceAndRegistersNothing) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer(
      "{\"evidence\":[\"pid 4711 (python3) of ended job 4100 is stuck in D state\"],\"fit\":false,"
      "\"ok\":true,\"reason\":\"triage preflight: pid 4711 (python3) of ended job 4100 is stuck in "
      "D state\"}");
  setenv("SLURM_JOB_GPUS", "0,1", 1);
  EXPECT_EQ(call("job_prolog"), -1);
  const auto lines = agent.lines();
  ASSERT_EQ(lines.size(), 1u);
  const Json q = Json::parse(lines[0]);
  EXPECT_EQ(q["op"], "preflight");
  EXPECT_EQ(q["job_id"], 4242);
  EXPECT_EQ(q["host"], "node007");
  EXPECT_EQ(q["gpus"], "0,1");
  EXPECT_TRUE(
      fake_spank().logged("error: spank_triage: job 4242 refused here: triage preflight: "
                          "pid 4711 (python3) of ended job 4100 is stuck in D state"));
  EXPECT_TRUE(inbox_files().empty());
}

TEST_F(PluginPreflight, AFitNodeRegistersTheJobAsBefore) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer("{\"fit\":true,\"ok\":true}");
  EXPECT_EQ(call("job_prolog"), 0);
  ASSERT_TRUE(agent.wait_for_lines(2, milliseconds(1000)));
  const auto lines = agent.lines();
  EXPECT_EQ(Json::parse(lines[0])["op"], "preflight");
  EXPECT_FALSE(Json::parse(lines[0]).contains("gpus"));
  EXPECT_EQ(Json::parse(lines[1])["op"], "job_start");
}

TEST_F(PluginPreflight, WithTheAgentDownThePrologSucceedsAndSaysTheJobWasNotChecked) {
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(call("job_prolog"), 0);
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  EXPECT_LT(ms.count(), 50);
  EXPECT_TRUE(fake_spank().logged("preflight for job 4242: no answer from the agent"));
  EXPECT_TRUE(fake_spank().logged("the job goes ahead unchecked"));
  EXPECT_EQ(inbox_files().size(), 1u);  // the job_start, as without preflight
}

TEST_F(PluginPreflight, ASilentAgentCostsThePrologTheBudgetAndNoMore) {
  FakeAgent agent(socket_, FakeAgent::Behaviour::kSilent);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(call("job_prolog"), 0);
  const auto ms = std::chrono::duration_cast<milliseconds>(std::chrono::steady_clock::now() - t0);
  // 50 ms for the preflight, then timeout_ms=20 for the job_start it does not acknowledge either.
  EXPECT_LT(ms.count(), 50 + 20 + 30);
  EXPECT_TRUE(fake_spank().logged("the job goes ahead unchecked"));
}

TEST_F(PluginPreflight, ABadPreflightArgumentLeavesItOff) {
  set_args({"socket=" + socket_, "inbox=" + inbox_, "preflight=yes"});
  plugin_ = std::make_unique<LoadedPlugin>(SPANK_TRIAGE_SO);
  FakeAgent agent(socket_, FakeAgent::Behaviour::kAck);
  agent.set_answer("{\"fit\":false,\"ok\":true,\"reason\":\"triage preflight: port down: x\"}");
  EXPECT_EQ(call("job_prolog"), 0);
  EXPECT_TRUE(fake_spank().logged("preflight must be on or off; using off"));
  const auto lines = agent.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(Json::parse(lines[0])["op"], "job_start");
}

}  // namespace
}  // namespace triage::testing
