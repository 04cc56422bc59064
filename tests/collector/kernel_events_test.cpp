// Kernel-rule fixtures for every event kind, in the line shapes real kernels print, and through
// every tool shape an admin may paste (raw dmesg, dmesg -T, journalctl -k, short-iso, a bare
// "kernel:" tag, no prefix at all): each produces exactly the expected event. Benign look-alikes
// produce nothing.
#include <functional>

#include <gtest/gtest.h>

#include "collector/kernel_pipeline.h"
#include "common/time_util.h"
#include "kernel_test_util.h"

// Kernel lines longer than a source line are written as adjacent string literals on purpose.
// NOLINTBEGIN(bugprone-suspicious-missing-comma)
namespace triage::collector {
namespace {

using testing::classify_text;
using testing::of_kind;

enum class Shape { kBare, kKernelTag, kDmesg, kDmesgT, kJournalctl, kShortIso };

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::kBare:
      return "bare";
    case Shape::kKernelTag:
      return "kernel-tag";
    case Shape::kDmesg:
      return "dmesg";
    case Shape::kDmesgT:
      return "dmesg -T";
    case Shape::kJournalctl:
      return "journalctl -k";
    case Shape::kShortIso:
      return "short-iso";
  }
  return "?";
}

// Renders messages one per line the way `shape` prints them, 1 ms apart from 12:00:00.
std::string render(const std::vector<std::string>& messages, Shape shape) {
  std::string out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const int ms = static_cast<int>(i);
    char prefix[96] = "";
    switch (shape) {
      case Shape::kBare:
        break;
      case Shape::kKernelTag:
        (void)std::snprintf(prefix, sizeof prefix, "kernel: ");
        break;
      case Shape::kDmesg:
        (void)std::snprintf(prefix, sizeof prefix, "[ 1000.%06d] ", ms * 1000);
        break;
      case Shape::kDmesgT:
        (void)std::snprintf(prefix, sizeof prefix, "[Sat Nov 21 12:00:%02d 2026] ", ms / 1000);
        break;
      case Shape::kJournalctl:
        (void)std::snprintf(prefix, sizeof prefix, "Nov 21 12:00:%02d node003 kernel: ", ms / 1000);
        break;
      case Shape::kShortIso:
        (void)std::snprintf(prefix, sizeof prefix,
                            "2026-11-21T12:00:00.%06d+00:00 node003 kernel: ", ms * 1000);
        break;
    }
    out += prefix + messages[i] + "\n";
  }
  return out;
}

struct Case {
  const char* situation;
  std::vector<std::string> messages;
  const char* kind;
  Severity severity;
  const char* action;
  std::function<void(const KernelEvent&)> check = [](const KernelEvent&) {};
};

class KernelEventFixtures : public ::testing::TestWithParam<Shape> {
 protected:
  void SetUp() override { pin_now_usec(*parse_timestamp_usec("2026-11-21T13:00:00Z")); }
  void TearDown() override { pin_now_usec(std::nullopt); }

  void expect_one(const Case& c) {
    const std::string text = render(c.messages, GetParam());
    const auto events = classify_text(text);
    const auto found = of_kind(events, c.kind);
    ASSERT_EQ(found.size(), 1U) << c.situation << " [" << shape_name(GetParam()) << "]\n" << text;
    const KernelEvent& e = *found.front();
    EXPECT_EQ(e.severity, c.severity) << c.situation;
    EXPECT_EQ(e.action, c.action) << c.situation;
    EXPECT_EQ(e.host, "node003");
    EXPECT_FALSE(e.lines.empty());
    EXPECT_LE(e.lines.size(), KernelEvent::kMaxEventLines);
    c.check(e);
  }
};

TEST_P(KernelEventFixtures, OomKillOfAJobStepUnderCgroupV2) {
  expect_one(
      {"a job killed by the memory-cgroup OOM killer (cgroup v2)",
       {"python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0, oom_score_adj=0",
        "CPU: 3 PID: 777 Comm: python3 Tainted: G           OE      6.8.0-45-generic #45-Ubuntu",
        "Call Trace:", " <TASK>", " dump_stack_lvl+0x48/0x70", " </TASK>",
        "memory: usage 67108864kB, limit 67108864kB, failcnt 1234",
        "Memory cgroup stats for /system.slice/slurmstepd.scope/job_4242:", "anon 68702699520",
        "Tasks state (memory values in pages):",
        "[  pid  ]   uid  tgid total_vm      rss pgtables_bytes swapents oom_score_adj name",
        "[    777]  1000   777 20000000 16000000 130000000        0             0 python3",
        "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,oom_memcg=/"
        "system.slice/slurmstepd.scope/job_4242,task_memcg=/system.slice/slurmstepd.scope/job_4242/"
        "step_0/user/task_3,task=python3,pid=777,uid=1000",
        "Memory cgroup out of memory: Killed process 777 (python3) total-vm:80000000kB, "
        "anon-rss:64000000kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:127000kB "
        "oom_score_adj:0"},
       "oom-kill",
       Severity::kCritical,
       "none",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.pid, 777);
         EXPECT_EQ(e.task, "python3");
         EXPECT_EQ(e.uid, 1000);
         EXPECT_EQ(e.job_id, 4242U);
         EXPECT_EQ(e.step, "0");
         EXPECT_EQ(e.cgroup, "/system.slice/slurmstepd.scope/job_4242/step_0/user/task_3");
         EXPECT_EQ(e.lines.size(), 14U);
         EXPECT_EQ(e.fields.at("invoker"), "python3");
         EXPECT_EQ(e.fields.at("anon_rss_kb"), "64000000");
       }});
}

