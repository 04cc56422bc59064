#include "spank/plugin_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace triage::spank {
namespace {

struct Parsed {
  PluginConfig cfg;
  int rejected = 0;
  std::vector<std::string> errors;
};

Parsed parse(std::vector<const char*> args) {
  Parsed p;
  p.rejected = parse_plugin_args(
      static_cast<int>(args.size()), args.data(), &p.cfg,
      [](const char* msg, void* ctx) { static_cast<Parsed*>(ctx)->errors.emplace_back(msg); }, &p);
  return p;
}

TEST(PluginArgs, NoArgumentsMeanBasicAndTheStandardPaths) {
  const Parsed p = parse({});
  EXPECT_EQ(p.rejected, 0);
  EXPECT_EQ(p.cfg.default_mode, Mode::kBasic);
  EXPECT_STREQ(p.cfg.socket_path, "/run/slurm-triage/agent.sock");
  EXPECT_STREQ(p.cfg.inbox_dir, "/var/spool/slurm-triage/inbox");
  EXPECT_EQ(p.cfg.timeout_ms, 10);
}

TEST(PluginArgs, TheAdminCanSetEveryKey) {
  const Parsed p =
      parse({"default=off", "socket=/tmp/a.sock", "inbox=/tmp/inbox", "timeout_ms=25"});
  EXPECT_EQ(p.rejected, 0);
  EXPECT_EQ(p.cfg.default_mode, Mode::kOff);
  EXPECT_STREQ(p.cfg.socket_path, "/tmp/a.sock");
  EXPECT_STREQ(p.cfg.inbox_dir, "/tmp/inbox");
  EXPECT_EQ(p.cfg.timeout_ms, 25);
}

TEST(PluginArgs, AnUnknownArgumentIsNamedAndIgnored) {
  const Parsed p = parse({"default=full", "defualt=off", "verbose"});
  EXPECT_EQ(p.rejected, 2);
  ASSERT_EQ(p.errors.size(), 2u);
  EXPECT_NE(p.errors[0].find("'defualt=off'"), std::string::npos) << p.errors[0];
  EXPECT_NE(p.errors[0].find("unknown argument"), std::string::npos);
  EXPECT_NE(p.errors[1].find("'verbose'"), std::string::npos) << p.errors[1];
  EXPECT_EQ(p.cfg.default_mode, Mode::kFull) << "the good argument still counts";
}

TEST(PluginArgs, BadValuesFallBackToDefaults) {
  const Parsed p = parse({"default=everything", "default=", "socket=relative.sock",
                          "inbox=", "timeout_ms=0", "timeout_ms=5000", "timeout_ms=1x"});
  EXPECT_EQ(p.rejected, 7);
  EXPECT_EQ(p.cfg.default_mode, Mode::kBasic);
  EXPECT_STREQ(p.cfg.socket_path, "/run/slurm-triage/agent.sock");
  EXPECT_STREQ(p.cfg.inbox_dir, "/var/spool/slurm-triage/inbox");
  EXPECT_EQ(p.cfg.timeout_ms, 10);
}

TEST(PluginArgs, APathAsLongAsTheBufferIsRejectedNotTruncated) {
  const std::string long_path = "socket=/" + std::string(kMaxPathBytes, 'a');
  const Parsed p = parse({long_path.c_str()});
  EXPECT_EQ(p.rejected, 1);
  EXPECT_STREQ(p.cfg.socket_path, "/run/slurm-triage/agent.sock");
  EXPECT_LT(p.errors.at(0).size(), 400u) << "the echo of a huge argument is bounded";
}

TEST(PluginArgs, ANullSinkStillCountsRejections) {
  PluginConfig cfg;
  const char* args[] = {"nope"};
  EXPECT_EQ(parse_plugin_args(1, args, &cfg, nullptr, nullptr), 1);
}

TEST(PluginArgs, OnlyNotifyIsHonouredUnlessTheAdminAllowsHangActions) {
  EXPECT_FALSE(parse({}).cfg.hang_action_allowed);
  EXPECT_TRUE(parse({"hang_action=allow"}).cfg.hang_action_allowed);
  EXPECT_FALSE(parse({"hang_action=allow", "hang_action=notify"}).cfg.hang_action_allowed)
      << "the last word counts";
}

TEST(PluginArgs, AHangActionTypoNamesTheArgumentAndKeepsNotify) {
  for (const char* bad : {"hang_action=cancel", "hang_action=", "hang_action=Allow"}) {
    const Parsed p = parse({"hang_action=allow", bad});
    EXPECT_EQ(p.rejected, 1) << bad;
    EXPECT_FALSE(p.cfg.hang_action_allowed) << bad << ": a typo never allows more";
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_NE(p.errors[0].find("hang_action must be allow or notify"), std::string::npos);
  }
}

TEST(HangChoice, ParsesNotifyCancelAndRequeueAndNothingElse) {
  HangAction a = HangAction::kNotify;
  EXPECT_TRUE(parse_hang_action("cancel", &a));
  EXPECT_EQ(a, HangAction::kCancel);
  EXPECT_TRUE(parse_hang_action("requeue", &a));
  EXPECT_EQ(a, HangAction::kRequeue);
  EXPECT_TRUE(parse_hang_action("notify", &a));
  EXPECT_EQ(a, HangAction::kNotify);
  for (const char* bad : {"", "(null)", "kill", "CANCEL", "cancel "}) {
    a = HangAction::kNotify;
    EXPECT_FALSE(parse_hang_action(bad, &a)) << bad;
    EXPECT_EQ(a, HangAction::kNotify);
  }
  EXPECT_FALSE(parse_hang_action(nullptr, &a)) << "a bare --triage-on-hang is not a choice";
  for (const HangAction each : {HangAction::kNotify, HangAction::kCancel, HangAction::kRequeue}) {
    HangAction back = HangAction::kNotify;
    EXPECT_TRUE(parse_hang_action(std::string(to_string(each)).c_str(), &back));
    EXPECT_EQ(back, each);
  }
}

TEST(TriageMode, ParsesTheThreeModesAndABareFlag) {
  Mode m = Mode::kOff;
  EXPECT_TRUE(parse_mode("basic", &m));
  EXPECT_EQ(m, Mode::kBasic);
  EXPECT_TRUE(parse_mode("off", &m));
  EXPECT_EQ(m, Mode::kOff);
  EXPECT_TRUE(parse_mode("full", &m));
  EXPECT_EQ(m, Mode::kFull);
  // A bare --triage reaches slurmstepd and the epilog as the string "(null)".
  m = Mode::kOff;
  EXPECT_TRUE(parse_mode("(null)", &m));
  EXPECT_EQ(m, Mode::kFull);
  m = Mode::kOff;
  EXPECT_TRUE(parse_mode(nullptr, &m));
  EXPECT_EQ(m, Mode::kFull);
  m = Mode::kOff;
  EXPECT_TRUE(parse_mode("", &m));
  EXPECT_EQ(m, Mode::kFull);
}

TEST(TriageMode, RejectsAnythingElse) {
  Mode m = Mode::kBasic;
  for (const char* bad : {"FULL", "on", "yes", "full ", "1", "basic,full"}) {
    EXPECT_FALSE(parse_mode(bad, &m)) << bad;
  }
  EXPECT_EQ(to_string(Mode::kOff), "off");
  EXPECT_EQ(to_string(Mode::kBasic), "basic");
  EXPECT_EQ(to_string(Mode::kFull), "full");
}

}  // namespace
}  // namespace triage::spank

