// The live loop end to end on one node, with a fake clock and a real log: a job that prints a step
// a second for 30 s and then sleeps is flagged after its threshold, its AdminComment set, its
// interim report written by the analyzer as its owner, and, since it asked for --triage-on-hang=
// cancel and the admin allowed it, cancelled after twice the threshold; an early warning is
// recorded at once; a restarted agent resumes from the saved state; the job-end evidence carries
// the record. Blocking work runs inline here (the agent offloads it to its workers).
#include "agent/live/live_monitor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <filesystem>
#include <future>
#include <thread>

#include <gtest/gtest.h>

#include "agent/node/job_table.h"
#include "common/safe_io.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::TempDir;

constexpr int64_t kSec = 1000000;
constexpr int64_t kT0 = int64_t{1795860000} * kSec;
constexpr uint64_t kJob = 4242;

const std::string kWatchdog =
    "2: [rank2]:[E1121 10:11:35.574914 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, "
    "NumelOut=262144, Timeout(ms)=600000) ran for 600034 milliseconds before timing out.\n";

std::string step_line(int64_t step) {
  return "0: completed step: " + std::to_string(step) +
         ", seconds: 1.000, TFLOP/s/device: 401.2, Tokens/s/device: 3411.0, total_weights: "
         "1048576, loss: 9.100\n";
}

uid_t owner_uid() {
  return ::geteuid() == 0 ? testing::kNobody : ::geteuid();
}
gid_t owner_gid() {
  return ::geteuid() == 0 ? testing::kNogroup : ::getegid();
}

class LiveLoop : public ::testing::Test {
 protected:
  LiveLoop()
      : cfg(testing::test_config(dir.path(), "n1", "HangStallMin=60\nHangStallFactor=10\n")),
        node(cfg, loop) {
    ::setenv("SLURM_TRIAGE_DATADIR", SOURCE_DIR, 1);
    ::setenv("SLURM_TRIAGE_RULES_OVERRIDE", "", 1);
    testing::make_dirs(job_dir);
    testing::write_file(log, "");
    if (::geteuid() == 0) {
      // The job's owner writes its directory; the agent reads it only as that owner.
      EXPECT_EQ(::chown(job_dir.c_str(), owner_uid(), owner_gid()), 0);
      EXPECT_EQ(::chown(log.c_str(), owner_uid(), owner_gid()), 0);
    }
    loop_thread = std::thread([this] { loop.run(); });
    on_loop([this] {
      node.open("boot-a");
      register_job();
    });
  }
  ~LiveLoop() override {
    on_loop([this] { monitors.clear(); });
    loop.stop();
    loop_thread.join();
  }

  void on_loop(const std::function<void()>& fn) {
    std::promise<void> done;
    ASSERT_TRUE(loop.post([&] {
      fn();
      done.set_value();
    }));
    done.get_future().wait();
  }

  // The monitor's counters, read on the loop that writes them (as /metrics does).
  LiveMonitor::Stats stats_of(const LiveMonitor& m) {
    LiveMonitor::Stats copy;
    on_loop([&] { copy = m.stats(); });
    return copy;
  }

  // `prolog` false: only the batch task's start arrives (Slurm did not run the prolog again for a
  // job it requeued onto this node).
  void register_job(const std::string& on_hang = "cancel", int requeue_max = 0,
                    bool prolog = true) {
    const std::string a = std::to_string(restarts);
    const nlohmann::json owner = {{"uid", owner_uid()},        {"gid", owner_gid()},
                                  {"mode", "basic"},           {"on_hang", on_hang},
                                  {"hang_action", "allow"},    {"time_usec", started},
                                  {"restart_count", restarts}, {"requeue_max", requeue_max}};
    if (prolog) {
      node.jobs().apply(parse_lifecycle(testing::lifecycle("job_start", kJob, "m1-" + a, owner)),
                        started);
    }
    node.jobs().apply(parse_lifecycle(testing::lifecycle(
                          "task_start", kJob, "m2-" + a,
                          {{"step", "batch"}, {"task", 0}, {"pid", 77}, {"time_usec", started}})),
                      started);
  }

  JobFacts facts() const {
    JobFacts f;
    f.job_id = kJob;
    f.name = job_name;
    f.uid = owner_uid();
    f.gid = owner_gid();
    f.state = state;
    f.work_dir = job_dir;
    f.stdout_path = log;
    f.nodes = nodes;
    f.batch_host = "n1";
    f.start_time = started / kSec;
    f.restart_count = restarts;
    f.time_limit_sec = 4 * 3600;
    f.gpus = 8;
    f.admin_comment = "jobstats:1";
    f.requeue_allowed = requeue_allowed;
    f.mode = "basic";
    return f;
  }