TEST_P(KernelEventFixtures, GlobalOomOfABatchStepUnderCgroupV1WithOnlyErrorLevelLines) {
  expect_one(
      {"dmesg --level=err: only the oom-kill and Killed lines survive",
       {"oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=slurm,mems_allowed=0-1,global_"
        "oom,task_memcg=/slurm/uid_1000/job_9/step_batch/task_0,task=train.py,pid=31337,uid=1000",
        "Out of memory: Killed process 31337 (train.py) total-vm:9000000kB, anon-rss:8000000kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:17000kB oom_score_adj:0"},
       "oom-kill",
       Severity::kCritical,
       "none",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.pid, 31337);
         EXPECT_EQ(e.task, "train.py");
         EXPECT_EQ(e.job_id, 9U);
         EXPECT_EQ(e.step, "batch");
         EXPECT_EQ(e.lines.size(), 2U);
       }});
}

TEST_P(KernelEventFixtures, OomUnderAMultipleSlurmdScopeWithTheExternStep) {
  expect_one(
      {"several slurmd per host: <node>_slurmstepd.scope",
       {"oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/"
        "system.slice/node003_slurmstepd.scope/job_77,task_memcg=/system.slice/"
        "node003_slurmstepd.scope/job_77/step_extern/user/"
        "task_special,task=sleep,pid=4000,uid=1001",
        "Memory cgroup out of memory: Killed process 4000 (sleep) total-vm:1000kB, anon-rss:100kB, "
        "file-rss:0kB, shmem-rss:0kB, UID:1001 pgtables:40kB oom_score_adj:0"},
       "oom-kill",
       Severity::kCritical,
       "none",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.job_id, 77U);
         EXPECT_EQ(e.step, "extern");
         EXPECT_EQ(e.uid, 1001);
       }});
}

TEST_P(KernelEventFixtures, XidFallenOffTheBus) {
  expect_one({"Xid 79: the GPU is gone",
              {"NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen "
               "off the bus."},
              "nvidia-xid",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.code, 79);
                EXPECT_EQ(e.device, "0000:3b:00.0");
                EXPECT_FALSE(e.pid.has_value());
                EXPECT_EQ(e.summary, "Xid 79 on GPU 0000:3b:00.0: GPU has fallen off the bus");
                EXPECT_EQ(e.fields.at("fault"), "node");
              }});
}

TEST_P(KernelEventFixtures, XidApplicationFaultIsNotTheNodesFault) {
  expect_one({"Xid 13 from a user's kernel",
              {"NVRM: Xid (PCI:0000:5e:00): 13, pid=2222, name=python3, Graphics SM Warp Exception "
               "on (GPC 0, TPC 1, SM 0): Out Of Range Address"},
              "nvidia-xid",
              Severity::kWarning,
              "none",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.code, 13);
                EXPECT_EQ(e.pid, 2222);
                EXPECT_EQ(e.task, "python3");
                EXPECT_EQ(e.fields.at("fault"), "application");
              }});
}

TEST_P(KernelEventFixtures, XidRecoveryActionAsksForAReboot) {
  expect_one({"Xid 154 names the recovery the driver needs",
              {"NVRM: Xid (PCI:0000:18:00): 154, GPU recovery action changed from 0x0 (None) to "
               "0x2 (Node Reboot Required)"},
              "nvidia-xid",
              Severity::kCritical,
              "reboot-at-job-boundary",
              [](const KernelEvent& e) { EXPECT_EQ(e.code, 154); }});
}

TEST_P(KernelEventFixtures, AmdgpuUncorrectableHbmErrors) {
  expect_one({"HBM uncorrectable ECC errors",
              {"amdgpu 0000:1b:00.0: amdgpu: socket: 0, die: 1, 2 new uncorrectable hardware "
               "errors detected in umc block",
               "amdgpu 0000:1b:00.0: amdgpu: socket: 0, die: 1, 2 uncorrectable hardware errors "
               "detected in total in umc block"},
              "gpu-ras-uncorrectable",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.device, "0000:1b:00.0");
                EXPECT_EQ(e.block, "umc");
                EXPECT_EQ(e.fields.at("errors"), "2");
                EXPECT_EQ(e.fields.at("total"), "2");
                EXPECT_EQ(e.fields.at("metric"), "umc");
                EXPECT_EQ(e.fields.at("ras_type"), "ue");
                EXPECT_EQ(e.lines.size(), 2U);
              }});
}

TEST_P(KernelEventFixtures, AmdgpuCorrectableXgmiErrorsWithEventSequence) {
  expect_one({"XGMI link correctable errors ({N} event prefix)",
              {"amdgpu 0000:9d:00.0: {1}socket: 6, die: 1, 1533 new correctable hardware errors "
               "detected in xgmi_wafl block",
               "amdgpu 0000:9d:00.0: {1}socket: 6, die: 1, 1533 correctable hardware errors "
               "detected in total in xgmi_wafl block"},
              "gpu-ras-correctable",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.block, "xgmi_wafl");
                EXPECT_EQ(e.fields.at("metric"), "xgmi");
                EXPECT_EQ(e.fields.at("errors"), "1533");
              }});
}

TEST_P(KernelEventFixtures, AmdgpuOldStyleUmcCount) {
  expect_one({"older kernels print the block in capitals",
              {"amdgpu: 4 uncorrectable hardware errors detected in UMC block"},
              "gpu-ras-uncorrectable",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) { EXPECT_EQ(e.block, "umc"); }});
}

