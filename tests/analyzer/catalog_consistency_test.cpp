// `rules check`'s view of a catalog as a whole: each inconsistency between classes is named with
// its file, line and field; the shipped catalog has none.
#include "analyzer/catalog_consistency.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

const std::vector<std::string> kPlaybooks = {"hang", "heartbeat", "oom", "hardware"};

// The two classes every catalog needs, then `extra`.
const char* const kRequired =
    "[signature stuck]\nderived = stall\nexplain = x\n"
    "[signature gone]\nderived = no-evidence\nexplain = x\n";

struct Checked {
  std::vector<InputError> load;         // what loading found (key by key)
  std::vector<InputError> consistency;  // what the whole-catalog check found
};

Checked check_text(const std::string& text) {
  Checked c;
  RulesLoad rl = parse_rules_text(text, "site.rules");
  c.load = rl.errors;
  const SignatureCatalog cat = SignatureCatalog::from_sections(rl.sections, c.load);
  c.consistency = check_catalog_consistency(cat, kPlaybooks);
  return c;
}

std::string all(const std::vector<InputError>& errors) {
  std::string s;
  for (const auto& e : errors)
    s += std::string(e.what()) + "\n";
  return s;
}

TEST(CatalogConsistency, TheShippedCatalogIsConsistent) {
  const std::vector<std::string> every = {
      "hang", "heartbeat", "oom", "hardware", "gpu-health", "network-health", "training-stability"};
  EXPECT_EQ(all(check_catalog_consistency(test::shipped_catalog(), every)), "");
}

TEST(CatalogConsistency, AMinimalCatalogWithTheRequiredRolesIsConsistent) {
  const Checked c = check_text(kRequired);
  EXPECT_EQ(all(c.load) + all(c.consistency), "");
}

TEST(CatalogConsistency, ACatalogWithoutAStallClassIsRejected) {
  const Checked c = check_text("[signature gone]\nderived = no-evidence\nexplain = x\n");
  EXPECT_NE(all(c.consistency).find("no class declares derived = stall"), std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, ACatalogWithoutAnUnexplainedDeathClassIsRejected) {
  const Checked c = check_text("[signature stuck]\nderived = stall\nexplain = x\n");
  EXPECT_NE(all(c.consistency).find("no class declares derived = no-evidence"), std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, TwoStallClassesAreRejectedAtTheSecondOnesDerivedLine) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature stuck-too]\ntitle = t\nderived = stall\nexplain = x\n");
  EXPECT_NE(all(c.consistency)
                .find("site.rules:9: [signature stuck-too]: derived: only one class "
                      "may declare derived = stall (the hang found from step progress); "
                      "[signature stuck] (site.rules:2) already does"),
            std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, TwoTracebackClassesAreRejected) {
  const Checked c =
      check_text(std::string(kRequired) +
                 "[signature tb1]\npattern = Traceback \\(most recent\ntraceback = true\n"
                 "explain = x\n"
                 "[signature tb2]\npattern = Exception in thread\ntraceback = true\n"
                 "explain = x\n");
  EXPECT_NE(all(c.consistency).find("site.rules:13: [signature tb2]: traceback: only one class"),
            std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, AnExitCodeClaimedByTwoClassesIsRejectedWhereTheSecondClaimsIt) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature killed]\npattern = was killed by\n"
                               "exit-code = 134 137\nexplain = x\n"
                               "[signature oom]\npattern = Out of memory\n"
                               "exit-code = 137\nexplain = x\n");
  EXPECT_NE(all(c.consistency)
                .find("site.rules:13: [signature oom]: exit-code: 137 is already claimed by "
                      "[signature killed] (site.rules:9)"),
            std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, ADerivedClassWithPatternsIsRejected) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature odd]\nderived = evidence\npattern = GPU fell off\n"
                               "explain = x\n");
  EXPECT_NE(
      all(c.consistency)
          .find("site.rules:8: [signature odd]: derived: a derived class has no log patterns"),
      std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, AnUnknownPlaybookIsRejectedAtItsLineListingTheKnownOnes) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature slow]\npattern = step time doubled\nplaybook = hang\n"
                               "playbook = thermal\nexplain = x\n");
  EXPECT_NE(all(c.consistency)
                .find("site.rules:10: [signature slow]: playbook: unknown playbook 'thermal' "
                      "(known: hang, heartbeat, oom, hardware)"),
            std::string::npos)
      << all(c.consistency);
}

TEST(CatalogConsistency, AnUnknownBlameIsRejectedWhenLoading) {
  const Checked c =
      check_text(std::string(kRequired) +
                 "[signature slow]\npattern = step time doubled\nblame = cosmic-rays\n"
                 "explain = x\n");
  EXPECT_NE(all(c.load).find("site.rules:9: blame: unknown blame 'cosmic-rays'"), std::string::npos)
      << all(c.load);
}

TEST(CatalogConsistency, AnUnknownClassInExplainsIsRejectedWhenLoading) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature slow]\npattern = step time doubled\n"
                               "explains = stuck no-such-class\nexplain = x\n");
  EXPECT_NE(all(c.load).find("explains: unknown class 'no-such-class'"), std::string::npos)
      << all(c.load);
}

TEST(CatalogConsistency, BadValuesOfTheRoleKeysAreRejectedWhenLoading) {
  const Checked c = check_text(std::string(kRequired) +
                               "[signature slow]\npattern = step time doubled\n"
                               "exit-code = 300\nstatus = failed\ntask-end = sometimes\n"
                               "derived = maybe\nexplain = x\n");
  const std::string e = all(c.load);
  EXPECT_NE(e.find("site.rules:9: exit-code: expected exit codes from 0 to 255"), std::string::npos)
      << e;
  EXPECT_NE(e.find("site.rules:10: status: expected cancelled"), std::string::npos) << e;
  EXPECT_NE(e.find("site.rules:11: task-end: expected signal or nonzero-exit"), std::string::npos)
      << e;
  EXPECT_NE(e.find("site.rules:12: derived: expected stall"), std::string::npos) << e;
}

}  // namespace
}  // namespace triage