  LiveMonitor& new_monitor() {
    LiveMonitor::Hooks h;
    h.offload = [](const std::function<std::function<void()>()>& work) { work()(); };
    h.load_job = [this](uint64_t, std::string&) {
      ++loads;
      if (shown_after && loads > shown_after->first)
        return std::optional<JobFacts>(shown_after->second);
      return std::optional<JobFacts>(facts());
    };
    h.run_command = [this](const std::vector<std::string>& argv) {
      commands.push_back(argv);
      if (argv[0] == "scancel" && failing_cancels > 0) {
        --failing_cancels;
        return SlurmCommandResult{false, "", "scancel: error: Socket timed out"};
      }
      return SlurmCommandResult{true, "", ""};
    };
    h.own_evidence = [](const JobRecord&, int64_t, int64_t) {
      NodeEvidence n;
      n.host = "n1";
      return n;
    };
    if (peer_events) {
      h.remote_evidence = [this](const JobFacts& f, int64_t, int64_t now) {
        ++remote_asked;
        RemoteEvidence r;
        for (const std::string& n : f.nodes) {
          if (n == "n1") continue;
          NodeEvidence peer;
          peer.host = n;
          peer.events = *peer_events;
          for (KernelEvent& e : peer.events)
            e.time_usec = e.last_usec = now - kSec;
          r.peers.push_back(std::move(peer));
        }
        return r;
      };
    }
    monitors.push_back(std::make_unique<LiveMonitor>(cfg, loop, node, std::move(h)));
    monitors.back()->load_catalog();
    return *monitors.back();
  }

  // A tick on a node whose wall and monotonic clocks read the same.
  void tick(LiveMonitor& m, int64_t at) { tick(m, LiveInstant{at, at}); }
  void tick(LiveMonitor& m, const LiveInstant& at) {
    on_loop([&] { m.tick(at); });
  }

  void append(const std::string& text) {
    const UniqueFd fd(::open(log.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC));
    ASSERT_TRUE(fd);
    EXPECT_EQ(::write(fd.get(), text.data(), text.size()), static_cast<ssize_t>(text.size()));
  }

  // Steps [0, n) printed one a second from `from`, each read by the poll of that second; the last
  // one's time.
  int64_t steps_every_second(LiveMonitor& m, int n, int64_t from = kT0) {
    for (int s = 0; s < n; ++s) {
      append(step_line(s));
      tick(m, from + s * kSec);
    }
    return from + (n - 1) * kSec;
  }

  // --triage-on-hang=requeue --triage-requeue=1 on a job that steps for 30 s and then hangs: the
  // hang path requeues it at twice the threshold. Its last step's time.
  int64_t requeued_after_30_steps(LiveMonitor& m) {
    on_loop([this] { register_job("requeue", 1); });
    requeue_allowed = true;
    const int64_t last = steps_every_second(m, 30);
    tick(m, last + 125 * kSec);
    return last;
  }

  // The requeued first attempt's epilog reaches this node (its job_end, with `fields`).
  void first_attempt_ended(int64_t last, nlohmann::json fields = nlohmann::json::object()) {
    fields["time_usec"] = last;
    on_loop([&] {
      node.jobs().apply(parse_lifecycle(testing::lifecycle("job_end", kJob, "e0", fields)),
                        last + 126 * kSec);
    });
  }

  // The record of the current attempt (or of attempt `restart_count`).
  LiveRecord record(LiveMonitor& m, std::optional<int> restart_count = std::nullopt) {
    std::optional<LiveRecord> r;
    on_loop([&] { r = m.record(kJob, restart_count.value_or(restarts)); });
    return r.value_or(LiveRecord{});
  }

  // The pid of the (fake) analyzer run that left its record in the job dir, when one did.
  std::optional<pid_t> analyzer_pid() const {
    const std::string prefix = "analyzer-" + std::to_string(kJob) + "-";
    for (const auto& e : std::filesystem::directory_iterator(job_dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".json")
        return static_cast<pid_t>(std::stol(name.substr(prefix.size())));
    }
    return std::nullopt;
  }

  // The interim report runs the (fake) analyzer, which leaves how it was run in the job dir.
  std::optional<nlohmann::json> analyzer_run() const {
    for (const auto& e : std::filesystem::directory_iterator(job_dir)) {
      const std::string name = e.path().filename().string();
      if (name.rfind("analyzer-" + std::to_string(kJob) + "-", 0) == 0) {
        auto j = nlohmann::json::parse(testing::read_file(e.path().string()), nullptr, false);
        if (j.is_object() && j.contains("evidence")) return j;
      }
    }
    return std::nullopt;
  }

