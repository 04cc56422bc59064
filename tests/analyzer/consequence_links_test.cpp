// The consequence stage alone: how the other findings relate to the primary failure.
#include "analyzer/consequence_links.h"

#include <gtest/gtest.h>

#include "test_support.h"

namespace triage {
namespace {

const SignatureCatalog& cat() {
  return test::shipped_catalog();
}

uint32_t cls(const char* id) {
  return static_cast<uint32_t>(cat().index_of(id));
}

Finding at(const char* id, int64_t line) {
  Finding f;
  f.cls = id;
  f.line = line;
  return f;
}

TEST(ExplainsOccurrence, ATracebackIsExplainedByTheErrorItEndsIn) {
  const Finding tb = at("python-exception", 10);
  Finding oom = at("oom-gpu", 14);
  oom.traceback_line = 10;
  const ClassOccurrence tb_occ{cls("python-exception"), &tb, 1, false, 10};
  const ClassOccurrence oom_occ{cls("oom-gpu"), &oom, 1, false, 10};
  EXPECT_TRUE(explains_occurrence(cat(), oom_occ, tb_occ));
  EXPECT_FALSE(explains_occurrence(cat(), tb_occ, oom_occ));
  oom.traceback_line = 0;
  const ClassOccurrence outside{cls("storage-error"), &oom, 1, false, 14};
  EXPECT_TRUE(explains_occurrence(cat(), outside, tb_occ)) << "storage-error lists it";
}

TEST(LinkConsequences, EachOtherFindingIsAConsequenceIndependentOrMinor) {
  const Finding oom = at("oom-host", 5);
  const Finding nccl = at("nccl-timeout", 9);
  const Finding ray = at("ray-start-fail", 2);
  const Finding xla = at("xla-compile-fail", 20);
  FoundClasses found;
  for (const Finding* f : {&oom, &nccl, &ray, &xla}) {
    found.occ.push_back(ClassOccurrence{cls(f->cls.c_str()), f, 1, false, f->line});
    found.matches.push_back(nullptr);
  }
  RankingResult rank;
  rank.primary = 0;
  rank.explained_by = {-1, 0, -1, -1};
  const auto links = link_consequences(found, rank, cat());
  ASSERT_EQ(links.size(), 3u);
  EXPECT_EQ(links[0].cls, "ray-start-fail");
  EXPECT_EQ(links[0].relation, "minor");
  EXPECT_EQ(links[1].cls, "nccl-timeout");
  EXPECT_EQ(links[1].relation, "consequence of oom-host");
  EXPECT_EQ(links[2].cls, "xla-compile-fail");
  EXPECT_EQ(links[2].relation, "independent");
}

TEST(LinkConsequences, AFindingThePrimaryDoesNotExplainNamesTheCauseThatDoes) {
  const Finding xla = at("xla-compile-fail", 3);
  const Finding oom = at("oom-host", 9);
  const Finding node = at("node-fail", 12);
  FoundClasses found;
  for (const Finding* f : {&xla, &oom, &node}) {
    found.occ.push_back(ClassOccurrence{cls(f->cls.c_str()), f, 1, false, f->line});
    found.matches.push_back(nullptr);
  }
  RankingResult rank;
  rank.primary = 0;
  rank.explained_by = {-1, -1, 1};
  const auto links = link_consequences(found, rank, cat());
  ASSERT_EQ(links.size(), 2u);
  EXPECT_EQ(links[0].relation, "independent");
  EXPECT_EQ(links[1].relation, "consequence of oom-host");
}

}  // namespace
}  // namespace triage