TEST_P(KernelEventFixtures, AmdgpuDeferredErrors) {
  expect_one({"poisoned data, not yet consumed",
              {"amdgpu 0000:1b:00.0: amdgpu: {3}socket: 0, die: 0, 1 new deferred hardware errors "
               "detected in umc block"},
              "gpu-ras-uncorrectable",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("ras_type"), "de"); }});
}

TEST_P(KernelEventFixtures, AmdgpuFatalRasInterrupt) {
  expect_one(
      {"sync flood",
       {"amdgpu 0000:dd:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!"},
       "gpu-ras-uncorrectable",
       Severity::kCritical,
       "drain",
       [](const KernelEvent& e) { EXPECT_EQ(e.device, "0000:dd:00.0"); }});
}

TEST_P(KernelEventFixtures, AmdgpuAcaRecordWithAnUncorrectableBank) {
  expect_one(
      {"an ACA dump whose STATUS has the UC bit",
       {"amdgpu 0000:1b:00.0: {1}[Hardware Error]: Accelerator Check Architecture events logged",
        "amdgpu 0000:1b:00.0: {1}[Hardware Error]: aca entry[00].STATUS=0xbaa000000000080b",
        "amdgpu 0000:1b:00.0: {1}[Hardware Error]: aca entry[00].ADDR=0x0000000000000000",
        "amdgpu 0000:1b:00.0: {1}[Hardware Error]: aca entry[00].MISC0=0xd008000100000000",
        "amdgpu 0000:1b:00.0: {1}[Hardware Error]: aca entry[00].IPID=0x0001d02e1f007900",
        "amdgpu 0000:1b:00.0: {1}[Hardware Error]: aca entry[00].SYND=0x000000005d003e1b"},
       "gpu-hardware-error",
       Severity::kCritical,
       "drain",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.device, "0000:1b:00.0");
         EXPECT_EQ(e.lines.size(), 6U);
         EXPECT_EQ(e.fields.at("aca_status"), "baa000000000080b");
         EXPECT_EQ(e.fields.at("aca_ipid"), "0001d02e1f007900");
       }});
}

TEST_P(KernelEventFixtures, FirmwareFirstGpuPcieErrorRecord) {
  expect_one({"a GHES CPER record for an AMD GPU",
              {"{1}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 0",
               "{1}[Hardware Error]: event severity: recoverable",
               "{1}[Hardware Error]:  Error 0, type: recoverable",
               "{1}[Hardware Error]:   section_type: PCIe error",
               "{1}[Hardware Error]:   port_type: 0, PCIe end point",
               "{1}[Hardware Error]:   device_id: 0000:c1:00.0", "{1}[Hardware Error]:   slot: 0",
               "{1}[Hardware Error]:   vendor_id: 0x1002, device_id: 0x74a1",
               "{1}[Hardware Error]:   class_code: 038000"},
              "gpu-hardware-error",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.device, "0000:c1:00.0");
                EXPECT_EQ(e.fields.at("event_severity"), "recoverable");
                EXPECT_EQ(e.fields.at("opened_as"), "mce");
                EXPECT_EQ(e.lines.size(), 9U);
              }});
}

TEST_P(KernelEventFixtures, FirmwareFirstMemoryErrorIsAMachineCheck) {
  expect_one({"a GHES CPER record for a DIMM",
              {"{2}[Hardware Error]: Hardware error from APEI Generic Hardware Error Source: 1",
               "{2}[Hardware Error]: It has been corrected by h/w and requires no further action",
               "{2}[Hardware Error]: event severity: corrected",
               "{2}[Hardware Error]:  Error 0, type: corrected",
               "{2}[Hardware Error]:   section_type: memory error",
               "{2}[Hardware Error]:   physical_address: 0x0000004a1c3f2000"},
              "mce",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("section"), "memory error"); }});
}

TEST_P(KernelEventFixtures, AmdgpuRingTimeoutNamesTheProcess) {
  expect_one({"a gfx ring timeout (older drm prefix)",
              {"[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled "
               "seq=571734509, emitted seq=571734511",
               "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* Process information: process python3 "
               "pid 5555 thread python3 pid 5560"},
              "gpu-ring-timeout",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.pid, 5555);
                EXPECT_EQ(e.task, "python3");
                EXPECT_EQ(e.fields.at("ring"), "gfx_0.0.0");
              }});
}

TEST_P(KernelEventFixtures, AmdgpuResetThatSucceeded) {
  expect_one(
      {"GPU reset after a hang",
       {"amdgpu 0000:c1:00.0: amdgpu: GPU reset begin!. Source:  1",
        "amdgpu 0000:c1:00.0: amdgpu: Dumping IP State", "amdgpu 0000:c1:00.0: amdgpu: MODE1 reset",
        "amdgpu 0000:c1:00.0: amdgpu: GPU mode1 reset",
        "amdgpu 0000:c1:00.0: amdgpu: GPU smu mode1 reset",
        "amdgpu 0000:c1:00.0: amdgpu: GPU reset(4) succeeded!"},
       "gpu-reset",
       Severity::kWarning,
       "investigate",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.device, "0000:c1:00.0");
         EXPECT_EQ(e.fields.at("outcome"), "succeeded");
         EXPECT_EQ(e.lines.size(), 6U);
       }});
}

TEST_P(KernelEventFixtures, AmdgpuResetThatFailed) {
  expect_one({"the GPU did not come back",
              {"amdgpu 0000:03:00.0: amdgpu: GPU reset begin!. Source:  1",
               "amdgpu 0000:03:00.0: amdgpu: GPU reset end with ret = -19",
               "amdgpu 0000:03:00.0: amdgpu: GPU Recovery Failed: -19"},
              "gpu-reset",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("ret"), "-19"); }});
}