  TempDir dir{"live-loop"};
  std::string job_dir = dir / "job";
  std::string log = dir / "job/slurm-4242.out";
  AgentConfig cfg;
  EventLoop loop;
  NodeState node;
  std::thread loop_thread;
  std::vector<std::unique_ptr<LiveMonitor>> monitors;
  std::vector<std::vector<std::string>> commands;
  std::string state = "RUNNING";
  bool requeue_allowed = false;
  std::vector<std::string> nodes{"n1"};
  std::string job_name = "llama";  // "hang": the (fake) analyzer never ends
  // Set: the other nodes are asked, and each reports these kernel events (stamped just now).
  std::optional<std::vector<KernelEvent>> peer_events;
  int remote_asked = 0;
  // The attempt Slurm runs: its restart count and start (usec).
  int restarts = 0;
  int64_t started = kT0;
  // Set: after this many load_job calls, slurmctld shows these facts instead.
  std::optional<std::pair<int, JobFacts>> shown_after;
  int loads = 0;
  int failing_cancels = 0;  // scancel fails this many times
};

TEST_F(LiveLoop, AJobThatStopsPrintingStepsIsFlaggedCommentedReportedThenCancelled) {
  LiveMonitor& m = new_monitor();
  ASSERT_TRUE(m.enabled());
  const int64_t last = steps_every_second(m, 30);
  EXPECT_EQ(m.followed(), 1U);
  tick(m, last + 55 * kSec);
  EXPECT_EQ(record(m).flagged_usec, 0) << "inside the 60 s threshold";
  EXPECT_TRUE(commands.empty());

  tick(m, last + 65 * kSec);
  const LiveRecord flagged = record(m);
  EXPECT_EQ(flagged.flagged_usec, last + 65 * kSec);
  EXPECT_EQ(flagged.step, 29);
  EXPECT_EQ(flagged.step_line, 30);
  EXPECT_EQ(flagged.action, "notify");  // cancel waits: no node fact, not yet 2x the threshold
  EXPECT_NE(flagged.action_reason.find("waits for a node fact"), std::string::npos)
      << flagged.action_reason;
  ASSERT_EQ(commands.size(), 1U);
  EXPECT_EQ(commands[0], (std::vector<std::string>{"scontrol", "update", "JobId=4242",
                                                   "AdminComment=jobstats:1 triage=hang;flagged=" +
                                                       format_utc(last + 65 * kSec) + ";step=29"}));
  EXPECT_EQ(stats_of(m).hangs, 1U);
  EXPECT_GT(stats_of(m).stalled_gpu_hours, 0.0);

  // The interim report: the analyzer, run as the owner, got the record with the evidence.
  ASSERT_TRUE(testing::eventually([&] { return analyzer_run().has_value(); }));
  const nlohmann::json run = *analyzer_run();
  EXPECT_EQ(run.value("uid", -1), static_cast<int>(owner_uid()));
  const nlohmann::json& ev = run["evidence"];
  EXPECT_EQ(ev["job"]["state"], "RUNNING");
  EXPECT_EQ(ev["live"]["flagged_usec"], last + 65 * kSec);
  EXPECT_EQ(ev["live"]["step"], 29);
  ASSERT_TRUE(testing::eventually([&] { return stats_of(m).interim_reports == 1; }));

  // Twice the threshold without a node fact: the cancel the user asked for, once.
  tick(m, last + 125 * kSec);
  ASSERT_EQ(commands.size(), 2U);
  EXPECT_EQ(commands[1], (std::vector<std::string>{"scancel", "4242"}));
  tick(m, last + 130 * kSec);
  EXPECT_EQ(commands.size(), 2U);
  const LiveRecord cancelled = record(m);
  EXPECT_EQ(cancelled.action, "cancel");
  EXPECT_EQ(cancelled.action_usec, last + 125 * kSec);
  EXPECT_TRUE(cancelled.action_error.empty());
  EXPECT_EQ(stats_of(m).actions.at("cancel"), 1U);
}

// Issue 28 part 3, live: PyTorch's watchdog fires minutes after the stall was flagged; its lines
// bring the interim report back so that its "Hang origin:" line is worked out from them.
TEST_F(LiveLoop, WatchdogLinesAfterTheFlagWriteTheInterimReportAgain) {
  on_loop([this] { register_job("notify"); });
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  ASSERT_NE(record(m).flagged_usec, 0);
  ASSERT_TRUE(testing::eventually([&] { return stats_of(m).interim_reports == 1; }));

  append(
      "0: [rank0]:[E1206 18:44:12.755468433 ProcessGroupNCCL.cpp:1664] [PG 0 Rank 0] "
      "Exception (either an error or timeout) detected by watchdog at work: 41, last enqueued "
      "NCCL work: 41, last completed NCCL work: 40.\n");
  tick(m, last + 70 * kSec);
  ASSERT_TRUE(testing::eventually([&] { return stats_of(m).interim_reports == 2; }));

  append("0: an ordinary line\n");
  tick(m, last + 75 * kSec);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(stats_of(m).interim_reports, 2U) << "no watchdog line, no new report";
}

