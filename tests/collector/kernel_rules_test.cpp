// The kernel catalogs are data: they load from rule layers, a site can override or disable an
// entry, and every mistake is reported with its file and line instead of silently dropping a rule.
#include "collector/kernel_rules.h"

#include <gtest/gtest.h>

#include "collector/kernel_pipeline.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<std::string> error_texts(const KernelRulesLoad& load) {
  std::vector<std::string> out;
  for (const auto& e : load.errors)
    out.emplace_back(e.what());
  return out;
}

bool any_contains(const std::vector<std::string>& v, const std::string& needle) {
  for (const auto& s : v) {
    if (s.find(needle) != std::string::npos) return true;
  }
  return false;
}

TEST(KernelRules, TheShippedCatalogsLoadCleanly) {
  const KernelRulesLoad load = load_kernel_rules({TRIAGE_SOURCE_RULES_DIR});
  EXPECT_TRUE(load.errors.empty()) << (load.errors.empty() ? "" : load.errors[0].what());
  ASSERT_TRUE(load.rules);
  bool known = false;
  EXPECT_EQ(load.rules->xid(79, known).action, "drain");
  EXPECT_TRUE(known);
  EXPECT_EQ(load.rules->xid(13, known).fault, "application");
  load.rules->xid(999, known);
  EXPECT_FALSE(known);
  EXPECT_EQ(load.rules->ras("umc", known).metric, "umc");
  EXPECT_EQ(load.rules->ras("xgmi_wafl", known).metric, "xgmi");
  EXPECT_FALSE(load.rules->opener_patterns().empty());
}

// Remediate=reboot acts on the faults the catalogs mark `remedy = reboot` (issue 27): the event
// carries it, from the Xid catalog, a rule, or a refining rule.
TEST(KernelRules, RebootClearableFaultsCarryTheirRemedy) {
  const auto remedy = [](std::string_view line) {
    const auto events = testing::classify_text(line);
    if (events.size() != 1) return std::string("events: ") + std::to_string(events.size());
    const auto it = events[0].fields.find(kRemedyField);
    return it == events[0].fields.end() ? std::string("none") : it->second;
  };
  EXPECT_EQ(remedy("NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, GPU has fallen off the bus."),
            "reboot");
  EXPECT_EQ(remedy("NVRM: Xid (PCI:0000:3b:00): 119, pid=1, Timeout after 6s of waiting for RPC"),
            "reboot");
  EXPECT_EQ(remedy("NVRM: Xid (PCI:0000:3b:00): 48, pid=1, An uncorrectable double bit error"),
            "none")
      << "a drain, not a reboot: the memory stays bad";
  EXPECT_EQ(remedy("NVRM: Xid (PCI:0000:3b:00): 13, pid=1, Graphics Exception"), "none");
  EXPECT_EQ(remedy("NVRM: Xid (PCI:0000:3b:00): 154, GPU recovery action changed from 0x0 (None) "
                   "to 0x2 (Node Reboot Required)"),
            "reboot")
      << "from the refining rule";
  EXPECT_EQ(remedy("amdgpu 0000:1b:00.0: amdgpu: socket: 0, die: 1, 2 new uncorrectable hardware "
                   "errors detected in umc block"),
            "reboot");
}

TEST(KernelRules, ARemedyOtherThanRebootOrNoneIsAnErrorWithFileAndLine) {
  TempDir dir;
  write_file(dir.file("site.rules"), "[xid 79]\nmeaning = off the bus\nremedy = powercycle\n");
  const KernelRulesLoad load = load_kernel_rules({dir.path()});
  ASSERT_EQ(load.errors.size(), 1u);
  EXPECT_NE(std::string(load.errors[0].what()).find("site.rules:3"), std::string::npos)
      << load.errors[0].what();
  EXPECT_NE(std::string(load.errors[0].what()).find("must be reboot or none"), std::string::npos)
      << load.errors[0].what();
}

TEST(KernelRules, EveryKindOfTheVocabularyHasARule) {
  // The vocabulary itself, not a copy of it: a kind added to docs/protocol.md's list without a
  // rule that produces it fails here.
  const auto rules = testing::shipped_rules();
  const std::vector<std::string_view> kinds = kernel_event_kinds();
  ASSERT_FALSE(kinds.empty());
  for (const std::string_view kind : kinds) {
    bool found = false;
    for (const auto& r : rules->rules())
      found |= r.kind == kind;
    EXPECT_TRUE(found) << kind;
  }
}