TEST_P(KernelEventFixtures, AmdgpuPageFaultWithItsDetailLines) {
  expect_one(
      {"a VM page fault and its decoded status",
       {"amdgpu 0000:03:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:3 pasid:32781)",
        "amdgpu 0000:03:00.0: amdgpu:  Process python3 pid 5555 thread python3 pid 5560",
        "amdgpu 0000:03:00.0: amdgpu:   in page starting at address 0x00007ff3409ae000 from client "
        "10",
        "amdgpu 0000:03:00.0: amdgpu: GCVM_L2_PROTECTION_FAULT_STATUS:0x00800830",
        "amdgpu 0000:03:00.0: amdgpu: \t Faulty UTCL2 client ID: CPF (0x4)",
        "amdgpu 0000:03:00.0: amdgpu: \t MORE_FAULTS: 0x0",
        "amdgpu 0000:03:00.0: amdgpu: \t WALKER_ERROR: 0x0",
        "amdgpu 0000:03:00.0: amdgpu: \t PERMISSION_FAULTS: 0x3",
        "amdgpu 0000:03:00.0: amdgpu: \t MAPPING_ERROR: 0x0",
        "amdgpu 0000:03:00.0: amdgpu: \t RW: 0x0"},
       "gpu-page-fault",
       Severity::kWarning,
       "none",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.lines.size(), 10U);
         EXPECT_EQ(e.pid, 5555);
         EXPECT_EQ(e.task, "python3");
         EXPECT_EQ(e.fields.at("hub"), "gfxhub");
         EXPECT_EQ(e.fields.at("address"), "00007ff3409ae000");
         EXPECT_EQ(e.fields.at("utcl2_client"), "CPF (0x4)");
       }});
}

TEST_P(KernelEventFixtures, AmdgpuFailsToInitialize) {
  expect_one({"probe failure",
              {"amdgpu 0000:c1:00.0: amdgpu: Fatal error during GPU init"},
              "gpu-init-failure",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.device, "0000:c1:00.0"); }});
}

TEST_P(KernelEventFixtures, AmdgpuDeviceLostFromTheBus) {
  expect_one({"the GPU dropped off PCIe",
              {"amdgpu 0000:03:00.0: amdgpu: device lost from bus!"},
              "gpu-fallen-off-bus",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) { EXPECT_EQ(e.device, "0000:03:00.0"); }});
}

TEST_P(KernelEventFixtures, OopsInTheCperRingIsTheSeedsDriverBug) {
  expect_one({"NULL dereference in amdgpu_cper_ring_get_ent_sz",
              {"BUG: kernel NULL pointer dereference, address: 0000000000000008",
               "#PF: supervisor read access in kernel mode",
               "#PF: error_code(0x0000) - not-present page",
               "PGD 0 P4D 0 ",
               "Oops: 0000 [#1] PREEMPT SMP NOPTI",
               "CPU: 12 PID: 4321 Comm: gpu_metrics Tainted: G           OE      6.8.0-45-generic "
               "#45-Ubuntu",
               "Hardware name: Supermicro AS -8125GS-TNMR2/H13DSG-O-CPU, BIOS 1.7 04/25/2024",
               "RIP: 0010:amdgpu_cper_ring_get_ent_sz+0x3c/0x90 [amdgpu]",
               "Code: 48 8b 47 08 48 8b 57 10 <8b> 04 30 c3",
               "RSP: 0018:ffffb3c2c1d3bd58 EFLAGS: 00010246",
               "RAX: 0000000000000000 RBX: ffff9a2b4c8e0000 RCX: 0000000000000000",
               "Call Trace:",
               " <TASK>",
               " ? __die+0x23/0x70",
               " amdgpu_cper_ring_write+0x6a/0x1f0 [amdgpu]",
               " amdgpu_cper_generate_ce_records+0x1a4/0x250 [amdgpu]",
               " </TASK>",
               "Modules linked in: amdgpu(OE) amddrm_ttm_helper(OE) amdttm(OE)",
               "CR2: 0000000000000008",
               "---[ end trace 0000000000000000 ]---"},
              "gpu-driver-oops",
              Severity::kError,
              "reboot-at-job-boundary",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.pid, 4321);
                EXPECT_EQ(e.task, "gpu_metrics");
                EXPECT_EQ(e.fields.at("opened_as"), "kernel-oops");
                EXPECT_EQ(e.fields.at("rip"), "amdgpu_cper_ring_get_ent_sz+0x3c/0x90");
                EXPECT_EQ(e.lines.size(), 20U);
              }});
}

TEST_P(KernelEventFixtures, ReaderHungInTheCperRingIsTheSeedsDriverBug) {
  expect_one(
      {"a RAS sysfs reader stuck in D state in amdgpu_cper_ring_write",
       {"INFO: task gpu_metrics:4321 blocked for more than 122 seconds.",
        "      Tainted: G           OE      6.8.0-45-generic #45-Ubuntu",
        "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.",
        "task:gpu_metrics     state:D stack:0     pid:4321  ppid:1      flags:0x00004002",
        "Call Trace:", " <TASK>", " __schedule+0x2f5/0x8b0", " schedule+0x5e/0xd0",
        " schedule_preempt_disabled+0x15/0x30", " __mutex_lock.constprop.0+0x3a5/0x6b0",
        " amdgpu_cper_ring_write+0x6a/0x1f0 [amdgpu]",
        " amdgpu_ras_aca_sysfs_read+0x44/0x90 [amdgpu]", " dev_attr_show+0x19/0x40", " </TASK>"},
       "gpu-driver-oops",
       Severity::kError,
       "reboot-at-job-boundary",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.pid, 4321);
         EXPECT_EQ(e.task, "gpu_metrics");
         EXPECT_EQ(e.fields.at("opened_as"), "hung-task");
         EXPECT_EQ(e.fields.at("driver_function"), "amdgpu_cper_ring_write");
         EXPECT_EQ(e.fields.at("state"), "D");
         EXPECT_EQ(e.lines.size(), 14U);
       }});
}

