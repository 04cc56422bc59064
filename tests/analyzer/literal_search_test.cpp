#include "analyzer/literal_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

namespace triage {
namespace {

std::set<std::pair<size_t, uint32_t>> naive(const std::string& text,
                                            const std::vector<std::string>& lits,
                                            size_t accept_end) {
  std::set<std::pair<size_t, uint32_t>> out;
  std::string lower = text;
  for (char& c : lower)
    c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c + 32) : c;
  for (uint32_t i = 0; i < lits.size(); ++i) {
    for (size_t p = lower.find(lits[i]); p != std::string::npos; p = lower.find(lits[i], p + 1)) {
      if (p < accept_end) out.emplace(p, i);
    }
  }
  return out;
}

std::set<std::pair<size_t, uint32_t>> found(const LiteralSearcher& s, const std::string& text,
                                            size_t accept_end) {
  std::vector<LiteralHit> hits;
  s.find(text, accept_end, hits);
  EXPECT_TRUE(
      std::is_sorted(hits.begin(), hits.end(),
                     [](const LiteralHit& a, const LiteralHit& b) { return a.pos < b.pos; }));
  std::set<std::pair<size_t, uint32_t>> out;
  for (const auto& h : hits)
    out.emplace(h.pos, h.literal);
  return out;
}

TEST(LiteralSearch, FindsEveryOccurrenceLikeANaiveSearchCaseInsensitively) {
  const std::vector<std::string> lits = {"oom-kill",
                                         "nccl warn",
                                         "traceback (most recent call last)",
                                         "completed step:",
                                         "[error] pull failed for",
                                         "out of memory",
                                         "ssh -l ",
                                         "resource_exhausted"};
  std::mt19937 rng(42);
  for (int round = 0; round < 40; ++round) {
    std::string text;
    while (text.size() < 20000) {
      if (rng() % 40 == 0) {
        std::string l = lits[rng() % lits.size()];
        for (char& c : l) {
          if (rng() % 2 == 0 && c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
        }
        text += l;
      } else {
        text +=
            static_cast<char>(rng() % 3 == 0 ? ' ' : (rng() % 10 == 0 ? '\n' : 'a' + rng() % 26));
      }
    }
    LiteralSearcher s(lits);
    if (round % 2 == 1) s.calibrate(text.substr(0, 4096));
    const size_t accept = round % 3 == 0 ? text.size() - 100 : text.size();
    ASSERT_EQ(found(s, text, accept), naive(text, lits, accept)) << "round " << round;
  }
}

TEST(LiteralSearch, FindsALiteralAtTheVeryStartAndEndOfTheBlock) {
  LiteralSearcher s({"completed step:"});
  EXPECT_EQ(found(s, "completed step:", 100).size(), 1u);
  EXPECT_EQ(found(s, "xx\nCOMPLETED STEP:", 100).size(), 1u);
  EXPECT_TRUE(found(s, "completed step", 100).empty());  // cut short by the block end
}

TEST(LiteralSearch, BinaryBytesDoNotCauseFalseHits) {
  LiteralSearcher s({"oom-kill"});
  std::string junk;
  for (int i = 0; i < 100000; ++i)
    junk += static_cast<char>(i * 131 % 256);
  EXPECT_EQ(found(s, junk, junk.size()), naive(junk, {"oom-kill"}, junk.size()));
}

TEST(LiteralSearch, OnlyLettersMatchInEitherCase) {
  // '[' and '{', '@' and '`', 0xC1 and 0xE1 differ in the bit that lowers a letter; they must not
  // be taken for each other.
  LiteralSearcher s({"[error] pull failed @ node\xe1"});
  EXPECT_EQ(found(s, "x [ERROR] Pull Failed @ node\xe1 x", 100).size(), 1u);
  EXPECT_TRUE(found(s, "x {error] pull failed @ node\xe1 x", 100).empty());
  EXPECT_TRUE(found(s, "x [error] pull failed ` node\xe1 x", 100).empty());
  EXPECT_TRUE(found(s, "x [error] pull failed @ node\xc1 x", 100).empty());
  EXPECT_EQ(found(s, "x [error] pull failed @ nodE\xe1 x", 100).size(), 1u);
}

TEST(LiteralSearch, LiteralsThatEndAlikeAreToldApartByHowTheyBegin) {
  // Python's exception names share "error": every one of them is a candidate at each "error".
  const std::vector<std::string> lits = {"keyerror", "nameerror", "typeerror", "valueerror",
                                         "nccl error"};
  const std::string text =
      "IndexError: x\nTypeError: y\nNCCL Error 2\nkey_error KeyErrors\nvalue error ValueError\n"
      "NameError\nerror error error\nkeyError";
  LiteralSearcher s(lits);
  s.calibrate(text);
  EXPECT_EQ(found(s, text, text.size()), naive(text, lits, text.size()));
  EXPECT_EQ(found(s, text, text.size()).size(), 6u);
}

TEST(LiteralSearch, StrideFollowsTheShortestLiteral) {
  EXPECT_EQ(LiteralSearcher({"abcdefgh", "abcdefghijklmnop"}).stride(), 5u);
  EXPECT_THROW(LiteralSearcher({"abc"}), std::invalid_argument);
}

}  // namespace
}  // namespace triage
