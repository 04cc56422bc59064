// The agent reading its kernel source: a recorded dmesg (KernelSource=file), saved kmsg records
// (KernelSource=kmsg), a source that is missing at first, and `journal` on a machine without a
// systemd journal. Events end up in the spool, attributed to their jobs, and the node verdict,
// the health report and the metrics follow them.
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "agent/node/kernel_ingest.h"
#include "common/rules_file.h"
#include "common/time_util.h"
#include "tests/agent/test_support.h"

namespace triage::agent {
namespace {

using testing::AgentHarness;
using testing::append_file;
using testing::eventually;
using testing::iso_line;
using testing::kNobody;
using testing::kNogroup;
using testing::lifecycle;
using testing::metric_value;
using testing::read_file;
using testing::socket_json;
using testing::write_file;

constexpr const char* kBootUuid = "5a0c9a51-6f9e-4e0f-9a4e-2d1f5b7c8e90";
constexpr const char* kBootId = "5a0c9a516f9e4e0f9a4e2d1f5b7c8e90";

void start_job(const std::string& socket, uint64_t job) {
  const nlohmann::json answer = socket_json(
      socket, lifecycle("job_start", job, "js:" + std::to_string(job),
                        {{"uid", kNobody}, {"gid", kNogroup}, {"nodelist", "node001"}}));
  ASSERT_EQ(answer["ok"], true) << answer.dump();
}

// The events in the spool, every version, in the order they were written.
nlohmann::json spool_events(const std::string& dir) {
  nlohmann::json out = nlohmann::json::array();
  const std::string text = read_file(dir + "/spool/events/00000001.jsonl");
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    const auto line = nlohmann::json::parse(text.substr(at, end - at), nullptr, false);
    if (line.is_object() && line.value("r", "") == "ev") out.push_back(line["e"]);
    at = end + 1;
  }
  return out;
}

// Waits until the agent's kernel reader is in `state`; the last health answer either way.
nlohmann::json await_kernel_state(AgentHarness& h, const std::string& state) {
  nlohmann::json health;
  eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["kernel"]["state"] == state;
  });
  return health;
}

const nlohmann::json* find_kind(const nlohmann::json& events, const std::string& kind) {
  for (const auto& e : events) {
    if (e["kind"] == kind) return &e;
  }
  return nullptr;
}