TEST_P(KernelEventFixtures, TaskHungOnNfs) {
  expect_one({"a writer blocked on NFS",
              {"INFO: task python3:1234 blocked for more than 122 seconds.",
               "      Not tainted 6.1.0-18-amd64 #1 Debian 6.1.76-1",
               "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.",
               "task:python3         state:D stack:0     pid:1234  ppid:1200   flags:0x00000002",
               "Call Trace:", " <TASK>", " __schedule+0x34d/0x9e0",
               " rpc_wait_bit_killable+0x11/0x70 [sunrpc]", " nfs_wait_on_request+0x2a/0x40 [nfs]",
               " </TASK>"},
              "hung-task",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.pid, 1234);
                EXPECT_EQ(e.task, "python3");
                EXPECT_EQ(e.fields.at("seconds"), "122");
              }});
}

TEST_P(KernelEventFixtures, SoftLockup) {
  expect_one(
      {"a CPU stuck in the kernel",
       {"watchdog: BUG: soft lockup - CPU#12 stuck for 22s! [python3:1234]",
        "Modules linked in: nfsv3 nfs_acl amdgpu(OE)",
        "CPU: 12 PID: 1234 Comm: python3 Tainted: G           OEL     6.8.0-45-generic #45-Ubuntu",
        "RIP: 0010:native_queued_spin_lock_slowpath+0x6e/0x2e0", "Call Trace:", " <IRQ>",
        " </IRQ>"},
       "soft-lockup",
       Severity::kError,
       "investigate",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.fields.at("cpu"), "12");
         EXPECT_EQ(e.pid, 1234);
         EXPECT_EQ(e.lines.size(), 7U);
       }});
}

TEST_P(KernelEventFixtures, RcuStall) {
  expect_one(
      {"an RCU grace period that does not end",
       {"rcu: INFO: rcu_sched detected stalls on CPUs/tasks:",
        "rcu: \t12-...0: (1 GPs behind) idle=8ec/1/0x4000000000000000 softirq=123/123 fqs=6000",
        "\t(detected by 3, t=60002 jiffies, g=12345, q=678)",
        "Sending NMI from CPU 3 to CPUs 12:", "NMI backtrace for cpu 12"},
       "rcu-stall",
       Severity::kError,
       "investigate",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.fields.at("flavor"), "rcu_sched");
         EXPECT_EQ(e.fields.at("jiffies"), "60002");
         EXPECT_EQ(e.lines.size(), 5U);
       }});
}

TEST_P(KernelEventFixtures, RcuStallInTheOldOneLineWordingCarriesTheGracePeriodAge) {
  expect_one({"an RCU stall as 3.x kernels print it, t= on the first line",
              {"INFO: rcu_sched_state detected stall on CPU 1 (t=60031 jiffies)"},
              "rcu-stall",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.fields.at("flavor"), "rcu_sched_state");
                EXPECT_EQ(e.fields.at("jiffies"), "60031");
              }});
}

TEST_P(KernelEventFixtures, RepeatedRcuStallReportsStayApart) {
  // The same CPU, the same wording: the second report is the kernel warning again about the same
  // grace period, so it must keep its own t= rather than fold into the first.
  const auto events =
      classify_text(render({"INFO: rcu_sched_state detected stall on CPU 1 (t=15000 jiffies)",
                            "INFO: rcu_sched_state detected stall on CPU 1 (t=60031 jiffies)"},
                           GetParam()));
  const auto stalls = of_kind(events, "rcu-stall");
  ASSERT_EQ(stalls.size(), 2U);
  EXPECT_EQ(stalls[0]->fields.at("jiffies"), "15000");
  EXPECT_EQ(stalls[1]->fields.at("jiffies"), "60031");
}

TEST_P(KernelEventFixtures, UncorrectedMachineCheck) {
  expect_one(
      {"an uncorrected MCE (status with the UC bit)",
       {"mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: be00000000800400",
        "mce: [Hardware Error]: TSC 0 ADDR fef1c140 MISC 0 ",
        "mce: [Hardware Error]: PROCESSOR 0:306e4 TIME 1400000000 SOCKET 0 APIC 0 microcode 428",
        "mce: [Hardware Error]: Run the above through 'mcelog --ascii'"},
       "mce",
       Severity::kCritical,
       "drain",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.fields.at("cpu"), "3");
         EXPECT_EQ(e.fields.at("bank"), "5");
       }});
}

TEST_P(KernelEventFixtures, CorrectedMemoryErrorFromEdac) {
  expect_one({"a corrected DIMM error",
              {"EDAC MC0: 1 CE memory read error on CPU_SrcID#0_Ha#0_Chan#1_DIMM#0 (channel:1 "
               "slot:0 page:0x12345 offset:0x0 grain:32 syndrome:0x0)"},
              "mce",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("errors"), "1"); }});
}