TEST_F(LiveLoop, AGpuResetOnNodeTwoOfTwoCorroboratesTheStallAndTheCancelGoesAheadAtOnce) {
  nodes = {"n1", "n2"};
  KernelEvent reset;
  reset.kind = "gpu-reset";
  reset.severity = Severity::kCritical;
  reset.summary = "amdgpu: GPU reset begin";
  peer_events = std::vector<KernelEvent>{reset};
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  const LiveRecord r = record(m);
  EXPECT_EQ(r.flagged_usec, last + 65 * kSec);
  ASSERT_EQ(r.corroboration.size(), 1U);
  EXPECT_EQ(r.corroboration[0], "n2: kernel gpu-reset: amdgpu: GPU reset begin");
  EXPECT_EQ(r.action, "cancel");  // corroborated: no wait for twice the threshold
  ASSERT_EQ(commands.size(), 2U);
  EXPECT_EQ(commands[1], (std::vector<std::string>{"scancel", "4242"}));
  EXPECT_EQ(remote_asked, 1);
  // The interim report shows the other node's evidence too.
  ASSERT_TRUE(testing::eventually([&] { return analyzer_run().has_value(); }));
  const nlohmann::json ev = (*analyzer_run())["evidence"];
  ASSERT_EQ(ev["nodes"].size(), 2U);
  EXPECT_EQ(ev["nodes"][1]["host"], "n2");
}

TEST_F(LiveLoop, QuietOtherNodesAreAskedAtMostOnceAMinuteWhileTheJobStaysStalled) {
  nodes = {"n1", "n2", "n3"};
  peer_events = std::vector<KernelEvent>{};
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);  // flagged; the cancel waits for a node fact or 2x
  EXPECT_EQ(record(m).action, "notify");
  for (int s = 70; s < 120; s += 5)
    tick(m, last + s * kSec);
  EXPECT_EQ(remote_asked, 1);
  EXPECT_EQ(record(m).action, "notify");
  tick(m, last + 125 * kSec);  // past 2x the threshold, a minute on: asked again, then cancelled
  EXPECT_EQ(remote_asked, 2);
  EXPECT_EQ(record(m).action, "cancel");
}

TEST_F(LiveLoop, AJobThatResumesAndStallsAgainIsFlaggedASecondTime) {
  on_loop([this] { register_job("notify"); });
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  ASSERT_EQ(record(m).stalls, 1);
  // Steps again, one a second, for 60 s: the flag is marked resumed.
  int64_t t = last + 66 * kSec;
  for (int s = 30; s < 90; ++s, t += kSec) {
    append(step_line(s));
    tick(m, t);
  }
  EXPECT_NE(record(m).resumed_usec, 0);
  // Silent again. The job survived a 66 s pause, so that is its floor now.
  tick(m, t + 60 * kSec);
  EXPECT_EQ(record(m).stalls, 1);
  tick(m, t + 75 * kSec);
  const LiveRecord again = record(m);
  EXPECT_EQ(again.stalls, 2);
  EXPECT_EQ(again.step, 89);
  EXPECT_EQ(again.resumed_usec, 0);
  ASSERT_EQ(again.earlier_stalls.size(), 1U);
  EXPECT_EQ(again.earlier_stalls[0].step, 29);
  EXPECT_EQ(stats_of(m).hangs, 2U);
  ASSERT_EQ(commands.size(), 2U);  // the AdminComment, once per stall
  EXPECT_NE(commands[1].back().find("step=89"), std::string::npos) << commands[1].back();
  tick(m, t + 80 * kSec);
  EXPECT_EQ(stats_of(m).hangs, 2U);
}

TEST_F(LiveLoop, AnInterimReportStillRunningWhenTheFinalAnalysisStartsIsKilledFirst) {
  job_name = "hang";  // the interim report's analyzer never ends
  on_loop([this] { register_job("notify"); });
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  ASSERT_TRUE(testing::eventually([&] { return analyzer_pid().has_value(); }));
  const pid_t interim = *analyzer_pid();
  ASSERT_EQ(::kill(interim, 0), 0) << "the interim report is still being written";
  // The job ended; its final analysis takes the record over.
  std::optional<LiveRecord> handed;
  on_loop([&] { handed = m.hand_over(kJob, 0); });
  ASSERT_TRUE(handed);
  EXPECT_EQ(handed->flagged_usec, last + 65 * kSec);
  errno = 0;
  EXPECT_EQ(::kill(interim, 0), -1) << "killed and reaped before the final report starts";
  EXPECT_EQ(errno, ESRCH);
  EXPECT_EQ(stats_of(m).interim_reports, 0U);
}

TEST_F(LiveLoop, ARequeueSlurmWouldRefuseIsOnlyRecorded) {
  on_loop([this] { register_job("requeue"); });  // the same job, registered asking for requeue
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 125 * kSec);
  ASSERT_EQ(commands.size(), 1U);  // the AdminComment only
  EXPECT_EQ(commands[0][1], "update");
  const LiveRecord r = record(m);
  EXPECT_EQ(r.action, "notify");
  EXPECT_NE(r.action_reason.find("Slurm requeues only batch jobs that allow requeue"),
            std::string::npos)
      << r.action_reason;
}