// Job 1234 runs out of memory on node001 while job 2000 shares the node; then a GPU reports
// uncorrectable memory errors and another GPU floods the log with Xid 13. The dmesg file does not
// exist yet when the agent starts: it keeps retrying and reports the failure meanwhile.
TEST(KernelIngest, RecordedDmesgFileBecomesJobEvidenceAndADrainRecommendation) {
  AgentHarness h("kfile", "node001");
  const std::string dmesg = h.dir() + "/dmesg.txt";
  h.config.kernel_source = "file";
  h.config.kernel_path = dmesg;
  h.start();

  // The file is missing: the agent keeps serving and says why it reads nothing.
  nlohmann::json health = await_kernel_state(h, "retrying");
  ASSERT_EQ(health["kernel"]["state"], "retrying") << health.dump();
  EXPECT_NE(health["kernel"]["last_error"].get<std::string>().find(dmesg), std::string::npos);
  EXPECT_GE(
      metric_value(h.agent().metrics(), R"(triage_kernel_source_errors_total{host="node001"})")
          .value_or(0),
      1);

  start_job(h.socket(), 1234);
  start_job(h.socket(), 2000);
  const int64_t t0 = now_usec();
  std::string text =
      iso_line(t0 + 1000, "usb 1-1: new high-speed USB device number 2 using xhci_hcd") +
      iso_line(t0 + 2000,
               "python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, "
               "oom_score_adj=0") +
      iso_line(t0 + 2001, "memory: usage 67108864kB, limit 67108864kB, failcnt 1234") +
      iso_line(t0 + 2002,
               "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
               "oom_memcg=/system.slice/slurmstepd.scope/job_1234,task_memcg=/system.slice/"
               "slurmstepd.scope/job_1234/step_0/user/task_3,task=python3,pid=777,uid=65534") +
      iso_line(t0 + 2003,
               "Memory cgroup out of memory: Killed process 777 (python3) total-vm:80000000kB, "
               "anon-rss:64000000kB, file-rss:0kB, shmem-rss:0kB, UID:65534 pgtables:127000kB "
               "oom_score_adj:0") +
      iso_line(t0 + 3000,
               "amdgpu 0000:1b:00.0: amdgpu: socket: 0, die: 1, 2 new uncorrectable hardware "
               "errors detected in umc block");
  constexpr int kFlood = 300;
  for (int i = 0; i < kFlood; ++i) {
    text += iso_line(t0 + 4000 + int64_t{i} * 100,
                     "NVRM: Xid (PCI:0000:5e:00): 13, pid=2222, name=python3, Graphics SM Warp "
                     "Exception on (GPC 0, TPC 1, SM 0): Out Of Range Address");
  }
  write_file(dmesg + ".tmp", text);
  ASSERT_EQ(::rename((dmesg + ".tmp").c_str(), dmesg.c_str()), 0);

  ASSERT_TRUE(eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["verdict"]["verdict"] == "drain-recommended";
  })) << health.dump();
  EXPECT_NE(health["verdict"]["reasons"][0]["reason"].get<std::string>().find("uncorrectable"),
            std::string::npos)
      << health.dump();
  health = await_kernel_state(h, "waiting");
  EXPECT_EQ(health["kernel"]["records"], kFlood + 6) << health.dump();
  EXPECT_FALSE(health["kernel"].contains("last_error")) << "the error is over once the file opened";

  // The spool has each event once; the flood is one event with its count.
  const auto spooled = spool_events(h.dir());
  std::map<std::string, int> kinds;
  uint64_t xids = 0;
  for (const auto& e : spooled) {
    ++kinds[e["kind"].get<std::string>()];
    if (e["kind"] == "nvidia-xid") xids += e["count"].get<uint64_t>();
  }
  EXPECT_EQ(kinds["oom-kill"], 1);
  EXPECT_EQ(kinds["gpu-ras-uncorrectable"], 1);
  EXPECT_EQ(kinds["nvidia-xid"], 1) << "300 identical Xids fold into one event";
  EXPECT_EQ(xids, static_cast<uint64_t>(kFlood));
  const nlohmann::json* oom = find_kind(spooled, "oom-kill");
  ASSERT_NE(oom, nullptr);
  EXPECT_EQ((*oom)["job_id"], 1234);

  // Attribution: the OOM kill belongs to job 1234 only; the GPU's errors to every job on the node.
  const nlohmann::json j1234 = socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 1234}});
  const nlohmann::json j2000 = socket_json(h.socket(), {{"op", "get_job"}, {"job_id", 2000}});
  ASSERT_EQ(j1234["ok"], true) << j1234.dump();
  ASSERT_NE(find_kind(j1234["node"]["events"], "oom-kill"), nullptr) << j1234.dump();
  EXPECT_NE(find_kind(j1234["node"]["events"], "gpu-ras-uncorrectable"), nullptr);
  EXPECT_EQ(find_kind(j2000["node"]["events"], "oom-kill"), nullptr) << j2000.dump();
  EXPECT_NE(find_kind(j2000["node"]["events"], "gpu-ras-uncorrectable"), nullptr);
  EXPECT_NE(find_kind(j2000["node"]["events"], "nvidia-xid"), nullptr);

  const std::string metrics = h.agent().metrics();
  EXPECT_EQ(metric_value(metrics, R"(hw_oom_kills_total{host="node001"})"), 1.0);
  EXPECT_EQ(metric_value(metrics, R"(triage_kernel_records_total{host="node001"})"), kFlood + 6);
  EXPECT_EQ(metric_value(metrics,
                         "triage_kernel_source_up{host=\"node001\",source=\"text " + dmesg + "\"}"),
            1.0)
      << metrics;
  EXPECT_EQ(metric_value(metrics, R"(triage_drain_recommended{host="node001"})"), 1.0);

  // Lines appended later are picked up without reading the old ones twice.
  const std::string more =
      iso_line(now_usec(), "amdgpu 0000:1b:00.0: amdgpu: GPU reset begin!") +
      iso_line(now_usec() + 10, "amdgpu 0000:1b:00.0: amdgpu: GPU reset(2) succeeded!");
  append_file(dmesg, more);
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["kernel"]["records"] == kFlood + 8;
  }));
  ASSERT_TRUE(eventually([&] {
    std::map<std::string, int> now;
    for (const auto& e : spool_events(h.dir()))
      ++now[e["kind"].get<std::string>()];
    return now["gpu-reset"] >= 1;
  }));
  std::set<std::pair<std::string, uint64_t>> versions;
  for (const auto& e : spool_events(h.dir())) {
    const std::pair<std::string, uint64_t> version(e["id"].get<std::string>(),
                                                   e["count"].get<uint64_t>());
    EXPECT_TRUE(versions.insert(version).second) << e.dump();
  }
}

