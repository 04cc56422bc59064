#include "common/text.h"

#include <gtest/gtest.h>

namespace triage {
namespace {

TEST(Printable, InvalidUtf8BecomesReplacementCharacter) {
  EXPECT_EQ(printable("ok \xff\xfe end"), "ok \xEF\xBF\xBD\xEF\xBF\xBD end");
  EXPECT_TRUE(is_valid_utf8(printable(std::string("\xc3\x28 \xe2\x82 \xf0\x90\x8d", 9))));
}

TEST(Printable, ControlCharactersAreShownNotEmitted) {
  EXPECT_EQ(printable(std::string("a\0b\nc\td", 7)), "a\\x00b\\x0ac\td");
}

TEST(Printable, KeepsValidMultibyteText) {
  EXPECT_EQ(printable("Grüße ✓ 🚀"), "Grüße ✓ 🚀");
}

TEST(Utf8, RejectsOverlongsAndSurrogates) {
  EXPECT_FALSE(is_valid_utf8("\xc0\xaf"));
  EXPECT_FALSE(is_valid_utf8("\xed\xa0\x80"));
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));
  EXPECT_TRUE(is_valid_utf8("\xf4\x8f\xbf\xbf"));
}

TEST(StripAnsi, RemovesColourAndOscSequences) {
  EXPECT_EQ(strip_ansi("\x1b[1;31mERROR\x1b[0m: boom"), "ERROR: boom");
  EXPECT_EQ(strip_ansi("\x1b]0;title\x07text"), "text");
  EXPECT_EQ(strip_ansi("\x1b]8;;http://x\x1b\\link"), "link");
  EXPECT_EQ(strip_ansi("trailing\x1b"), "trailing");
  EXPECT_EQ(strip_ansi("\x1b[12;"), "");                      // unterminated CSI swallows the rest
  EXPECT_EQ(strip_ansi("\x1b[unterminated"), "nterminated");  // 'u' is a CSI final byte
}

TEST(Markdown, InlineTextCannotOpenMarkupOrHtml) {
  EXPECT_EQ(md_inline("*bold* <script> [x](y) `c` |"),
            "\\*bold\\* \\<script\\> \\[x\\]\\(y\\) \\`c\\` \\|");
}

TEST(Markdown, ProseCannotOpenMarkupButKeepsOrdinaryPunctuation) {
  EXPECT_EQ(md_prose("*bold* <b> [x](y) `c` | ![i] 3.5 (ok) - done!"),
            "\\*bold\\* \\<b\\> \\[x\\](y) \\`c\\` \\| \\!\\[i\\] 3.5 (ok) - done!");
}

TEST(Markdown, CodeBlockFenceOutgrowsBackticksInside) {
  const std::string block = md_code_block({"```", "text ````"});
  EXPECT_EQ(block.substr(0, 6), "`````\n");
  EXPECT_NE(block.find("\n`````\n"), std::string::npos);
}

TEST(Markdown, CodeSpanSurvivesBackticks) {
  EXPECT_EQ(md_code_span("a`b"), "`` a`b ``");
}

TEST(Truncate, NeverSplitsASequence) {
  const std::string s = "aé";  // 'a' + 2-byte é
  EXPECT_EQ(truncate_utf8(s, 2), "a");
  EXPECT_EQ(truncate_utf8(s, 3), "aé");
}

TEST(Numbers, StrictParsing) {
  EXPECT_EQ(parse_int("-42"), -42);
  EXPECT_FALSE(parse_int("42x"));
  EXPECT_FALSE(parse_int("99999999999999999999"));
  EXPECT_EQ(parse_uint("7"), 7u);
  EXPECT_FALSE(parse_uint("-7"));
  EXPECT_DOUBLE_EQ(*parse_double("12.5"), 12.5);
  EXPECT_FALSE(parse_double("nan"));
}

TEST(Duration, ReadsLikeAPerson) {
  EXPECT_EQ(format_duration(0.25), "250ms");
  EXPECT_EQ(format_duration(42), "42s");
  EXPECT_EQ(format_duration(185), "3m 05s");
  EXPECT_EQ(format_duration(3720), "1h 02m");
  EXPECT_EQ(format_duration(90000), "1d 01h 00m");
}

}  // namespace
}  // namespace triage