TEST_P(KernelEventFixtures, FatalPcieErrorOnAGpu) {
  expect_one({"AER fatal error with the device's detail lines",
              {"pcieport 0000:00:01.1: AER: Uncorrected (Fatal) error received: 0000:c1:00.0",
               "amdgpu 0000:c1:00.0: PCIe Bus Error: severity=Uncorrected (Fatal), "
               "type=Transaction Layer, (Requester ID)",
               "amdgpu 0000:c1:00.0:   device [1002:74a1] error status/mask=00004000/00000000",
               "amdgpu 0000:c1:00.0:    [14] CmpltTO                (First)"},
              "pcie-aer",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.device, "0000:c1:00.0");
                EXPECT_EQ(e.fields.at("pci_id"), "1002:74a1");
                EXPECT_EQ(e.lines.size(), 4U);
              }});
}

TEST_P(KernelEventFixtures, CorrectedPcieErrorInTheNewerWording) {
  expect_one({"6.x AER wording",
              {"pcieport 0000:00:03.1: AER: Correctable error message received from 0000:41:00.0",
               "mlx5_core 0000:41:00.0: PCIe Bus Error: severity=Correctable, type=Physical Layer, "
               "(Receiver ID)",
               "mlx5_core 0000:41:00.0:   device [15b3:101d] error status/mask=00000001/00000000",
               "mlx5_core 0000:41:00.0:    [ 0] RxErr                  (First)"},
              "pcie-aer",
              Severity::kWarning,
              "none",
              [](const KernelEvent& e) { EXPECT_EQ(e.device, "0000:41:00.0"); }});
}

TEST_P(KernelEventFixtures, NfsServerTimedOut) {
  expect_one({"a soft NFS mount gives up",
              {"nfs: server fs01 not responding, timed out"},
              "nfs-timeout",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("server"), "fs01"); }});
}

TEST_P(KernelEventFixtures, LustreEviction) {
  expect_one({"the Lustre client was evicted",
              {"LustreError: 167-0: scratch-MDT0000-mdc-ffff9a2b4c8e0000: This client was evicted "
               "by scratch-MDT0000; in progress operations using this service will fail."},
              "lustre-error",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.fields.at("target"), "scratch-MDT0000"); }});
}

TEST_P(KernelEventFixtures, RdmaLinkDown) {
  expect_one({"the ConnectX port lost link",
              {"mlx5_core 0000:41:00.0 ens1f0np0: Link down"},
              "link-down",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) { EXPECT_EQ(e.device, "ens1f0np0"); }});
}

TEST_P(KernelEventFixtures, WarningInsideTheAmdgpuDriver) {
  expect_one(
      {"a WARN_ON in amdgpu",
       {"WARNING: CPU: 3 PID: 1234 at drivers/gpu/drm/amd/amdgpu/amdgpu_ring.c:451 "
        "amdgpu_ring_fini+0x1c0/0x1f0 [amdgpu]",
        "Modules linked in: amdgpu(OE)",
        "CPU: 3 PID: 1234 Comm: kworker/u64:2 Tainted: G        W  OE      6.8.0 #1",
        "RIP: 0010:amdgpu_ring_fini+0x1c0/0x1f0 [amdgpu]", "---[ end trace 0000000000000000 ]---"},
       "gpu-driver-oops",
       Severity::kError,
       "investigate",
       [](const KernelEvent& e) {
         EXPECT_EQ(e.pid, 1234);
         EXPECT_EQ(e.fields.at("location"), "drivers/gpu/drm/amd/amdgpu/amdgpu_ring.c:451");
       }});
}

TEST_P(KernelEventFixtures, OopsOutsideAnyGpuDriver) {
  expect_one(
      {"a general protection fault in ext4",
       {"general protection fault, probably for non-canonical address 0xdead000000000100: 0000 "
        "[#1] PREEMPT SMP NOPTI",
        "CPU: 5 PID: 99 Comm: kworker/5:1 Not tainted 6.1.0 #1",
        "RIP: 0010:ext4_es_lookup_extent+0x48/0x200", "---[ end trace 0000000000000000 ]---"},
       "kernel-oops",
       Severity::kError,
       "investigate",
       [](const KernelEvent& e) { EXPECT_EQ(e.task, "kworker/5:1"); }});
}

// The real lines of the formats below are from the excerpts in tests/corpus/kernel/ (and, for the
// pre-5.x task dumps, LKML reports).
TEST_P(KernelEventFixtures, TaskDumpOfAProcessBlockedInTheNvidiaUvmIoctlWithoutItsHeader) {
  expect_one({"a hung python3 published without the 'blocked for more than' line",
              {"task:python3.11      state:D stack:    0 pid:15277 ppid: 15257 flags:0x00000002",
               "Call Trace:", " <TASK>", " __schedule+0x23d/0x590", " schedule+0x4e/0xb0",
               " __mutex_lock.constprop.0+0x263/0x490",
               " uvm_page_tree_get_ptes_async+0x93/0x970 [nvidia_uvm]",
               " uvm_api_alloc_semaphore_pool+0x19c/0x2f0 [nvidia_uvm]",
               " uvm_ioctl+0x13e0/0x16f0 [nvidia_uvm]", " ? __mod_lruvec_page_state+0x6b/0xb0"},
              "hung-task",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.task, "python3.11");
                EXPECT_EQ(e.pid, 15277);
                EXPECT_EQ(e.lines.size(), 10U);
                EXPECT_EQ(e.rule, "hung-task-dump");
                EXPECT_EQ(e.fields.at("refined_by"), "hung-task-dump-in-gpu-driver");
              }});
}

