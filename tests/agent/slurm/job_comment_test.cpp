// The one comment format (agent/slurm/job_comment.h): the post-mortem summary, and how it joins a
// field other tools write too when it goes through sacctmgr.
#include <gtest/gtest.h>

#include <cctype>
#include <string>
#include <vector>

#include "agent/slurm/job_comment.h"

namespace triage::agent {
namespace {

std::string lowercased(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

TEST(TriageSummary, SaysClassBlameNodesAndReport) {
  const TriageSummary s{"nccl-timeout", "platform", {"gpu-a017"}, "/home/u/run/triage.md"};
  EXPECT_EQ(compose_triage_summary(s),
            "triage=nccl-timeout;blame=platform;nodes=gpu-a017;report=/home/u/run/triage.md");
}

TEST(TriageSummary, NodesAreOneHostlistAndMissingPartsSayNone) {
  const TriageSummary s{"", "", {"gpu-a001", "gpu-a002", "gpu-a003"}, ""};
  EXPECT_EQ(compose_triage_summary(s), "triage=unknown;blame=none;nodes=gpu-a[001-003]");
  EXPECT_EQ(compose_triage_summary({"completed", "none", {}, ""}),
            "triage=completed;blame=none;nodes=");
}

TEST(TriageSummary, BytesSacctOrTheMergeWouldMangleAreEncoded) {
  // A space ends our segment, ';' and '=' are our syntax, '|' breaks sacct -P, quotes become
  // backticks in sacctmgr: none of them may appear raw.
  const TriageSummary s{"x", "platform", {}, "/home/u/my run;a|b=\"c\"\n.md"};
  const std::string v = compose_triage_summary(s);
  EXPECT_EQ(v, "triage=x;blame=platform;nodes=;report=/home/u/my%20run%3ba%7cb%3d%22c%22%0a.md");
  EXPECT_EQ(v.find_first_of(" |\n'\""), std::string::npos);
  EXPECT_EQ(v, lowercased(v)) << "the encoding itself survives 22.05's lowercasing";
}

TEST(TriageSummary, TooLongLosesTheReportFirstThenNodesFromTheEnd) {
  std::vector<std::string> nodes;
  nodes.reserve(40);
  for (int i = 0; i < 40; ++i)
    nodes.push_back("n" + std::to_string(i * 7));  // no two in a row: a long hostlist
  const TriageSummary s{"nccl-timeout", "unknown", nodes, "/very/long/path/triage.md"};
  EXPECT_NE(compose_triage_summary(s, 10000).find(";report="), std::string::npos);
  const std::string bounded = compose_triage_summary(s, 120);
  EXPECT_LE(bounded.size(), 120u);
  EXPECT_EQ(bounded.find(";report="), std::string::npos) << bounded;
  EXPECT_EQ(bounded.rfind("triage=nccl-timeout;blame=unknown;nodes=n[0,7],n[14,", 0), 0u)
      << bounded << ": the first nodes kept";
  const size_t plus = bounded.rfind('+');
  ASSERT_NE(plus, std::string::npos) << bounded;
  const int left_out = std::stoi(bounded.substr(plus + 1));
  EXPECT_GT(left_out, 0);
  EXPECT_LT(left_out, 40);
}

TEST(AccountingMerge, JobstatsTextIsKeptAndOursAppended) {
  const CommentMerge m = merge_accounting_comment("JS1:H4sIAAAA+2Y=", "triage=oom;blame=user-code");
  EXPECT_TRUE(m.write);
  EXPECT_EQ(m.value, "JS1:H4sIAAAA+2Y= triage=oom;blame=user-code");
}

TEST(AccountingMerge, OurEarlierSummaryIsReplacedAndTheHangMarkWithIt) {
  const CommentMerge m = merge_accounting_comment(
      "JS1:abc triage=hang;flagged=2026-11-24t20:02:24z", "triage=hang-timeout;blame=unknown");
  EXPECT_TRUE(m.write);
  EXPECT_EQ(m.value, "JS1:abc triage=hang-timeout;blame=unknown");
}

TEST(AccountingMerge, TextWithQuotesIsLeftAloneBecauseSacctmgrWouldChangeIt) {
  for (const char* theirs : {R"({"opt": 1})", "it's mine", "a|b", "line\nbreak"}) {
    const CommentMerge m = merge_accounting_comment(theirs, "triage=oom");
    EXPECT_FALSE(m.write) << theirs;
    EXPECT_FALSE(m.unchanged) << theirs;
  }
}

TEST(AccountingMerge, OurSummaryLowercasedBy2205CountsAsWritten) {
  const CommentMerge m = merge_accounting_comment("triage=x;nodes=gpu-a1;report=/home/u/run/t.md",
                                                  "triage=x;nodes=GPU-A1;report=/home/U/Run/t.md");
  EXPECT_FALSE(m.write);
  EXPECT_TRUE(m.unchanged);
}

TEST(AccountingMerge, AnExactRepeatIsUnchangedAndAFullFieldIsNot) {
  EXPECT_TRUE(merge_accounting_comment("triage=oom", "triage=oom").unchanged);
  const CommentMerge full = merge_accounting_comment(std::string(1020, 'x'), "triage=oom");
  EXPECT_FALSE(full.write);
  EXPECT_FALSE(full.unchanged);
}

// The preflight's record on a job it refused: beside the summary and other tools' text, never
// in their place, and the latest refusal only.
TEST(RefusedSegment, NamesTheNodeAndTheEncodedReason) {
  EXPECT_EQ(compose_refused_segment("gpu-a017", "triage preflight: port down: mlx5_0/1"),
            "triage-refused=gpu-a017:triage%20preflight:%20port%20down:%20mlx5_0/1");
}

TEST(RefusedSegment, ALongReasonIsCutOutsideAnEscape) {
  const std::string s = compose_refused_segment("n1", std::string(10, 'x') + " y", 28);
  EXPECT_EQ(s, "triage-refused=n1:xxxxxxxxxx");
}

TEST(RefusedSegment, KeepsTheSummaryAndOtherTextAndReplacesAnEarlierMove) {
  const std::string first = compose_refused_segment("n1", "a");
  CommentMerge m = merge_refused_comment("JS1:abc triage=hang;flagged=1", first);
  ASSERT_TRUE(m.write);
  EXPECT_EQ(m.value, "JS1:abc triage=hang;flagged=1 " + first);
  const CommentMerge again = merge_refused_comment(m.value, compose_refused_segment("n2", "b"));
  ASSERT_TRUE(again.write);
  EXPECT_EQ(again.value, "JS1:abc triage=hang;flagged=1 triage-refused=n2:b");
  // And the summary at the job's end leaves the move where it is.
  const CommentMerge end =
      merge_triage_comment(again.value, "triage=completed;blame=none;nodes=n3");
  ASSERT_TRUE(end.write);
  EXPECT_EQ(end.value, "JS1:abc triage=completed;blame=none;nodes=n3 triage-refused=n2:b");
}

TEST(RefusedSegment, ReadsBackTheNodeAndReasonTheRefusalWrote) {
  const std::string why = "triage preflight: drain recommended: GPU fell off the bus (Xid 79)";
  const std::string comment = "JS1:abc " + compose_refused_segment("gpu-a017", why) +
                              " triage=completed;blame=none;nodes=gpu-a018";
  const auto m = refused_from_comment(comment);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->node, "gpu-a017");
  EXPECT_EQ(m->reason, why);
}

TEST(RefusedSegment, ACommentWithoutARefusalOrWithABrokenOneGivesWhatItHolds) {
  EXPECT_FALSE(refused_from_comment(""));
  EXPECT_FALSE(refused_from_comment("JS1:abc triage=hang;flagged=1"));
  // Another tool's text that only contains our key is not ours.
  EXPECT_FALSE(refused_from_comment("x-triage-refused=n1:a"));
  EXPECT_FALSE(refused_from_comment("triage-refused=:why"));
  // sacctmgr (22.05) lowercased it: the escapes still read; a broken escape stays as it is.
  const auto m = refused_from_comment("TRIAGE-REFUSED=n1:port%20DOWN%3a%2x");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->node, "n1");
  EXPECT_EQ(m->reason, "port DOWN:%2x");
  const auto bare = refused_from_comment("triage-refused=n2");
  ASSERT_TRUE(bare);
  EXPECT_EQ(bare->node, "n2");
  EXPECT_EQ(bare->reason, "");
}

}  // namespace
}  // namespace triage::agent