TEST_F(LiveLoop, ARequeueableJobIsRequeuedAfterTwiceTheThreshold) {
  on_loop([this] { register_job("requeue"); });
  requeue_allowed = true;
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 125 * kSec);  // flagged and, at 2x the threshold already, requeued
  ASSERT_EQ(commands.size(), 2U);
  EXPECT_EQ(commands[1], (std::vector<std::string>{"scontrol", "requeue", "4242"}));
  EXPECT_EQ(record(m).action, "requeue");
  EXPECT_EQ(stats_of(m).actions.at("requeue"), 1U);
}

TEST_F(LiveLoop, AJobThatIsNotRunningAnyMoreIsNotFlagged) {
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  state = "SUSPENDED";
  tick(m, last + 65 * kSec);
  EXPECT_EQ(record(m).flagged_usec, 0);
  EXPECT_TRUE(commands.empty());
}

TEST_F(LiveLoop, AFailureLineIsAnEarlyWarningAtOnceAndTheJobIsLeftAlone) {
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 5);
  append(kWatchdog);
  tick(m, last + kSec);
  const LiveRecord r = record(m);
  ASSERT_EQ(r.warnings.size(), 1U);
  EXPECT_EQ(r.warnings[0].line, 6);
  EXPECT_EQ(r.warnings[0].text + "\n", kWatchdog);
  EXPECT_EQ(r.flagged_usec, 0);
  EXPECT_TRUE(commands.empty());
  EXPECT_EQ(stats_of(m).early_warnings, 1U);
  // Saved at once: the spool holds it.
  const auto saved = latest_live_entry(node.spool().read_job(kJob));
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->record.warnings.size(), 1U);
}

// Issue 28: a job that asked for --triage-on-hang=cancel (the admin allowing it) keeps stepping
// but 30% slower from step 220 on: its pace warning is raised, recorded, counted and shown in an
// interim report of the running job, and nothing is flagged, commented or cancelled; the warning
// stands while the slow pace lasts.
TEST_F(LiveLoop, AJobThatSlowsDownButKeepsSteppingIsWarnedAboutAndNeverCancelled) {
  LiveMonitor& m = new_monitor();
  int64_t now = kT0;
  for (int64_t batch = 0; batch < 40; ++batch) {
    std::string text;
    for (int64_t s = batch * 10; s < batch * 10 + 10; ++s) {
      const double sec = s >= 220 ? 13.0 : 10.0;
      text += "0: completed step: " + std::to_string(s) + ", seconds: " + std::to_string(sec) +
              ", TFLOP/s/device: 401.2, loss: 9.100\n";
      now += static_cast<int64_t>(sec * kSec);
    }
    append(text);
    tick(m, now);
    if (batch == 20) EXPECT_EQ(record(m).pace_warning, "") << "warned before the slowdown";
  }
  const LiveRecord r = record(m);
  EXPECT_NE(r.pace_warning.find("Pace (live): slowdown: step time 10 s -> 13 s since step 220"),
            std::string::npos)
      << r.pace_warning;
  EXPECT_GT(r.pace_warning_usec, kT0);
  EXPECT_EQ(r.flagged_usec, 0);
  EXPECT_EQ(r.action, "");
  EXPECT_TRUE(commands.empty()) << "no AdminComment, no scancel";
  EXPECT_EQ(stats_of(m).pace_warnings, 1U);  // raised once, never flapped
  EXPECT_EQ(stats_of(m).hangs, 0U);
  EXPECT_EQ(m.pace_warned(), 1U);
  // The interim report of the running job, written once (its numbers moving are no news), run as
  // the owner with the warning in the evidence.
  ASSERT_TRUE(testing::eventually([&] { return stats_of(m).interim_reports == 1; }));
  ASSERT_TRUE(analyzer_run().has_value());
  const nlohmann::json run = *analyzer_run();
  EXPECT_EQ(run.value("uid", -1), static_cast<int>(owner_uid()));
  EXPECT_EQ(run["evidence"]["job"]["state"], "RUNNING");
  EXPECT_EQ(run["evidence"]["live"]["pace_warning"], r.pace_warning);
  EXPECT_EQ(run["evidence"]["live"].value("flagged_usec", int64_t{0}), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(stats_of(m).interim_reports, 1U);
  // Saved with the record: the job-end evidence and a restarted agent have it.
  const auto saved = latest_live_entry(node.spool().read_job(kJob));
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->record.pace_warning, r.pace_warning);
}