TEST_P(KernelEventFixtures, TaskDumpInTheOldFormatWithoutItsHeaderIsNotEvidenceOnItsOwn) {
  expect_one({"a pre-5.x sched_show_task line of a task in D state",
              {"kswapd0         D ffff88007a2d3188     0    47      2 0x00000000",
               " ffff88007a2d3188 ffff880066421640 ffff88007cbf42c0 ffff88007a2d4000"},
              "hung-task",
              Severity::kInfo,
              "none",  // sysrq-t lists tasks in short I/O waits this way too
              [](const KernelEvent& e) {
                EXPECT_EQ(e.task, "kswapd0");
                EXPECT_EQ(e.pid, 47);
                EXPECT_EQ(e.lines.size(), 2U);
              }});
}

TEST_P(KernelEventFixtures, HungTaskInTheOldFormatKeepsItsTaskDump) {
  expect_one({"a 3.x hung-task report: the task line has no 'task:' and no 'state:'",
              {"INFO: task xfs-data/sda9:930 blocked for more than 480 seconds.",
               "\"echo 0 > /proc/sys/kernel/hung_task_timeout_secs\" disables this message.",
               "xfs-data/sda9   D ffff88001ffb9cc8     0   930      2 0x00000000",
               " ffff88003794d198 0000000000000046 ffff8800325f4480 0000000000000000"},
              "hung-task",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.task, "xfs-data/sda9");
                EXPECT_EQ(e.pid, 930);
                EXPECT_EQ(e.fields.at("state"), "D");
                EXPECT_EQ(e.lines.size(), 4U);
              }});
}

TEST_P(KernelEventFixtures, TaskBlockedOnASemaphoreNamesItsLikelyHolder) {
  expect_one({"CONFIG_DETECT_HUNG_TASK_BLOCKER's line, published without the header above it",
              {"INFO: task nvidia-modeset/:226 blocked on a semaphore likely last held by task "
               "kwin_wayland:1088",
               "task:kwin_wayland state:R running task stack:0 pid:1088 tgid:1088 ppid:1080",
               "Call Trace:", " ? osDevReadReg032+0x23/0x70 [nvidia]",
               " ? nvkms_call_rm+0x4e/0x80 [nvidia_modeset]"},
              "hung-task",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.task, "nvidia-modeset/");
                EXPECT_EQ(e.pid, 226);
                EXPECT_EQ(e.fields.at("holder"), "kwin_wayland:1088");
                EXPECT_EQ(e.fields.at("lock"), "semaphore");
                EXPECT_EQ(e.lines.size(), 5U);
              }});
}

TEST_P(KernelEventFixtures, OomKillInTheEl6Format) {
  expect_one({"2.6.32's 'Killed process N, UID N, (comm)'",
              {"Killed process 11726, UID 498, (mysqld) total-vm:7823732kB, anon-rss:2539268kB, "
               "file-rss:768kB"},
              "oom-kill",
              Severity::kCritical,
              "none",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.pid, 11726);
                EXPECT_EQ(e.uid, 498);
                EXPECT_EQ(e.task, "mysqld");
                EXPECT_EQ(e.fields.at("anon_rss_kb"), "2539268");
              }});
}

TEST_P(KernelEventFixtures, MemcgOomReportCutAboveItsTaskInLine) {
  expect_one({"cgroup v1's 'Task in ... killed as a result of limit of ...' opens the report",
              {"Task in /kubepods.slice/pod1/docker-b272.scope killed as a result of limit of "
               "/kubepods.slice/pod1/docker-b272.scope",
               "memory: usage 1048576kB, limit 1048576kB, failcnt 189",
               "memory+swap: usage 1048576kB, limit 1048576kB, failcnt 0",
               "[ pid ]   uid  tgid total_vm      rss nr_ptes swapents oom_score_adj name"},
              "oom-kill",
              Severity::kCritical,
              "none",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.cgroup, "/kubepods.slice/pod1/docker-b272.scope");
                EXPECT_EQ(e.lines.size(), 4U);
              }});
}

TEST_P(KernelEventFixtures, BondingSlaveLinkDownWithADowndelay) {
  expect_one({"the bonding driver's older wording, before the downdelay runs out",
              {"bonding: link status down for interface eno2, disabling it in 200 ms"},
              "link-down",
              Severity::kWarning,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.device, "eno2");
                EXPECT_EQ(e.fields.at("bond"), "bonding");
              }});
}

TEST_P(KernelEventFixtures, ConnectXThatFailsToProbe) {
  expect_one({"mlx5_core cannot load the adapter",
              {"mlx5_core 0000:03:00.0: handle_hca_cap failed",
               "mlx5_core 0000:03:00.0: mlx5_load_one failed with error code -22",
               "mlx5_core: probe of 0000:03:00.0 failed with error -22"},
              "nic-init-failure",
              Severity::kError,
              "investigate",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.device, "0000:03:00.0");
                EXPECT_EQ(e.fields.at("ret"), "-22");
                EXPECT_EQ(e.lines.size(), 2U);
              }});
}

TEST_P(KernelEventFixtures, Xid45AfterAnNvlinkXidIsAGpuFault) {
  expect_one({"the cleanup names the NVLink Xid it follows, which is not in the log",
              {"NVRM: Xid (PCI:0000:dc:00): 45, pid=1818990, name=python3, Ch 00000001 caused by "
               "previous Xid 149"},
              "nvidia-xid",
              Severity::kError,
              "reset-gpu",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.code, 45);
                EXPECT_EQ(e.fields.at("caused_by"), "149");
              }});
}