// Saved /dev/kmsg records, with a dictionary line and a gap in the sequence numbers (the reader
// fell behind the ring buffer): the gap is recorded as lost records, the GPU resets make the node
// degraded, and records appended later are read after the saved position.
TEST(KernelIngest, KmsgRecordsWithAnOverrunGap) {
  AgentHarness h("kkmsg", "node001");
  testing::make_dirs(h.config.proc_root + "/sys/kernel/random");
  write_file(h.config.proc_root + "/sys/kernel/random/boot_id", std::string(kBootUuid) + "\n");
  const std::string kmsg = h.dir() + "/kmsg";
  // Times since boot a few seconds ago, so that the events fall into the health window however
  // long this machine has been up.
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const int64_t mono = static_cast<int64_t>(ts.tv_sec) * 1000000 - 10'000'000;
  auto at = [&](int64_t offset) { return std::to_string(mono + offset); };
  write_file(kmsg, "6,100," + at(0) +
                       ",-;usb 1-1: new high-speed USB device number 2 using xhci_hcd\n" +
                       "3,101," + at(1000) +
                       ",-;amdgpu 0000:c1:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1234, "
                       "emitted seq=1236\n" +
                       " SUBSYSTEM=pci\n" + " DEVICE=+pci:0000:c1:00.0\n" + "4,106," + at(2000) +
                       ",-;amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!\n");
  h.options.boot_id = "";  // the agent reads the fixture's, like the kmsg reader
  h.config.kernel_source = "kmsg";
  h.config.kernel_path = kmsg;
  h.start();
  EXPECT_EQ(h.agent().boot_id(), kBootId);

  nlohmann::json health;
  ASSERT_TRUE(eventually([&] {
    health = socket_json(h.socket(), {{"op", "health"}});
    return health["kernel"]["records"] == 3 && health["kernel"]["state"] == "waiting";
  })) << health.dump();
  EXPECT_EQ(health["kernel"]["lost_records"], 4);
  ASSERT_TRUE(eventually([&] {
    return socket_json(h.socket(), {{"op", "health"}})["verdict"]["verdict"] == "degraded";
  }));
  auto spooled = spool_events(h.dir());
  const nlohmann::json* lost = find_kind(spooled, "records-lost");
  ASSERT_NE(lost, nullptr) << read_file(h.dir() + "/spool/events/00000001.jsonl");
  EXPECT_EQ((*lost)["count"], 4);
  const nlohmann::json* ring = find_kind(spooled, "gpu-ring-timeout");
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ((*ring)["id"], std::string(kBootId) + ":101");
  EXPECT_EQ((*ring)["device"], "0000:c1:00.0");
  EXPECT_EQ(h.agent().kernel_position(), "kmsg:" + std::string(kBootId) + ":106");
  const std::string metrics = h.agent().metrics();
  EXPECT_EQ(metric_value(metrics, R"(triage_kernel_records_lost_total{host="node001"})"), 4.0);
  EXPECT_EQ(metric_value(metrics, R"(triage_events_total{host="node001",kind="records-lost"})"),
            1.0);

  append_file(kmsg, ("4,107," + at(3000) + ",-;amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!\n"));
  ASSERT_TRUE(eventually(
      [&] { return h.agent().kernel_position() == "kmsg:" + std::string(kBootId) + ":107"; }));
  spooled = spool_events(h.dir());
  std::set<std::string> ids;
  for (const auto& e : spooled)
    EXPECT_TRUE(ids.insert(e["id"]).second) << "written twice: " << e.dump();
  EXPECT_EQ(socket_json(h.socket(), {{"op", "health"}})["kernel"]["records"], 4);
}