namespace triage::spank {
namespace {

std::string expand(const char* pattern, const char* node, size_t len = 256) {
  char out[256] = "garbage";
  const bool ok = expand_node_pattern(pattern, node, out, len);
  return ok ? std::string(out) : "<did not fit>" + std::string(out);
}

TEST(NodePattern, PercentNIsTheNodeSoSeveralSlurmdOnOneHostGetTheirOwnAgent) {
  EXPECT_EQ(expand("/run/slurm-triage/%n/agent.sock", "node007"),
            "/run/slurm-triage/node007/agent.sock");
  EXPECT_EQ(expand("/var/spool/%n-%n", "a"), "/var/spool/a-a");
  EXPECT_EQ(expand("/no/pattern", "x"), "/no/pattern");
}

TEST(NodePattern, PercentPercentAndOtherEscapesAreLiteral) {
  EXPECT_EQ(expand("/a/100%%/%j/%", "n1"), "/a/100%/%j/%");
}

TEST(NodePattern, ANodeNameCannotAddDirectories) {
  EXPECT_EQ(expand("/run/%n.sock", "../../etc/x"), "/run/.._.._etc_x.sock");
}

TEST(NodePattern, AResultThatDoesNotFitIsRefusedNotCut) {
  EXPECT_EQ(expand("/run/%n.sock", "a-very-long-node-name", 12), "<did not fit>");
}

TEST(PluginArgs, RequeuesAreRefusedUnlessTheAdminAllowsThem) {
  EXPECT_FALSE(parse({}).cfg.requeue_allowed);
  EXPECT_TRUE(parse({"requeue=allow"}).cfg.requeue_allowed);
  EXPECT_FALSE(parse({"requeue=allow", "requeue=refuse"}).cfg.requeue_allowed);
  for (const char* bad : {"requeue=yes", "requeue=", "requeue=Allow"}) {
    const Parsed p = parse({"requeue=allow", bad});
    EXPECT_EQ(p.rejected, 1) << bad;
    EXPECT_FALSE(p.cfg.requeue_allowed) << bad << ": a typo never allows more";
    ASSERT_EQ(p.errors.size(), 1u);
    EXPECT_NE(p.errors[0].find("requeue must be allow or refuse"), std::string::npos);
  }
}

TEST(RequeueCount, ABareOptionAsksForOneAndANumberForThatMany) {
  int n = -1;
  EXPECT_TRUE(parse_requeue_count(nullptr, &n));
  EXPECT_EQ(n, 1);
  EXPECT_TRUE(parse_requeue_count("(null)", &n));
  EXPECT_EQ(n, 1);
  EXPECT_TRUE(parse_requeue_count("3", &n));
  EXPECT_EQ(n, 3);
  EXPECT_TRUE(parse_requeue_count("0", &n));
  EXPECT_EQ(n, 0);
  for (const char* bad : {"-1", "11", "1x", "one", "100", " 1"}) {
    n = 5;
    EXPECT_FALSE(parse_requeue_count(bad, &n)) << bad;
    EXPECT_EQ(n, 5) << bad << ": untouched";
  }
}

}  // namespace
}  // namespace triage::spank
