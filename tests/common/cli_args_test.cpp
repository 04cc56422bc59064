#include "common/cli_args.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace triage {
namespace {

// Keeps the argument strings alive for the char** the cursor reads.
struct Argv {
  explicit Argv(std::vector<std::string> words) : words_(std::move(words)) {
    for (auto& w : words_)
      ptrs_.push_back(w.data());
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  char** argv() { return ptrs_.data(); }

 private:
  std::vector<std::string> words_;
  std::vector<char*> ptrs_;
};

std::string usage_message(std::vector<std::string> words, void (*read)(ArgCursor&)) {
  Argv a(std::move(words));
  ArgCursor args(a.argc(), a.argv());
  try {
    read(args);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(ArgCursor, WalksOptionsValuesAndOperandsAfterTheCommandName) {
  Argv a({"analyze", "--format", "json", "-", "job/"});
  ArgCursor args(a.argc(), a.argv());
  ASSERT_TRUE(args.next());
  EXPECT_TRUE(args.is_option());
  EXPECT_EQ(args.value(), "json");
  ASSERT_TRUE(args.next());
  EXPECT_EQ(args.arg(), "-");
  EXPECT_FALSE(args.is_option()) << "a lone dash is standard input, not an option";
  ASSERT_TRUE(args.next());
  EXPECT_EQ(args.arg(), "job/");
  EXPECT_FALSE(args.next());
}

TEST(ArgCursor, AnOptionAtTheEndOfTheLineNamesItselfAsMissingItsValue) {
  EXPECT_EQ(usage_message({"follow", "--rules"},
                          [](ArgCursor& c) {
                            c.next();
                            c.value();
                          }),
            "--rules needs a value");
}

TEST(ArgCursor, NumbersAreCheckedAndTheOptionIsNamed) {
  auto positive = [](ArgCursor& c) {
    c.next();
    c.positive();
  };
  EXPECT_EQ(usage_message({"follow", "--stall-min", "-3"}, positive),
            "--stall-min expects a positive number");
  EXPECT_EQ(usage_message({"follow", "--stall-min", "nan"}, positive),
            "--stall-min expects a positive number");
  EXPECT_EQ(usage_message({"follow", "--stall-min", "600"}, positive), "");
  auto epoch = [](ArgCursor& c) {
    c.next();
    c.epoch_seconds();
  };
  EXPECT_EQ(usage_message({"analyze", "--now", "yesterday"}, epoch),
            "--now expects seconds since the epoch");
  EXPECT_EQ(usage_message({"analyze", "--now", "1700000000"}, epoch), "");
  auto whole = [](ArgCursor& c) {
    c.next();
    c.whole(1, 65535);
  };
  EXPECT_EQ(usage_message({"nodes", "--port", "70000"}, whole),
            "--port expects a whole number from 1 to 65535");
}

TEST(ArgCursor, HelpIsRecognisedInBothSpellings) {
  for (const char* h : {"-h", "--help"}) {
    Argv a({"kernel", h});
    ArgCursor args(a.argc(), a.argv());
    ASSERT_TRUE(args.next());
    EXPECT_TRUE(args.is_help()) << h;
  }
}

}  // namespace
}  // namespace triage
