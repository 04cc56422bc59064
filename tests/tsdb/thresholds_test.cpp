// The thresholds catalog: the shipped file, overrides from /etc/slurm/triage.d, and mistakes in it.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "analyzer/tsdb/thresholds.h"
#include "tests/tsdb/tsdb_fixture.h"

namespace triage::tsdb::testing {
namespace {

class ThresholdsTest : public TsdbTest {
 protected:
  std::string write(const std::string& name, const std::string& text) {
    std::string p = dir_ + "/" + name;
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream(p) << text;
    return p;
  }
};

TEST_F(ThresholdsTest, TheShippedCatalogLoadsWithoutErrorsAndKnowsTheSeedsPowerLevels) {
  const auto th = load_thresholds({TSDB_RULES_DIR});
  for (const auto& e : th.errors)
    ADD_FAILURE() << e.what();
  const auto* mi355 = th.by_hint("AMD Instinct MI355X");
  ASSERT_NE(mi355, nullptr);
  EXPECT_EQ(mi355->power_active_w, 900);
  EXPECT_EQ(mi355->power_busy_wait_w, 300);
  EXPECT_EQ(mi355->power_idle_w, 260);
  EXPECT_TRUE(mi355->has_power_levels());
  EXPECT_LT(mi355->power_busy_wait_w, mi355->idle_level_max_w);
  EXPECT_GT(mi355->power_active_w, mi355->active_min_w);
  // Generic limits come from the default section.
  EXPECT_EQ(mi355->temp_concern_c, 90);
  const auto* mi300 = th.by_hint("mi300x");
  ASSERT_NE(mi300, nullptr);
  EXPECT_EQ(mi300->power_busy_wait_w, 300);
  EXPECT_EQ(th.by_vram(192.0), mi300);
  const auto* h100 = th.by_hint("NVIDIA H100 80GB HBM3");
  ASSERT_NE(h100, nullptr);
  EXPECT_EQ(h100->model, "H100");
  EXPECT_LT(h100->temp_throttle_c, 100);
  EXPECT_EQ(th.by_vram(79.6), h100);
  EXPECT_EQ(th.by_hint("NVIDIA H200")->model, "H200");
  EXPECT_EQ(th.by_vram(100), nullptr);
  EXPECT_EQ(th.by_hint("Intel Gaudi 3"), nullptr);
  EXPECT_FALSE(th.fallback().has_power_levels());
  EXPECT_EQ(th.network.tcp_retrans_per_s, 10);
  EXPECT_EQ(th.host.dirty_high_bytes, 8.0 * (1ull << 30));
  EXPECT_EQ(th.training.checkpoint_slack_steps, 2);
}

TEST_F(ThresholdsTest, ASiteOverrideReplacesOneModelAndAddsAnother) {
  write("override/50-site.rules",
        "[gpu-thresholds MI355X]\nalias = MI355X\nidle-level-max-w = 500\nactive-min-w = 700\n\n"
        "[gpu-thresholds B200]\nalias = B200\nvram-gib = 180\nidle-level-max-w = 350\nactive-min-w "
        "= 600\n"
        "[network-thresholds default]\ntcp-retrans-per-s = 25\n");
  const auto th = load_thresholds({TSDB_RULES_DIR, dir_ + "/override"});
  for (const auto& e : th.errors)
    ADD_FAILURE() << e.what();
  EXPECT_EQ(th.by_hint("MI355X")->idle_level_max_w, 500);
  EXPECT_TRUE(
      std::isnan(th.by_hint("MI355X")->power_active_w));  // replaced whole, as the format says
  EXPECT_EQ(th.by_hint("NVIDIA B200")->model, "B200");
  EXPECT_EQ(th.by_vram(180)->model, "B200");
  EXPECT_EQ(th.network.tcp_retrans_per_s, 25);
}

TEST_F(ThresholdsTest, ATypoInAKeyIsAnErrorWithFileAndLine) {
  const std::string f =
      write("bad/site-thresholds.rules",
            "[gpu-thresholds X1]\nalias = X1\npower-actve-w = 900\nidle-level-max-w = lots\n"
            "[gpu-thresholds X2]\nidle-level-max-w = 700\nactive-min-w = 300\n"
            "[gpu-thresholds X3]\nactive-min-w = 300\n");
  const auto th = load_thresholds({dir_ + "/bad"});
  ASSERT_EQ(th.errors.size(), 4u);
  EXPECT_EQ(th.errors[0].file(), f);
  EXPECT_EQ(th.errors[0].line(), 3);
  EXPECT_NE(std::string(th.errors[0].what()).find("power-actve-w"), std::string::npos);
  EXPECT_EQ(th.errors[1].line(), 4);
  EXPECT_NE(std::string(th.errors[1].what()).find("lots"), std::string::npos);
  EXPECT_NE(std::string(th.errors[2].what()).find("below"), std::string::npos);
  EXPECT_NE(std::string(th.errors[3].what()).find("go together"), std::string::npos);
}

TEST_F(ThresholdsTest, OtherCatalogsProblemsAreNotReportedAsThresholdErrors) {
  write("mixed/log-signatures.rules",
        "this is not a rules line\n[signature oom]\npattern = Killed\n");
  write("mixed/gpu-thresholds.rules", "[host-thresholds default]\nmem-near-limit-pct = 90\n");
  const auto th = load_thresholds({dir_ + "/mixed"});
  EXPECT_TRUE(th.errors.empty()) << th.errors.front().what();
  EXPECT_EQ(th.host.mem_near_limit_pct, 90);
}

}  // namespace
}  // namespace triage::tsdb::testing
