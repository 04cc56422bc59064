#include "spank/json_line.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <memory>
#include <string>

namespace triage::spank {
namespace {

nlohmann::json parse(std::string_view line) {
  EXPECT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  return nlohmann::json::parse(line);
}

TEST(JsonLine, BuildsOneObjectOnOneLine) {
  auto line = std::make_unique<JsonLine>();
  line->add("op", "job_end");
  line->add("job_id", int64_t{4242});
  line->add_unsigned("uid", 1000);
  line->add_bool("core_dumped", false);
  const std::string_view text = line->finish();
  EXPECT_EQ(text, "{\"op\":\"job_end\",\"job_id\":4242,\"uid\":1000,\"core_dumped\":false}\n");
  EXPECT_EQ(text.find('\n'), text.size() - 1);
}

TEST(JsonLine, AWorkDirWithQuotesBackslashesAndNewlinesRoundTrips) {
  const std::string dir = "/home/al\"ice\\runs\n\r\t\x01\x7f/ok";
  auto line = std::make_unique<JsonLine>();
  line->add("work_dir", dir);
  const std::string_view text = line->finish();
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "no raw newline may survive";
  EXPECT_EQ(parse(text)["work_dir"], dir);
}

TEST(JsonLine, InvalidUtf8BecomesReplacementCharactersAndTheLineStillParses) {
  const std::string bytes = "out-\xff\xfe-\xc3\xa9-\xe2\x82-\xed\xa0\x80-\xf4\x90\x80\x80.log";
  auto line = std::make_unique<JsonLine>();
  line->add("stdout_pattern", bytes);
  const auto j = parse(line->finish());
  const std::string got = j["stdout_pattern"];
  EXPECT_NE(got.find("\xc3\xa9"), std::string::npos) << "valid é is kept";
  EXPECT_NE(got.find("\xef\xbf\xbd"), std::string::npos);
  EXPECT_EQ(got.find('\xff'), std::string::npos);
}

TEST(JsonLine, ValidMultibyteTextIsKeptAsIs) {
  const std::string name = "训练-лама-🚀";
  auto line = std::make_unique<JsonLine>();
  line->add("name", name);
  EXPECT_EQ(parse(line->finish())["name"], name);
}

TEST(JsonLine, NegativeAndExtremeIntegers) {
  auto line = std::make_unique<JsonLine>();
  line->add("a", int64_t{-1});
  line->add("b", INT64_MIN);
  line->add_unsigned("c", UINT64_MAX);
  const auto j = parse(line->finish());
  EXPECT_EQ(j["a"], -1);
  EXPECT_EQ(j["b"], INT64_MIN);
  EXPECT_EQ(j["c"], UINT64_MAX);
}

TEST(JsonLine, AMessageThatDoesNotFitIsRefusedWholeNotCut) {
  auto line = std::make_unique<JsonLine>();
  line->add("op", "job_end");
  const std::string huge(kMaxLineBytes, 'x');
  line->add("work_dir", huge);
  line->add("job_id", int64_t{1});
  EXPECT_TRUE(line->overflowed());
  EXPECT_TRUE(line->finish().empty());
}

TEST(JsonLine, ControlCharactersExpandingPastTheLimitOverflowCleanly) {
  auto line = std::make_unique<JsonLine>();
  // Each byte becomes six ("\u0001"): 20k bytes would need 120k.
  line->add("x", std::string(20000, '\x01'));
  EXPECT_TRUE(line->finish().empty());
}

TEST(JsonLine, ALineJustUnderTheLimitFits) {
  auto line = std::make_unique<JsonLine>();
  // {"k":"<v>"}\n is 9 bytes plus the value.
  line->add("k", std::string(kMaxLineBytes - 9, 'v'));
  const std::string_view text = line->finish();
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.size(), kMaxLineBytes);
}

}  // namespace
}  // namespace triage::spank
