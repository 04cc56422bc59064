// The job-end hand-over with two agents on loopback as two nodes: the batch host gathers both
// nodes' evidence over munge-authenticated HTTP and runs the (fake) analyzer as the job's owner.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "agent/job_end/job_end.h"
#include "common/text.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::append_file;
using testing::eventually;
using testing::field;
using testing::iso_line;
using testing::kNobody;
using testing::kNogroup;
using testing::lifecycle;
using testing::make_event;
using testing::metric_value;
using testing::MungeDaemon;
using testing::read_file;
using testing::socket_json;
using testing::TempDir;
using testing::write_file;

namespace fs = std::filesystem;

std::vector<nlohmann::json> analyzer_records(const std::string& dir, uint64_t job) {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("analyzer-" + std::to_string(job) + "-", 0) == 0 &&
        entry.path().extension() == ".json") {
      out.push_back(nlohmann::json::parse(read_file(entry.path().string()), nullptr, false));
    }
  }
  return out;
}

std::vector<nlohmann::json> summaries(const std::string& spool, uint64_t job) {
  return testing::analysis_summaries(spool, job);
}

// Two nodes, node-a (the batch host) and node-b, a private munged, and a work dir the job's owner
// (nobody) can write.
class JobEnd : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(munge.ok()) << "munged did not start";
    work = scratch / "home/run";
    testing::make_dirs(work, 0777);
    for (AgentHarness* h : {&a, &b}) {
      h->config.munge_socket = munge.socket();
      h->options.peer_url = [this](const std::string& node) { return url(node); };
    }
  }
  // node-a first: an outcome it is still handing to node-b (on a worker) must find node-b there.
  void TearDown() override {
    a.stop();
    b.stop();
  }
  std::string url(const std::string& node) {
    if (node == "node-a") return "http://127.0.0.1:" + std::to_string(a.port());
    if (node == "node-b") return "http://127.0.0.1:" + std::to_string(b.port());
    return "http://127.0.0.1:1";  // a node whose agent is down
  }
  void start() {
    a.start();
    b.start();
  }
  // What the plugin sends for a job on `nodes` (node-a runs the batch step).
  void run_job(uint64_t job, const std::string& nodes, const std::string& name,
               const std::string& mode, int64_t start_usec) {
    const nlohmann::json facts = {{"uid", kNobody},
                                  {"gid", kNogroup},
                                  {"nodelist", nodes},
                                  {"mode", mode},
                                  {"time_usec", start_usec}};
    for (AgentHarness* h : {&a, &b}) {
      nlohmann::json m = facts;
      m["host"] = h->config.node_name;
      const nlohmann::json ack = socket_json(
          h->socket(),
          lifecycle("job_start", job, h->config.node_name + ":js:" + std::to_string(job), m));
      ASSERT_EQ(ack["ok"], true) << ack.dump();
    }
    ASSERT_EQ(socket_json(a.socket(), lifecycle("task_start", job, "a:ts:" + std::to_string(job),
                                                {{"step", "batch"},
                                                 {"task", 0},
                                                 {"pid", 1000 + job},
                                                 {"host", "node-a"},
                                                 {"time_usec", start_usec}}))["ok"],
              true);
    ASSERT_EQ(socket_json(b.socket(), lifecycle("task_start", job, "b:ts:" + std::to_string(job),
                                                {{"step", "0"},
                                                 {"task", 0},
                                                 {"rank", 1},
                                                 {"pid", 2000 + job},
                                                 {"host", "node-b"},
                                                 {"time_usec", start_usec}}))["ok"],
              true);
    ASSERT_EQ(socket_json(b.socket(), lifecycle("task_exit", job, "b:te:" + std::to_string(job),
                                                {{"step", "0"},
                                                 {"task", 0},
                                                 {"rank", 1},
                                                 {"pid", 2000 + job},
                                                 {"host", "node-b"},
                                                 {"wait_status", 9}}))["ok"],
              true);
    const nlohmann::json end = {{"uid", kNobody},
                                {"gid", kNogroup},
                                {"nodelist", nodes},
                                {"mode", mode},
                                {"wait_status", 9 << 8},
                                {"work_dir", work},
                                {"stdout_pattern", "outputs/%j-%x.log"},
                                {"job_name", name}};
    for (AgentHarness* h : {&b, &a}) {
      nlohmann::json m = end;
      m["host"] = h->config.node_name;
      ASSERT_EQ(socket_json(h->socket(),
                            lifecycle("job_end", job,
                                      h->config.node_name + ":je:" + std::to_string(job), m))["ok"],
                true);
    }
  }

  // What slurmctld says of a failed job of nobody's on `nodes`, batch step on node-a, that ran
  // around `t0`; its expanded StdOut is what the analyzer is pointed at.
  JobFacts failed_job(uint64_t id, const std::string& name, std::vector<std::string> nodes,
                      int64_t t0) const {
    JobFacts facts;
    facts.job_id = id;
    facts.name = name;
    facts.user = "nobody";
    facts.uid = kNobody;
    facts.gid = kNogroup;
    facts.state = "FAILED";
    facts.work_dir = work;
    facts.stdout_path = work + "/outputs/" + std::to_string(id) + "-" + name + ".log";
    facts.nodes = std::move(nodes);
    facts.batch_host = "node-a";
    facts.start_time = t0 / 1000000 - 5;
    facts.end_time = t0 / 1000000 + 60;
    return facts;
  }

  TempDir scratch{"jobend"};
  TempDir munge_dir{"munge"};
  MungeDaemon munge{munge_dir.path()};
  std::string work;
  AgentHarness a{"node-a", "node-a"};
  AgentHarness b{"node-b", "node-b"};
};