TEST_F(LiveLoop, ARestartedAgentResumesFromTheSavedOffsetWithTheSameRecord) {
  LiveMonitor& first = new_monitor();
  const int64_t last = steps_every_second(first, 30);
  tick(first, last + 65 * kSec);  // flagged, saved
  const uint64_t size = std::filesystem::file_size(log);

  LiveMonitor& second = new_monitor();
  tick(second, last + 70 * kSec);
  const LiveRecord r = record(second);
  EXPECT_EQ(r.flagged_usec, last + 65 * kSec);
  const auto saved = latest_live_entry(node.spool().read_job(kJob));
  ASSERT_TRUE(saved);
  EXPECT_EQ(saved->follow.offset, size);
  // Nothing is flagged twice after the restart; the next step line numbers on.
  append(kWatchdog);
  tick(second, last + 75 * kSec);
  ASSERT_EQ(record(second).warnings.size(), 1U);
  EXPECT_EQ(record(second).warnings[0].line, 31);
  EXPECT_EQ(second.stats().hangs, 0U);
}

TEST_F(LiveLoop, AnEndedJobIsNoLongerFollowedAndItsRecordStaysForTheFinalReport) {
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  on_loop([&] {
    node.jobs().apply(
        parse_lifecycle(testing::lifecycle("job_end", kJob, "m3", {{"time_usec", last}})), last);
  });
  tick(m, last + 70 * kSec);
  EXPECT_EQ(m.followed(), 0U);
  EXPECT_EQ(record(m).flagged_usec, last + 65 * kSec);
}

// The node's monotonic clock counts from its boot, nowhere near the wall clock.
constexpr int64_t kBoot = 7000 * kSec;
constexpr int64_t kHour = 3600 * kSec;

// "2026-11-28 02:00:00,000": a stamp without a zone, as Python's logging prints it.
std::string naive(int64_t usec) {
  std::string s = format_utc(usec, true);
  s[10] = ' ';
  s.resize(23);
  s[19] = ',';
  return s;
}

std::string stamped_step(int64_t stamp_usec, int64_t step) {
  return "0: [" + naive(stamp_usec) + "] completed step: " + std::to_string(step) +
         ", seconds: 1.000, loss: 9.100\n";
}

TEST_F(LiveLoop, AJobWithTzEightHoursWestOfTheNodeIsNotCancelledWhileItSteps) {
  // issue 30: TZ=America/Los_Angeles on a UTC node; it asked for --triage-on-hang=cancel.
  LiveMonitor& m = new_monitor();
  for (int s = 0; s < 90; ++s) {
    const LiveInstant now{kT0 + s * kSec, kBoot + s * kSec};
    append(stamped_step(now.wall_usec - 8 * kHour, s));
    tick(m, now);
  }
  EXPECT_EQ(record(m).flagged_usec, 0);
  EXPECT_TRUE(commands.empty()) << commands[0][0];
  // Its real silence is still seen: flagged 65 s after its last step.
  tick(m, LiveInstant{kT0 + 154 * kSec, kBoot + 154 * kSec});
  EXPECT_EQ(record(m).flagged_usec, kT0 + 154 * kSec);
  EXPECT_EQ(record(m).step, 89);
}

TEST_F(LiveLoop, TheNodesWallClockSteppingForwardSixHoursIsNotASilence) {
  LiveMonitor& m = new_monitor();
  int64_t wall = kT0;
  for (int s = 0; s < 90; ++s, wall += kSec) {
    if (s == 45) wall += 6 * kHour;  // this node's clock stepped (NTP, an admin's date -s)
    // The job's lines: bare, or stamped by a clock that did not step (with and without a zone).
    const int64_t job_clock = kT0 + s * kSec;
    append(s % 3 == 0   ? step_line(s)
           : s % 3 == 1 ? stamped_step(job_clock, s)
                        : "0: [" + format_utc(job_clock) + "] completed step: " +
                              std::to_string(s) + ", seconds: 1.000, loss: 9.100\n");
    tick(m, LiveInstant{wall, kBoot + s * kSec});
  }
  EXPECT_EQ(record(m).flagged_usec, 0);
  EXPECT_TRUE(commands.empty());
  tick(m, LiveInstant{wall + 64 * kSec, kBoot + 154 * kSec});
  const LiveRecord r = record(m);
  EXPECT_EQ(r.flagged_usec, wall + 64 * kSec) << "the record shows the wall clock";
  // Its last line names its zone, by a clock 6 h behind this node's: dated back no further than
  // the read before (1 s), never by the 6 h.
  EXPECT_DOUBLE_EQ(r.silence_s, 66);
}

