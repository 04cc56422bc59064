#include "common/rules_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace triage {
namespace {

TEST(RulesFile, ParsesSectionsEntriesAndContinuations) {
  const auto r = parse_rules_text(
      "# catalog\n"
      "[signature oom-host]\n"
      "priority = 40\n"
      "pattern = \\boom-kill\\b\n"
      "pattern = Out of memory: Killed process\n"
      "explain = The kernel killed a process\n"
      "  because the node ran out of memory.\n"
      "\n"
      "[harmless cuinit]\n"
      "pattern = Failed call to cuInit\n",
      "t.rules");
  ASSERT_TRUE(r.errors.empty());
  ASSERT_EQ(r.sections.size(), 2u);
  const auto& s = r.sections[0];
  EXPECT_EQ(s.type, "signature");
  EXPECT_EQ(s.id, "oom-host");
  EXPECT_EQ(s.line, 2);
  EXPECT_EQ(s.all("pattern").size(), 2u);
  EXPECT_EQ(s.first("explain")->value,
            "The kernel killed a process because the node ran out of memory.");
  EXPECT_EQ(s.first("pattern")->line, 4);
  EXPECT_EQ(r.sections[1].type, "harmless");
}

TEST(RulesFile, ReportsEveryErrorWithItsLine) {
  const auto r =
      parse_rules_text("key = outside\n[broken\n[onlytype]\n[x y]\nno equals here\n", "bad.rules");
  ASSERT_EQ(r.errors.size(), 4u);
  EXPECT_EQ(std::string(r.errors[0].what()), "bad.rules:1: 'key' is outside any [section]");
  EXPECT_EQ(r.errors[1].line(), 2);
  EXPECT_EQ(r.errors[2].line(), 3);
  EXPECT_EQ(r.errors[3].line(), 5);
}

TEST(RulesFile, RejectsInvalidUtf8Lines) {
  const auto r = parse_rules_text("[a b]\npattern = \xff\n", "u.rules");
  ASSERT_EQ(r.errors.size(), 1u);
  EXPECT_EQ(r.errors[0].line(), 2);
}

TEST(RulesFile, LaterLayersReplaceAndDisable) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rules_layers_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "base");
  std::filesystem::create_directories(dir / "site");
  std::ofstream(dir / "base" / "a.rules")
      << "[signature one]\npattern = a\n[signature two]\npattern = b\n";
  std::ofstream(dir / "site" / "z.rules")
      << "[signature one]\npattern = replaced\n[signature two]\ndisable = true\n"
         "[signature three]\npattern = c\n";
  const auto r = load_rule_layers(
      {(dir / "base").string(), (dir / "site").string(), (dir / "missing").string()});
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.sections.size(), 2u);
  EXPECT_EQ(r.sections[0].id, "one");
  EXPECT_EQ(r.sections[0].first("pattern")->value, "replaced");
  EXPECT_EQ(r.sections[1].id, "three");
  std::filesystem::remove_all(dir);
}

// A site's file of many sections spans several of the reader's blocks; every one of them is read.
// Past 8 MiB the file is refused whole rather than read in part.
TEST(RulesFile, ReadsAFileOfManyBlocksWholeAndRefusesOneOver8MiB) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("rules_size_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream big(dir / "big.rules");
    for (int i = 0; i < 5000; ++i)
      big << "[signature s" << i << "]\npattern = a line some job prints number " << i << "\n";
  }
  ASSERT_GT(std::filesystem::file_size(dir / "big.rules"), 4u * 65536);
  const auto r = parse_rules_file((dir / "big.rules").string());
  EXPECT_TRUE(r.errors.empty());
  ASSERT_EQ(r.sections.size(), 5000u);
  EXPECT_EQ(r.sections.back().id, "s4999");
  EXPECT_EQ(r.sections.back().first("pattern")->value, "a line some job prints number 4999");

  std::filesystem::resize_file(dir / "big.rules", (8u << 20) + 1);
  const auto over = parse_rules_file((dir / "big.rules").string());
  EXPECT_TRUE(over.sections.empty());
  ASSERT_EQ(over.errors.size(), 1u);
  EXPECT_NE(std::string(over.errors[0].what()).find("larger than 8 MiB"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace triage