TEST(KernelRules, SlurmJobsAreFoundInEveryCgroupLayout) {
  const auto rules = testing::shipped_rules();
  struct Case {
    const char* cgroup;
    uint64_t job;
    const char* step;
  };
  for (const Case& c :
       {Case{"/system.slice/slurmstepd.scope/job_4242/step_0/user/task_3", 4242, "0"},
        Case{"/system.slice/node003_slurmstepd.scope/job_77/step_batch/user/task_0", 77, "batch"},
        Case{"/slurm/uid_1000/job_9/step_extern/task_0", 9, "extern"},
        Case{"/slurm_node003/uid_1000/job_10/step_interactive", 10, "interactive"},
        Case{"/system.slice/slurmstepd.scope/job_5", 5, ""}}) {
    uint64_t job = 0;
    std::string step;
    ASSERT_TRUE(rules->job_from_cgroup(c.cgroup, job, step)) << c.cgroup;
    EXPECT_EQ(job, c.job) << c.cgroup;
    EXPECT_EQ(step, c.step) << c.cgroup;
  }
  uint64_t job = 0;
  std::string step;
  EXPECT_FALSE(rules->job_from_cgroup("/user.slice/user-1000.slice/session-4.scope", job, step));
}

TEST(KernelRules, MistakesAreReportedWithFileAndLine) {
  TempDir dir;
  write_file(dir.file("bad.rules"),
             "[kernel-rule typo]\n"
             "kind = gpu-reset\n"
             "patern = GPU reset\n"  // line 3: unknown key
             "[kernel-rule bad-regex]\n"
             "kind = gpu-reset\n"
             "pattern = GPU reset (\n"  // line 6
             "[kernel-rule bad-kind]\n"
             "kind = gpu-on-fire\n"  // line 8
             "pattern = x\n"
             "[kernel-rule orphan]\n"
             "refines = no-such-rule\n"
             "match = x\n"
             "[kernel-rule wants-catalog]\n"
             "kind = nvidia-xid\n"
             "catalog = xid\n"  // line 15: pattern lacks (?P<code>)
             "pattern = Xid\n"
             "[xid 79]\n"
             "severity = apocalyptic\n"  // line 18
             "[ras-block umc]\n"
             "ue_action = panic\n"  // line 20
             "[cgroup-job nojob]\n"
             "pattern = /job_\\d+\n");
  const KernelRulesLoad load = load_kernel_rules({dir.path()});
  EXPECT_FALSE(load.rules);
  const auto errors = error_texts(load);
  EXPECT_TRUE(any_contains(errors, "bad.rules:3: patern: unknown key in [kernel-rule typo]"));
  EXPECT_TRUE(any_contains(errors, "bad.rules:6: pattern: missing )"));
  EXPECT_TRUE(any_contains(errors, "bad.rules:8: kind: unknown kind 'gpu-on-fire'"));
  EXPECT_TRUE(any_contains(
      errors, "bad.rules:10: [kernel-rule orphan] refines unknown rule 'no-such-rule'"));
  EXPECT_TRUE(any_contains(errors, "bad.rules:15: catalog: xid needs every pattern to capture"));
  EXPECT_TRUE(any_contains(errors, "bad.rules:18: severity: must be"));
  EXPECT_TRUE(any_contains(errors, "bad.rules:20: ue_action: must be"));
  EXPECT_TRUE(
      any_contains(errors, "bad.rules:21: [cgroup-job nojob]: a cgroup-job pattern must capture"));
}

TEST(KernelRules, ASiteLayerCanDisableARuleAndAddItsOwn) {
  TempDir site;
  write_file(site.file("site.rules"),
             "[kernel-rule nfs-not-responding]\n"
             "disable = true\n"
             "\n"
             "[kernel-rule beegfs-down]\n"
             "kind = nfs-timeout\n"
             "severity = error\n"
             "action = investigate\n"
             "summary = BeeGFS storage target {target} unreachable\n"
             "pattern = ^beegfs: .*Communication error with (?P<target>\\S+)\n");
  const KernelRulesLoad load = load_kernel_rules({TRIAGE_SOURCE_RULES_DIR, site.path()});
  ASSERT_TRUE(load.rules) << (load.errors.empty() ? "" : load.errors[0].what());
  KernelClassifier c(load.rules, "node003");
  std::vector<KernelEvent> events;
  KernelRecord nfs;
  nfs.text = "nfs: server fs01 not responding, still trying";
  nfs.seq = 1;
  c.feed(nfs, events);
  KernelRecord beegfs;
  beegfs.text = "beegfs: Communication error with meta01 (10.0.0.7:8005)";
  beegfs.seq = 2;
  c.feed(beegfs, events);
  c.flush(events);
  ASSERT_EQ(events.size(), 1U);
  EXPECT_EQ(events[0].rule, "beegfs-down");
  EXPECT_EQ(events[0].summary, "BeeGFS storage target meta01 unreachable");
  EXPECT_EQ(events[0].severity, Severity::kError);
}

TEST(KernelRules, OtherCatalogsInTheSameLayerAreLeftAlone) {
  TempDir dir;
  write_file(dir.file("log.rules"),
             "[signature oom-host]\npriority = 40\npattern = oom-kill\n"
             "[kernel-rule x]\nkind = mce\npattern = ^mce: boom\n");
  const KernelRulesLoad load = load_kernel_rules({dir.path()});
  EXPECT_TRUE(load.rules) << (load.errors.empty() ? "" : load.errors[0].what());
}

}  // namespace
}  // namespace triage::collector