// KernelIngest on its own: `journal` on a machine without a systemd journal reads kmsg instead,
// retries while that is missing, and stops promptly in the middle of a long backoff.
TEST(KernelIngest, JournalFallsBackToKmsgAndRetriesUntilItAppears) {
  testing::TempDir dir("kfallback");
  const std::string kmsg = dir / "kmsg";
  write_file(dir / "boot_id", std::string(kBootUuid) + "\n");
  std::mutex mu;
  std::vector<KernelEvent> got;
  std::string position;
  KernelIngestOptions o;
  o.source = "journal";
  o.journal_available = false;
  o.kmsg_fallback = kmsg;
  o.boot_id_path = dir / "boot_id";
  o.rule_layers = default_rule_layers();
  o.host = "node001";
  o.retry_min_ms = 50;
  o.retry_max_ms = 100;
  o.reopen_ms = 50;
  KernelIngest ingest(
      o,
      [&](std::vector<KernelEvent> events, std::string pos) {
        std::lock_guard<std::mutex> l(mu);
        for (auto& e : events)
          got.push_back(std::move(e));
        position = std::move(pos);
        return true;
      },
      [&] {
        std::lock_guard<std::mutex> l(mu);
        return position;
      });
  ingest.start();
  ASSERT_TRUE(eventually([&] { return ingest.status().source_errors >= 2; }));
  KernelIngestStatus s = ingest.status();
  EXPECT_TRUE(s.fallback);
  EXPECT_EQ(s.state, "retrying");
  EXPECT_NE(s.last_error.find(kmsg), std::string::npos) << s.last_error;

  write_file(kmsg,
             "2,9,1000000,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', "
             "name=<unknown>, GPU has fallen off the bus.\n");
  ASSERT_TRUE(eventually([&] {
    std::lock_guard<std::mutex> l(mu);
    return !got.empty();
  }));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(got.front().id, std::string(kBootId) + ":9");
    EXPECT_EQ(position, "kmsg:" + std::string(kBootId) + ":9");
  }
  s = ingest.status();
  EXPECT_EQ(s.source, "kmsg " + kmsg);
  EXPECT_TRUE(s.last_error.empty());

  // Nothing is read twice on the next look at the file.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  {
    std::lock_guard<std::mutex> l(mu);
    EXPECT_EQ(got.size(), 1u);
  }
  const auto t0 = std::chrono::steady_clock::now();
  ingest.stop();
  ingest.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(500));
  EXPECT_EQ(ingest.status().state, "stopped");
}

// A broken site rule file is a source failure like any other: logged, retried, and the agent
// keeps serving.
TEST(KernelIngest, BrokenSiteRulesAreReportedNotFatal) {
  AgentHarness h("krules", "node001");
  const std::string rules = h.dir() + "/rules.d";
  testing::make_dirs(rules);
  write_file(rules + "/site.rules", "[kernel-rule broken]\nkind = mce\npattern = (unclosed\n");
  write_file(h.dir() + "/dmesg.txt", "[ 1.0] usb 1-1: new device\n");
  h.config.kernel_source = "file";
  h.config.kernel_path = h.dir() + "/dmesg.txt";
  h.config.rules_dir = rules;
  h.start();
  nlohmann::json health = await_kernel_state(h, "retrying");
  ASSERT_EQ(health["kernel"]["state"], "retrying") << health.dump();
  EXPECT_NE(health["kernel"]["last_error"].get<std::string>().find("site.rules:3"),
            std::string::npos)
      << health.dump();
  EXPECT_EQ(socket_json(h.socket(), {{"op", "ping"}})["ok"], true);
}

}  // namespace
}  // namespace triage::agent