TEST_F(LiveLoop, ARequeuedAttemptIsFollowedFlaggedAndReportedAsItself) {
  // A job that always hangs.
  LiveMonitor& m = new_monitor();
  const int64_t last = requeued_after_30_steps(m);
  ASSERT_EQ(commands.size(), 2U);
  EXPECT_EQ(commands[1], (std::vector<std::string>{"scontrol", "requeue", "4242"}));
  EXPECT_NE(record(m).action_reason.find("(requeue 1 of 1)"), std::string::npos)
      << record(m).action_reason;

  // Slurm requeued it: the first attempt's epilog, then the second attempt starts on this node
  // (its output file starts over).
  first_attempt_ended(last, {{"restart_count", 0}});
  tick(m, last + 130 * kSec);
  EXPECT_EQ(m.followed(), 0U);
  restarts = 1;
  started = last + 200 * kSec;
  testing::write_file(log, "");
  on_loop([this] { register_job("requeue", 1); });
  const int64_t last2 = steps_every_second(m, 20, started);
  EXPECT_EQ(record(m).flagged_usec, 0) << "a fresh record, not the first attempt's";
  EXPECT_EQ(record(m).action, "");
  tick(m, last2 + 65 * kSec);
  const LiveRecord flagged = record(m);
  EXPECT_EQ(flagged.flagged_usec, last2 + 65 * kSec) << "flagged as itself";
  EXPECT_EQ(flagged.step, 19);
  // Twice the threshold: Slurm shows Restarts=1, the one requeue allowed is used: cancelled.
  tick(m, last2 + 125 * kSec);
  ASSERT_EQ(commands.size(), 4U);
  EXPECT_EQ(commands[3], (std::vector<std::string>{"scancel", "4242"}));
  const LiveRecord second = record(m);
  EXPECT_EQ(second.action, "cancel");
  EXPECT_NE(second.action_reason.find("requeue refused: Slurm shows the job requeued 1 time(s)"),
            std::string::npos)
      << second.action_reason;

  // Each attempt's final report gets its own record.
  std::optional<LiveRecord> first_end;
  std::optional<LiveRecord> second_end;
  on_loop([&] {
    first_end = m.hand_over(kJob, 0);
    second_end = m.hand_over(kJob, 1);
  });
  ASSERT_TRUE(first_end && second_end);
  EXPECT_EQ(first_end->action, "requeue");
  EXPECT_EQ(first_end->step, 29);
  EXPECT_EQ(second_end->action, "cancel");
  EXPECT_EQ(second_end->step, 19);
  std::optional<LiveRecord> none;
  on_loop([&] { none = m.hand_over(kJob, 2); });
  EXPECT_FALSE(none) << "no attempt 2 ran here";
}

TEST_F(LiveLoop, ARequeuedAttemptWhosePrologSlurmDidNotRunAgainIsStillANewAttempt) {
  LiveMonitor& m = new_monitor();
  const int64_t last = requeued_after_30_steps(m);
  first_attempt_ended(last);
  tick(m, last + 130 * kSec);
  restarts = 1;
  started = last + 200 * kSec;
  testing::write_file(log, "");
  on_loop([this] { register_job("requeue", 1, /*prolog=*/false); });
  const int64_t last2 = steps_every_second(m, 20, started);
  tick(m, last2 + 65 * kSec);
  EXPECT_EQ(record(m).step, 19) << "flagged as itself";
  std::optional<int> learnt;
  on_loop([&] { learnt = node.jobs().find(kJob)->restart_count; });
  EXPECT_EQ(learnt, 1) << "the attempt, from slurmctld, for the job-end evidence";
}

TEST_F(LiveLoop, AJobEndAndTheNextAttemptsStartBetweenTwoPollsCloseTheFirstAttemptsRecord) {
  LiveMonitor& m = new_monitor();
  const int64_t last = requeued_after_30_steps(m);
  // Within 5 s: the epilog, then Slurm starts the job again here without its prolog.
  first_attempt_ended(last);
  restarts = 1;
  started = last + 128 * kSec;
  testing::write_file(log, "");
  on_loop([this] { register_job("requeue", 1, /*prolog=*/false); });
  tick(m, last + 130 * kSec);  // the first attempt's follower stops
  const int64_t last2 = steps_every_second(m, 20, last + 131 * kSec);
  tick(m, last2 + 65 * kSec);
  const LiveRecord second = record(m, 1);
  EXPECT_EQ(second.step, 19) << "flagged as itself";
  EXPECT_EQ(second.stalls, 1);
  EXPECT_EQ(record(m, 0).action, "requeue") << "the first attempt's record is its own";
}

TEST_F(LiveLoop, AStallOfAnAttemptSlurmNoLongerRunsTouchesNothing) {
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  // Meanwhile the user requeued it and it runs again (its job_end never reached this node).
  JobFacts again = facts();
  again.restart_count = 1;
  again.start_time = (last + 10 * kSec) / kSec;
  shown_after = {loads, again};
  tick(m, last + 125 * kSec);
  EXPECT_TRUE(commands.empty()) << commands[0][0];
  const LiveRecord r = record(m, 0);
  EXPECT_EQ(r.flagged_usec, 0);
  EXPECT_NE(r.action_reason.find("nothing done: slurmctld shows another attempt of the job "
                                 "(Restarts=1"),
            std::string::npos)
      << r.action_reason;
  // The attempt Slurm runs is followed afresh.
  restarts = 1;
  tick(m, last + 130 * kSec);
  tick(m, last + 135 * kSec);
  EXPECT_EQ(m.followed(), 1U);
  EXPECT_EQ(record(m, 1).flagged_usec, 0);
}

