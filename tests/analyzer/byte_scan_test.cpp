#include "analyzer/byte_scan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <random>
#include <string>

namespace triage {
namespace {

TEST(CountNewlines, AgreesWithACharByCharCountAtEveryLengthAndAlignment) {
  std::mt19937 rng(7);
  std::string buf(5000, 'x');
  for (char& c : buf)
    c = (rng() % 5 == 0) ? '\n' : static_cast<char>('a' + rng() % 26);
  for (size_t off = 0; off < 17; ++off) {
    for (size_t len = 0; len + off <= buf.size(); len += 1 + len / 3) {
      size_t expect = 0;
      for (size_t i = off; i < off + len; ++i)
        expect += buf[i] == '\n' ? 1u : 0u;
      ASSERT_EQ(count_newlines(buf.data() + off, len), expect) << off << "+" << len;
    }
  }
}

TEST(CountNewlines, CountsOnlyTheNewlineByteAmongAllByteValues) {
  std::string buf;
  for (int round = 0; round < 40; ++round) {
    for (int b = 0; b < 256; ++b)
      buf += static_cast<char>((b * 7 + round) % 256);
  }
  for (size_t off = 0; off < 9; ++off) {
    for (const size_t len : {size_t{5}, size_t{8}, size_t{15}, size_t{70}, buf.size() - off}) {
      const size_t expect = static_cast<size_t>(
          std::count(buf.begin() + static_cast<std::ptrdiff_t>(off),
                     buf.begin() + static_cast<std::ptrdiff_t>(off + len), '\n'));
      ASSERT_EQ(count_newlines(buf.data() + off, len), expect) << off << "+" << len;
    }
  }
}

TEST(CountNewlines, CountsMoreThan255NewlinesPerLane) {
  const std::string all(100000, '\n');
  EXPECT_EQ(count_newlines(all.data(), all.size()), all.size());
}

std::string stripped(std::string s) {
  s.resize(strip_ansi_in_place(s.data(), s.size()));
  return s;
}

TEST(StripAnsi, RemovesColourCodesThatSplitAPhrase) {
  EXPECT_EQ(stripped("\x1b[31mRESOURCE_\x1b[0mEXHAUSTED\x1b[0m\n"), "RESOURCE_EXHAUSTED\n");
  EXPECT_EQ(stripped("a\x1b]0;title\x07"
                     "b\x1b]8;;http://x\x1b\\c"),
            "abc");
  EXPECT_EQ(stripped("\x1b(Bplain"), "plain");
}

TEST(StripAnsi, NeverSwallowsALineBreak) {
  EXPECT_EQ(stripped("one\x1b[31\ntwo\n"), "one\ntwo\n");
  EXPECT_EQ(stripped("x\x1b\ny"), "x\ny");
  EXPECT_EQ(stripped("tail\x1b"), "tail");
}

TEST(StripAnsi, LeavesTextWithoutEscapesAlone) {
  constexpr char kText[] = "no escapes here\n\x00\xff binary";
  const std::string s(kText, sizeof kText - 1);  // the NUL and what follows belong to it
  EXPECT_EQ(stripped(s), s);
}

}  // namespace
}  // namespace triage