TEST_F(JobEnd, TheBatchHostRunsTheAnalysisAsTheOwnerWithEveryNodesEvidence) {
  start();
  const int64_t t0 = now_usec();
  a.slurm().set_job(failed_job(4242, "llama-70b", {"node-a", "node-b"}, t0));
  // node-b's kernel killed rank 1 for the job's cgroup.
  KernelEvent oom = make_event("boot-b:1912", "oom-kill", t0 + 1000);
  oom.job_id = 4242;
  oom.pid = 2000 + 4242;
  oom.cgroup = "/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0";
  oom.lines = {"Memory cgroup out of memory: Killed process 6242 (python3)"};
  ASSERT_TRUE(b.agent().ingest({oom}, "b-cursor"));
  run_job(4242, "node-a,node-b", "llama-70b", "full", t0);

  std::vector<nlohmann::json> records;
  ASSERT_TRUE(eventually([&] { return !(records = analyzer_records(work, 4242)).empty(); }));
  ASSERT_EQ(records.size(), 1u);
  const nlohmann::json& r = records[0];
  EXPECT_EQ(field(r, "argv"),
            (nlohmann::json{a.config.analyzer_path, "analyze", "--evidence", "-", "--write",
                            "--format", "json", "--stall-after", "900", "--mode", "full",
                            work + "/outputs/4242-llama-70b.log"}));
  EXPECT_EQ(field(r, "uid"), kNobody);
  EXPECT_EQ(field(r, "euid"), kNobody);
  EXPECT_EQ(field(r, "gid"), kNogroup);
  for (const auto& g : field(r, "groups"))
    EXPECT_NE(g.get<gid_t>(), 0u) << "root's groups were dropped";
  EXPECT_EQ(field(r, "cwd"), "/");

  const Evidence ev = evidence_from_json(r["evidence"], "stdin");
  EXPECT_EQ(ev.job.source, "slurmctld");
  EXPECT_EQ(ev.job.mode, "full") << "the mode comes from the epilog";
  EXPECT_TRUE(ev.report_path.empty()) << "no ReportPath configured: the analyzer places the report";
  ASSERT_EQ(ev.nodes.size(), 2u);
  EXPECT_EQ(ev.nodes[0].host, "node-a");
  EXPECT_EQ(ev.nodes[1].host, "node-b");
  EXPECT_TRUE(ev.nodes[1].reachable);
  ASSERT_EQ(ev.nodes[1].events.size(), 1u);
  EXPECT_EQ(ev.nodes[1].events[0].kind, "oom-kill");
  ASSERT_EQ(ev.nodes[1].tasks.size(), 1u);
  EXPECT_EQ(ev.nodes[1].tasks[0].signal, 9);
  EXPECT_TRUE(ev.nodes[0].events.empty()) << "node-b's OOM is in node-b's cgroup, not node-a's";

  // The report file was written as the owner.
  struct stat st {};
  ASSERT_EQ(::stat((work + "/triage-4242.md").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, kNobody);

  std::vector<nlohmann::json> sums;
  ASSERT_TRUE(eventually([&] { return !(sums = summaries(a.dir() + "/spool", 4242)).empty(); }));
  ASSERT_EQ(sums.size(), 1u);
  EXPECT_EQ(sums[0]["result"], "ok");
  EXPECT_EQ(sums[0]["status"], "failed");
  EXPECT_EQ(sums[0]["primary_class"], "oom-host");
  EXPECT_EQ(sums[0]["unreachable_nodes"].size(), 0u);
  ASSERT_EQ(::stat((a.dir() + "/spool/jobs/4242.jsonl").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  EXPECT_EQ(st.st_mode & 0777, 0600u) << "the summary stays root's";
  EXPECT_TRUE(summaries(b.dir() + "/spool", 4242).empty()) << "only the batch host analyses";
  EXPECT_EQ(
      metric_value(a.agent().metrics(), R"(triage_analyses_total{host="node-a",result="ok"})"), 1);
}

TEST_F(JobEnd, PeersAreReachedAtTheirNodeAddrFromOneLoadOfTheNodeTable) {
  // node-b's slurmd (and its agent) is reached on a fabric address that is not its name.
  a.options.peer_url = [this](const std::string& where) {
    return where == "10.1.0.2" ? url("node-b") : url("nowhere");
  };
  SlurmNodeState b_state;
  b_state.name = "node-b";
  b_state.state = "ALLOCATED";
  b_state.addr = "10.1.0.2";
  a.slurm().set_node(b_state);
  start();
  const int64_t t0 = now_usec();
  // node-c and node-d are not in slurmctld's node table (any more): they are tried by name.
  a.slurm().set_job(failed_job(4343, "wide", {"node-a", "node-b", "node-c", "node-d"}, t0));
  run_job(4343, "node-a,node-b", "wide", "basic", t0);

  std::vector<nlohmann::json> records;
  ASSERT_TRUE(eventually([&] { return !(records = analyzer_records(work, 4343)).empty(); }));
  const Evidence ev = evidence_from_json(records[0]["evidence"], "stdin");
  ASSERT_EQ(ev.nodes.size(), 4u);
  EXPECT_EQ(ev.nodes[1].host, "node-b") << "named as Slurm names it, reached at its NodeAddr";
  EXPECT_TRUE(ev.nodes[1].reachable) << ev.nodes[1].error;
  EXPECT_FALSE(ev.nodes[2].reachable);
  EXPECT_FALSE(ev.nodes[3].reachable);
  EXPECT_EQ(a.slurm().node_table_loads(), 1) << "one load for every peer, not one per peer";
}

TEST_F(JobEnd, WithoutTheControllerTheEpilogsPatternIsExpandedAndADeadNodeIsNamed) {
  a.config.report_path = "/tmp/nonexistent-reports/%u/%j.md";
  start();
  run_job(77, "node-a,node-b,node-c", "bert", "basic", now_usec());
  std::vector<nlohmann::json> records;
  ASSERT_TRUE(eventually([&] { return !(records = analyzer_records(work, 77)).empty(); }, 20000));
  const Evidence ev = evidence_from_json(records[0]["evidence"], "stdin");
  EXPECT_EQ(ev.job.source, "epilog");
  EXPECT_EQ(ev.job.stdout_path, work + "/outputs/77-bert.log");
  EXPECT_EQ(records[0]["argv"].back(), work + "/outputs/77-bert.log");
  EXPECT_EQ(ev.report_path, "/tmp/nonexistent-reports/nobody/77.md");
  ASSERT_EQ(ev.nodes.size(), 3u);
  EXPECT_EQ(ev.nodes[2].host, "node-c");
  EXPECT_FALSE(ev.nodes[2].reachable);
  EXPECT_FALSE(ev.nodes[2].error.empty());
  std::vector<nlohmann::json> sums;
  ASSERT_TRUE(eventually([&] { return !(sums = summaries(a.dir() + "/spool", 77)).empty(); }));
  EXPECT_EQ(sums[0]["unreachable_nodes"], nlohmann::json::array({"node-c"}));
  EXPECT_EQ(sums[0]["facts_source"], "epilog");
}

TEST_F(JobEnd, TriageOffWritesNothing) {
  start();
  run_job(88, "node-a,node-b", "quiet", "off", now_usec());
  std::vector<nlohmann::json> sums;
  ASSERT_TRUE(eventually([&] { return !(sums = summaries(a.dir() + "/spool", 88)).empty(); }));
  EXPECT_EQ(sums[0]["result"], "skipped");
  EXPECT_TRUE(analyzer_records(work, 88).empty());
  EXPECT_FALSE(fs::exists(work + "/triage-88.md"));
}

TEST_F(JobEnd, AnAnalysisThatHangsIsKilledAndTheQueueMovesOn) {
  a.config.analysis_timeout_sec = 1;
  a.config.analysis_concurrency = 1;
  start();
  const int64_t t0 = now_usec();
  run_job(91, "node-a", "hang", "basic", t0);
  run_job(92, "node-a", "crash", "basic", t0);
  run_job(93, "node-a", "fine", "basic", t0);
  double most_running = 0;
  ASSERT_TRUE(eventually(
      [&] {
        most_running =
            std::max(most_running,
                     metric_value(a.agent().metrics(), R"(triage_analyses_running{host="node-a"})")
                         .value_or(0));
        return !summaries(a.dir() + "/spool", 93).empty();
      },
      20000));
  EXPECT_LE(most_running, 1.0) << "AnalysisConcurrency=1";
  const auto hang = summaries(a.dir() + "/spool", 91);
  ASSERT_EQ(hang.size(), 1u);
  EXPECT_EQ(field(hang[0], "result"), "timeout");
  const auto crash = summaries(a.dir() + "/spool", 92);
  ASSERT_EQ(crash.size(), 1u);
  EXPECT_EQ(field(crash[0], "result"), "failed");
  EXPECT_EQ(field(crash[0], "exit"), "exit 3");
  EXPECT_NE(crash[0].value("error", "").find("crashing as asked"), std::string::npos);
  EXPECT_EQ(summaries(a.dir() + "/spool", 93)[0]["result"], "ok");
  // The hung analyzer is gone, not left behind.
  const auto rec = analyzer_records(work, 91);
  ASSERT_EQ(rec.size(), 1u);
  EXPECT_EQ(socket_json(a.socket(), {{"op", "ping"}})["ok"], true);
}

TEST_F(JobEnd, AnAnalyzerThatCannotStartIsASummaryNotACrash) {
  a.config.analyzer_path = "/nonexistent/slurm-triage";
  start();
  run_job(95, "node-a", "x", "basic", now_usec());
  std::vector<nlohmann::json> sums;
  ASSERT_TRUE(eventually([&] { return !(sums = summaries(a.dir() + "/spool", 95)).empty(); }));
  EXPECT_EQ(sums[0]["result"], "failed");
  EXPECT_NE(sums[0].value("error", "").find("exec /nonexistent/slurm-triage"), std::string::npos)
      << sums[0].dump();
}

// The kernel killed the job's last rank just before the epilog ran, after a burst of chatter the
// reader has not got through yet. The evidence waits for the reader to catch up (it is told to
// look at once), not for EvidenceSettleDelay, here a minute.
TEST_F(JobEnd, EvidenceWaitsUntilTheKernelReaderHasCaughtUpAndNoLonger) {
  const std::string dmesg = a.dir() + "/dmesg.txt";
  write_file(dmesg, iso_line(now_usec(), "Linux version 6.1.0 (debian-kernel@lists.debian.org)"));
  a.config.kernel_source = "file";
  a.config.kernel_path = dmesg;
  a.config.evidence_settle_ms = 60000;
  start();
  ASSERT_TRUE(eventually([&] {
    return socket_json(a.socket(), {{"op", "health"}})["kernel"]["state"] == "waiting";
  }));
  const int64_t t0 = now_usec();
  a.slurm().set_job(failed_job(4545, "oom", {"node-a"}, t0));
  std::string chatter;
  for (int i = 0; i < 100000; ++i)
    chatter += iso_line(t0 + i, "eth0: Link is Up - 100Gbps/Full - flow control off");
  append_file(dmesg,
              chatter +
                  iso_line(t0 + 100000,
                           "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
                           "mems_allowed=0-1,oom_memcg=/system.slice/slurmstepd.scope/job_4545,"
                           "task_memcg=/system.slice/slurmstepd.scope/job_4545/step_0/user/task_0,"
                           "task=python3,pid=6545,uid=65534") +
                  iso_line(t0 + 100001,
                           "Memory cgroup out of memory: Killed process 6545 (python3) "
                           "total-vm:80000000kB, anon-rss:64000000kB, file-rss:0kB, "
                           "shmem-rss:0kB, UID:65534 pgtables:127000kB oom_score_adj:0"));
  const auto ended = std::chrono::steady_clock::now();
  run_job(4545, "node-a", "oom", "basic", t0);

  std::vector<nlohmann::json> records;
  ASSERT_TRUE(eventually([&] { return !(records = analyzer_records(work, 4545)).empty(); }, 20000));
  EXPECT_LT(std::chrono::steady_clock::now() - ended, std::chrono::seconds(15))
      << "the minute's maximum was not waited";
  const Evidence ev = evidence_from_json(records[0]["evidence"], "stdin");
  ASSERT_EQ(ev.nodes.size(), 1u);
  ASSERT_EQ(ev.nodes[0].events.size(), 1u) << "the line written before the job end is evidence";
  EXPECT_EQ(ev.nodes[0].events[0].kind, "oom-kill");
  EXPECT_EQ(ev.nodes[0].events[0].job_id, 4545u);
}

TEST(EvidenceSettled, TheWaitEndsWhenEveryLiveReaderHasLookedSinceTheJobEndedOrAtTheMaximum) {
  const int64_t ended = 10'000'000;
  const int64_t max_wait = 2'000'000;
  const KernelSourceProgress behind{true, ended - 1};
  const KernelSourceProgress caught_up{true, ended};
  const KernelSourceProgress failing{false, 0};
  EXPECT_FALSE(evidence_settled({behind}, ended, ended + 5000, max_wait));
  EXPECT_TRUE(evidence_settled({caught_up}, ended, ended + 5000, max_wait));
  EXPECT_FALSE(evidence_settled({caught_up, behind}, ended, ended + 5000, max_wait))
      << "every live reader";
  EXPECT_TRUE(evidence_settled({failing}, ended, ended, max_wait))
      << "a failing or absent reader will not catch up by waiting";
  EXPECT_TRUE(evidence_settled({}, ended, ended, max_wait)) << "KernelSource=none";
  EXPECT_FALSE(evidence_settled({behind}, ended, ended + max_wait - 1, max_wait));
  EXPECT_TRUE(evidence_settled({behind}, ended, ended + max_wait, max_wait))
      << "EvidenceSettleDelay is the longest wait";
  EXPECT_TRUE(evidence_settled({behind}, ended, ended, 0)) << "EvidenceSettleDelay=0: no wait";
}

// docs/analyze.md: 0 all jobs fine, 1 a job failed (both are finished analyses), 2 usage,
// 3 unreadable input, 4 unwritable report, 5 broken rules; a signal is a killed analysis.
TEST_F(JobEnd, TheOutcomeIsRecordedOnEveryNodeOfTheJobAndADownPeerIsCountedNotWaitedFor) {
  start();
  const int64_t t0 = now_usec();
  JobFacts facts = failed_job(5151, "bert", {"node-a", "node-b", "node-c"}, t0);
  facts.gpus = 24;
  a.slurm().set_job(facts);
  run_job(5151, "node-a,node-b,node-c", "bert", "basic", t0);  // node-c's agent is down

  auto history_of = [&](AgentHarness& h) {
    const auto got = testing::http_get_munged(h.port(), "/v1/history", munge.socket());
    return got.status == 200 ? nlohmann::json::parse(got.body) : nlohmann::json();
  };
  nlohmann::json on_a;
  nlohmann::json on_b;
  ASSERT_TRUE(eventually([&] {
    on_a = history_of(a);
    on_b = history_of(b);
    return on_a.value("kept", 0) == 1 && on_b.value("kept", 0) == 1;
  })) << on_a.dump()
      << "\n"
      << on_b.dump();
  for (const nlohmann::json& h : {on_a, on_b}) {
    const nlohmann::json& r = h["records"][0];
    EXPECT_EQ(r["job_id"], 5151);
    EXPECT_EQ(r["user"], "nobody");
    EXPECT_EQ(r["status"], "failed");
    EXPECT_EQ(r["class"], "oom-host") << "the fake analyzer's answer";
    EXPECT_EQ(r["nodes"], nlohmann::json::array({"node-a", "node-b", "node-c"}));
    EXPECT_EQ(r["end_time"], facts.end_time);
  }
  EXPECT_EQ(on_a["host"], "node-a");
  EXPECT_EQ(on_b["host"], "node-b");
  nlohmann::json health;
  ASSERT_TRUE(eventually([&] {
    health = a.agent().health_report()["history"];
    return health["pushes"] == 2;
  })) << health.dump();
  EXPECT_EQ(health["push_failures"], 1) << "node-c was down: counted, not retried";
}

TEST_F(JobEnd, TheLeaderCountsTheOutcomeOnceAndEveryNodeShowsItInItsHistoryGauges) {
  start();
  const int64_t t0 = now_usec();
  JobFacts facts = failed_job(5252, "bert", {"node-a", "node-b"}, t0);
  a.slurm().set_job(facts);
  run_job(5252, "node-a,node-b", "bert", "basic", t0);
  const std::string outcome_a =
      R"(triage_job_outcomes_total{blame="none",class="oom-host",host="node-a",status="failed"})";
  ASSERT_TRUE(eventually([&] { return metric_value(a.agent().metrics(), outcome_a) == 1.0; }))
      << a.agent().metrics();
  ASSERT_TRUE(eventually([&] {
    return metric_value(b.agent().metrics(),
                        R"(triage_history_multinode_jobs{host="node-b",size="2-3"})") == 1.0;
  })) << b.agent().metrics();
  EXPECT_EQ(b.agent().metrics().find("triage_job_outcomes_total{"), std::string::npos)
      << "only the node that led the analysis counts the job";
  EXPECT_EQ(metric_value(a.agent().metrics(),
                         R"(triage_history_multinode_failures{host="node-a",size="2-3"})"),
            0.0)
      << "no blame: the failure does not count against the nodes";
}

TEST(AnalysisSummary, OnlyTheAnalyzersOwnErrorsAndKillsAreFailedAnalyses) {
  JobFacts facts;
  facts.job_id = 12;
  AnalysisOutcome o;
  o.started = true;
  const auto result = [&](int wait_status) {
    o.wait_status = wait_status;
    return analysis_summary(facts, "/t", o, {}, 0)["result"].get<std::string>();
  };
  EXPECT_EQ(result(0), "ok");
  EXPECT_EQ(result(1 << 8), "ok") << "the job failed; its analysis did not";
  for (int code : {2, 3, 4, 5, 127})
    EXPECT_EQ(result(code << 8), "failed") << "exit " << code;
  EXPECT_EQ(result(9), "failed") << "SIGKILL";
  EXPECT_EQ(result(11 | 0x80), "failed") << "SIGSEGV with a core";
  o.timed_out = true;
  EXPECT_EQ(result(9), "timeout");
}

}  // namespace
}  // namespace triage::agent
