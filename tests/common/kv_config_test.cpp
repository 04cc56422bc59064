#include "common/kv_config.h"

#include <gtest/gtest.h>

namespace triage {
namespace {

KvConfig make() {
  return KvConfig({
      {"DrainPolicy", ConfigType::kEnum, "recommend", {"recommend", "auto"}},
      {"SampleInterval", ConfigType::kDuration, "5s", {}, 1, 3600},
      {"SpoolDir", ConfigType::kPath, "/var/spool/slurm-triage"},
      {"MaxSpool", ConfigType::kBytes, "256M"},
      {"Debug", ConfigType::kBool, "no"},
  });
}

TEST(KvConfig, SlurmStyleKeysAreCaseInsensitive) {
  KvConfig c = make();
  const auto errors =
      c.parse("# comment\ndrainpolicy=auto\nSampleInterval = 10s # trailing\n", "triage.conf");
  ASSERT_TRUE(errors.empty());
  EXPECT_EQ(c.get("DrainPolicy"), "auto");
  EXPECT_EQ(c.get_seconds("SampleInterval"), 10);
  EXPECT_EQ(c.origin("SampleInterval"), "triage.conf:3");
  EXPECT_EQ(c.get_bytes("MaxSpool"), 256LL << 20);
}

TEST(KvConfig, UnknownKeysAndBadValuesNameTheLine) {
  KvConfig c = make();
  const auto errors =
      c.parse("DrainPolicy=sometimes\nColour=blue\nSpoolDir=relative\nDebug=maybe\n", "t.conf");
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_EQ(std::string(errors[0].what()), "t.conf:1: DrainPolicy must be one of: recommend, auto");
  EXPECT_EQ(std::string(errors[1].what()), "t.conf:2: unknown key 'Colour'");
  EXPECT_EQ(errors[2].line(), 3);
  EXPECT_EQ(errors[3].line(), 4);
  // Nothing from a file with errors is applied.
  EXPECT_EQ(c.get("DrainPolicy"), "recommend");
}

TEST(KvConfig, DuplicateKeyIsAnError) {
  KvConfig c = make();
  const auto errors = c.parse("Debug=yes\ndebug=no\n", "t.conf");
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0].line(), 2);
}

}  // namespace
}  // namespace triage
