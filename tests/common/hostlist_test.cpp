#include "common/hostlist.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace triage {
namespace {

TEST(Hostlist, ExpandsRangesWithPadding) {
  EXPECT_EQ(expand_hostlist("node[001-003,010]"),
            (std::vector<std::string>{"node001", "node002", "node003", "node010"}));
  EXPECT_EQ(expand_hostlist("a[1-2]b[3-4],login"),
            (std::vector<std::string>{"a1b3", "a1b4", "a2b3", "a2b4", "login"}));
  EXPECT_EQ(expand_hostlist("gpu-a,gpu-b"), (std::vector<std::string>{"gpu-a", "gpu-b"}));
}

TEST(Hostlist, MalformedAndHugeExpressionsAreErrors) {
  EXPECT_THROW(expand_hostlist("node[1-"), InputError);
  EXPECT_THROW(expand_hostlist("node[3-1]"), InputError);
  EXPECT_THROW(expand_hostlist("node[[1]]"), InputError);
  EXPECT_THROW(expand_hostlist("n[1-99999999]"), InputError);
  EXPECT_THROW(expand_hostlist("n]1["), InputError);
}

TEST(Hostlist, CompressesBackToSlurmForm) {
  EXPECT_EQ(compress_hostlist({"node001", "node002", "node003", "node010", "login"}),
            "node[001-003,010],login");
  EXPECT_EQ(compress_hostlist({"n1"}), "n1");
}

}  // namespace
}  // namespace triage
