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

TEST(LogText, AJobsLineCannotEndOurLogLineOrForgeTheNext) {
  // The line a job printed: a carriage return to rewrite what the terminal shows, then a line of
  // its own dressed as the agent's.
  const std::string forged = "loss nan\r\nslurm-triage-agent: info: job 7: analysis done";
  const std::string shown = log_text(forged);
  EXPECT_EQ(shown, "loss nan\\x0d\\x0aslurm-triage-agent: info: job 7: analysis done");
  EXPECT_EQ(shown.find_first_of("\r\n"), std::string::npos);
}

TEST(LogText, AnsiC1AndBidiControlsAreWrittenOutNotActedOn) {
  EXPECT_EQ(log_text("\x1b[2K\x1b[1Aok"), "\\x1b[2K\\x1b[1Aok") << "ESC starts no sequence";
  // U+0085 NEL and U+009B (the 8-bit CSI) as UTF-8.
  EXPECT_EQ(log_text("a\xc2\x85"
                     "b\xc2\x9b"
                     "2Kc"),
            "a\\u{0085}b\\u{009B}2Kc");
  EXPECT_EQ(log_text("x\xe2\x80\xa8y"), "x\\u{2028}y") << "the line separator";
  EXPECT_EQ(log_text("user \xe2\x80\xaetxt.exe"), "user \\u{202E}txt.exe") << "a bidi override";
  EXPECT_EQ(log_text("Grüße ✓ 🚀\tend"), "Grüße ✓ 🚀\tend") << "ordinary text is left alone";
}

TEST(LogText, LongTextIsCutOnACharacterAndSaysHowMuchIsLeftOut) {
  const std::string line = std::string(10, 'a') + "é" + std::string(100, 'b');
  EXPECT_EQ(log_text(line, 11), std::string(10, 'a') + "... (102 more bytes)");
  EXPECT_EQ(log_text(std::string(2000, 'x')).size(),
            kLogTextMax + std::string("... (976 more bytes)").size());
  EXPECT_EQ(log_text("short"), "short");
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