TEST_F(LiveLoop, ACancelIsRunOnlyIfSlurmStillShowsTheFlaggedAttemptRightBeforeIt) {
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  // The stall is confirmed (RUNNING, this attempt); by the time the scancel would run, the job is
  // pending again after someone's requeue.
  JobFacts requeued = facts();
  requeued.state = "PENDING";
  requeued.restart_count = 1;
  shown_after = {loads + 1, requeued};
  tick(m, last + 125 * kSec);
  ASSERT_EQ(commands.size(), 1U);  // the AdminComment; no scancel
  EXPECT_EQ(commands[0][1], "update");
  const LiveRecord r = record(m, 0);
  EXPECT_EQ(r.action, "cancel");
  EXPECT_EQ(r.action_result, "not-done");
  EXPECT_NE(r.action_error.find("not done: slurmctld shows another attempt"), std::string::npos)
      << r.action_error;
  EXPECT_EQ(stats_of(m).actions_not_done, 1U);
  EXPECT_EQ(stats_of(m).actions.count("cancel"), 0U);
}

TEST_F(LiveLoop, AFailedScancelIsRecordedFailedAndTriedThreeTimesInAll) {
  failing_cancels = 3;
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 125 * kSec);
  ASSERT_EQ(commands.size(), 2U);
  LiveRecord r = record(m);
  EXPECT_EQ(r.action, "cancel");
  EXPECT_EQ(r.action_result, "retry");
  EXPECT_EQ(r.action_error, "scancel 4242: scancel: error: Socket timed out (try 1 of 3)");
  tick(m, last + 130 * kSec);
  EXPECT_EQ(commands.size(), 2U) << "the next try waits 10 s";
  tick(m, last + 135 * kSec);
  EXPECT_EQ(commands.size(), 3U);
  tick(m, last + 150 * kSec);
  EXPECT_EQ(commands.size(), 3U) << "then 20 s";
  tick(m, last + 155 * kSec);
  ASSERT_EQ(commands.size(), 4U);
  EXPECT_EQ(commands[3], (std::vector<std::string>{"scancel", "4242"}));
  for (int s = 160; s < 400; s += 5)
    tick(m, last + s * kSec);
  EXPECT_EQ(commands.size(), 4U) << "never more than three tries";
  r = record(m);
  EXPECT_EQ(r.action_result, "failed");
  EXPECT_EQ(r.action_tries, 3);
  EXPECT_NE(r.action_error.find("(try 3 of 3)"), std::string::npos) << r.action_error;
  EXPECT_EQ(r.action_usec, last + 125 * kSec) << "when it was first issued";
  EXPECT_EQ(stats_of(m).action_failures, 3U);
  EXPECT_EQ(stats_of(m).actions.count("cancel"), 0U) << "a failed cancel is not a cancel";
}

TEST_F(LiveLoop, AScancelThatWorksOnItsSecondTryIsDone) {
  failing_cancels = 1;
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 125 * kSec);
  tick(m, last + 135 * kSec);
  ASSERT_EQ(commands.size(), 3U);
  const LiveRecord r = record(m);
  EXPECT_EQ(r.action_result, "done");
  EXPECT_EQ(r.action_tries, 2);
  EXPECT_TRUE(r.action_error.empty());
  EXPECT_EQ(stats_of(m).actions.at("cancel"), 1U);
}

TEST_F(LiveLoop, AnAgentRestartedBetweenTwoTriesTriesAgain) {
  failing_cancels = 1;
  LiveMonitor& first = new_monitor();
  const int64_t last = steps_every_second(first, 30);
  tick(first, last + 125 * kSec);
  ASSERT_EQ(record(first).action_result, "retry");
  LiveMonitor& second = new_monitor();
  tick(second, last + 126 * kSec);  // set up: the saved record of this attempt is resumed
  tick(second, last + 127 * kSec);
  ASSERT_EQ(commands.size(), 3U);
  EXPECT_EQ(commands[2], (std::vector<std::string>{"scancel", "4242"}));
  EXPECT_EQ(record(second).action_result, "done");
}

TEST_F(LiveLoop, AWallClockStepWhileAJobIsStalledAddsNoGpuHours) {
  on_loop([this] { register_job("notify"); });
  LiveMonitor& m = new_monitor();
  const int64_t last = steps_every_second(m, 30);
  tick(m, last + 65 * kSec);
  const double at_flag = stats_of(m).stalled_gpu_hours;
  EXPECT_DOUBLE_EQ(at_flag, 8 * 65.0 / 3600);  // 8 GPUs since the last step
  tick(m, LiveInstant{last + 70 * kSec + 6 * kHour, last + 70 * kSec});
  EXPECT_NEAR(stats_of(m).stalled_gpu_hours - at_flag, 8 * 5.0 / 3600, 1e-9) << "5 s, not 6 h";
}

}  // namespace
}  // namespace triage::agent
