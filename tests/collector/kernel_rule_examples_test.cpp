// The kernel catalogs carry their own test lines: every opening rule a real line it must turn into
// an event and a near miss it must not, every harmless section a line it must silence; a line the
// classifier reads otherwise is reported at its own file and line.
#include "collector/kernel_rule_examples.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "collector/kernel_pipeline.h"
#include "kernel_test_util.h"

namespace triage::collector {
namespace {

using testing::TempDir;
using testing::write_file;

std::vector<std::string> texts(const std::vector<InputError>& errors) {
  std::vector<std::string> out;
  out.reserve(errors.size());
  for (const auto& e : errors)
    out.emplace_back(e.what());
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += s + "\n";
  return out;
}

TEST(KernelRuleExamples, TheShippedCatalogsReadTheirOwnExamplesAsTheySay) {
  const auto errors = texts(check_kernel_examples(testing::shipped_rules()));
  EXPECT_TRUE(errors.empty()) << joined(errors);
}

// A refining rule often matches a later line of a record (a call trace frame), which one example
// line cannot show; the opening rules, which find the events, all carry both kinds.
TEST(KernelRuleExamples, EveryShippedOpeningRuleAndHarmlessSectionCarriesExamples) {
  // Rules no real line was found for yet (see the comment above each); a rule that gains its
  // examples must leave this list.
  const std::set<std::string> without = {"amdgpu-ras-deferred"};
  const auto rules = testing::shipped_rules();
  for (const auto& r : rules->rules()) {
    if (r.is_refiner()) continue;
    if (without.count(r.id) > 0) {
      EXPECT_TRUE(r.examples.empty()) << r.id << " has examples now: take it off the list";
      continue;
    }
    EXPECT_FALSE(r.examples.empty())
        << r.file << ":" << r.line << ": [kernel-rule " << r.id << "] has no example";
    EXPECT_FALSE(r.counter_examples.empty())
        << r.file << ":" << r.line << ": [kernel-rule " << r.id << "] has no counter-example";
  }
  for (const auto& h : rules->harmless_sections()) {
    EXPECT_FALSE(h.examples.empty())
        << h.file << ":" << h.line << ": [kernel-harmless " << h.id << "] has no example";
  }
}

TEST(KernelRuleExamples, ALineReadsAsTheClassifierReadsItWithItsDmesgPrefix) {
  const auto rules = testing::shipped_rules();
  const KernelLineVerdict v = classify_kernel_line(
      rules,
      "[Tue Mar  5 10:01:02 2024] NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python3, "
      "GPU has fallen off the bus.");
  ASSERT_EQ(v.events.size(), 1u);
  EXPECT_EQ(v.events[0].rule, "nvidia-xid");
  EXPECT_EQ(v.message.rfind("NVRM: Xid", 0), 0u) << v.message;
}

TEST(KernelRuleExamples, AWrongExampleIsNamedWithItsFileAndLine) {
  TempDir site;
  write_file(site.file("site.rules"),
             "[kernel-rule beegfs-down]\n"
             "kind = nfs-timeout\n"
             "pattern = ^beegfs: .*Communication error with\n"
             "example = beegfs: Communication error with meta01 (10.0.0.7:8005)\n"
             "example = beegfs: connection to meta01 restored\n"  // line 5: opens nothing
             "counter-example = beegfs: Communication error with meta02 (timeout)\n"  // line 6
             "\n"
             "[kernel-harmless beegfs-chatter]\n"
             "pattern = ^beegfs: Client version\n"
             "example = beegfs: Communication error with meta03\n");  // line 10
  const KernelRulesLoad load = load_kernel_rules({TRIAGE_SOURCE_RULES_DIR, site.path()});
  ASSERT_TRUE(load.rules) << (load.errors.empty() ? "" : load.errors[0].what());
  const auto errors = texts(check_kernel_examples(load.rules));
  ASSERT_EQ(errors.size(), 3u) << joined(errors);
  const std::string f = site.file("site.rules");
  EXPECT_EQ(errors[0], f + ":5: [kernel-rule beegfs-down]: example: no event of this rule: it "
                           "opens no event");
  EXPECT_EQ(errors[1], f +
                           ":6: [kernel-rule beegfs-down]: counter-example: it opens "
                           "[kernel-rule beegfs-down] (" +
                           f + ":1)");
  EXPECT_EQ(errors[2], f +
                           ":10: [kernel-harmless beegfs-chatter]: example: not silenced by this "
                           "section: no pattern of the section matches it; it opens [kernel-rule "
                           "beegfs-down] (" +
                           f + ":1)");
}

TEST(KernelRuleExamples, ARefiningRulesExampleMustBeRefinedByIt) {
  TempDir site;
  write_file(site.file("site.rules"),
             "[kernel-rule beegfs-down]\n"
             "kind = nfs-timeout\n"
             "pattern = ^beegfs: .*Communication error with\n"
             "example = beegfs: Communication error with meta01 (10.0.0.7:8005)\n"
             "counter-example = beegfs: Client version 7.4\n"
             "\n"
             "[kernel-rule beegfs-meta-down]\n"
             "refines = beegfs-down\n"
             "match = with meta\\d+\n"
             "severity = error\n"
             "example = beegfs: Communication error with meta01 (10.0.0.7:8005)\n"
             "example = beegfs: Communication error with storage07 (10.0.0.9:8003)\n"  // line 12
             "counter-example = beegfs: Communication error with meta02 (10.0.0.8:8005)\n");
  const KernelRulesLoad load = load_kernel_rules({TRIAGE_SOURCE_RULES_DIR, site.path()});
  ASSERT_TRUE(load.rules) << (load.errors.empty() ? "" : load.errors[0].what());
  const auto errors = texts(check_kernel_examples(load.rules));
  ASSERT_EQ(errors.size(), 2u) << joined(errors);
  const std::string f = site.file("site.rules");
  EXPECT_EQ(errors[0], f +
                           ":12: [kernel-rule beegfs-meta-down]: example: not refined by this "
                           "rule: it opens [kernel-rule beegfs-down] (" +
                           f + ":1)");
  EXPECT_EQ(errors[1], f + ":13: [kernel-rule beegfs-meta-down]: counter-example: this rule "
                           "refines its event");
}

}  // namespace
}  // namespace triage::collector