TEST_P(KernelEventFixtures, UncorrectedMachineCheckTheBankWasNotEnabledToSignal) {
  expect_one({"UC set but EN clear (status a6...): logged at boot, nothing consumed it",
              {"mce: [Hardware Error]: CPU 0: Machine Check: 0 Bank 4: a600000000020408",
               "mce: [Hardware Error]: TSC 0 ADDR fef4c9e0 ",
               "mce: [Hardware Error]: PROCESSOR 0:706a1 TIME 1537152664 SOCKET 0 APIC 0 microcode "
               "28"},
              "mce",
              Severity::kWarning,
              "investigate"});
}

TEST_P(KernelEventFixtures, AmdgpuResetDuringWhichTheSmuStopsAnswering) {
  expect_one({"the reset never completes: the SMU does not answer",
              {"amdgpu 0000:03:00.0: amdgpu: GPU reset begin!",
               "amdgpu 0000:03:00.0: amdgpu: Failed to disable gfxoff!",
               "amdgpu 0000:03:00.0: [drm:amdgpu_ring_test_helper [amdgpu]] *ERROR* ring kiq_2.1.0 "
               "test failed (-110)",
               "[drm:gfx_v10_0_hw_fini [amdgpu]] *ERROR* KGQ disable failed",
               "amdgpu 0000:03:00.0: amdgpu: SMU: I'm not done with your previous command!",
               "amdgpu 0000:03:00.0: amdgpu: Failed to disable smu features."},
              "gpu-reset",
              Severity::kCritical,
              "drain",
              [](const KernelEvent& e) { EXPECT_EQ(e.lines.size(), 6U); }});
}

TEST_P(KernelEventFixtures, NullDereferenceInTheNvidiaDriverNeedsAReboot) {
  expect_one({"an oops (not a WARNING) with its RIP in nvidia.ko",
              {"BUG: kernel NULL pointer dereference, address: 000000000000041c",
               "#PF: supervisor read access in kernel mode", "Oops: Oops: 0000 [#1] SMP NOPTI",
               "RIP: 0010:nv_audio_dynamic_power+0xcd/0x140 [nvidia]", "Call Trace:", " <TASK>"},
              "gpu-driver-oops",
              Severity::kCritical,
              "reboot-at-job-boundary",
              [](const KernelEvent& e) {
                EXPECT_EQ(e.fields.at("rip"), "nv_audio_dynamic_power+0xcd/0x140");
              }});
}

INSTANTIATE_TEST_SUITE_P(AllShapes, KernelEventFixtures,
                         ::testing::Values(Shape::kBare, Shape::kKernelTag, Shape::kDmesg,
                                           Shape::kDmesgT, Shape::kJournalctl, Shape::kShortIso),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           std::string n = shape_name(i.param);
                           for (char& c : n) {
                             if (c == ' ' || c == '-') c = '_';
                           }
                           return n;
                         });

class BenignLookAlikes : public ::testing::TestWithParam<Shape> {};

TEST_P(BenignLookAlikes, ProduceNoEvent) {
  const std::vector<std::string> benign = {
      "amdgpu 0000:c1:00.0: amdgpu: RAS: optional ras ta ucode is not available",
      "amdgpu 0000:c1:00.0: amdgpu: RAS INFO: ras initialized successfully, hardware ability[7fff] "
      "ras_mask[7fff]",
      "[drm] ras umc is enabled",
      "amdgpu 0000:c3:00.0: amdgpu: no uncorrectable hardware errors detected in umc block",
      "amdgpu 0000:c3:00.0: amdgpu: socket: 0, die: 0, 0 new correctable hardware errors detected "
      "in gfx block",
      "[drm] Initialized amdgpu 3.57.0 20150101 for 0000:c1:00.0 on minor 1",
      "amdgpu 0000:c1:00.0: amdgpu: SMU is initialized successfully!",
      "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
      "nvidia-nvlink: Nvlink Core is being initialized, major device number 510",
      "nfs: server fs01 OK",
      "Lustre: scratch-OST0004-osc-ffff9a2b: Connection restored to 10.1.0.5@o2ib (at "
      "10.1.0.5@o2ib)",
      "LustreError: Skipped 3 previous similar messages",
      "mlx5_core 0000:41:00.0 ens1f0np0: Link up",
      "pcieport 0000:00:01.1: AER: enabled with IRQ 26",
      "MCE: In-kernel MCE decoding enabled.",
      "mce: CPU12: Core temperature/speed normal",
      "RAS: Correctable Errors collector initialized.",
      "EDAC MC0: Giving out device to module skx_edac controller Skylake Socket#0 IMC#0: DEV "
      "0000:3a:0a.0 (INTERRUPT)",
      "gmc_v9_0_process_interrupt: 52 callbacks suppressed",
      "Future hung task reports are suppressed, see sysctl kernel.hung_task_warnings",
      "audit: type=1400 audit(1763726400.123:42): apparmor=\"DENIED\" operation=\"open\" "
      "profile=\"oom-kill-test\"",
      "systemd-journald[512]: Received client request to flush runtime journal.",
  };
  const std::string text = render(benign, GetParam());
  const auto events = classify_text(text);
  for (const auto& e : events)
    ADD_FAILURE() << "unexpected " << e.kind << ": " << e.lines.front();
}

INSTANTIATE_TEST_SUITE_P(AllShapes, BenignLookAlikes,
                         ::testing::Values(Shape::kBare, Shape::kDmesg, Shape::kJournalctl));

}  // namespace
}  // namespace triage::collector
// NOLINTEND(bugprone-suspicious-missing-comma)
