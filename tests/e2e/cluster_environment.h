// One real cluster per test binary: started before the first test, stopped after the last, and
// reported (with the daemons' logs) in every test when it could not be started.
#pragma once

#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdio>

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "tests/e2e/slurm_cluster.h"

namespace triage::testing {

// Completes a binary's options just before its cluster starts (a setting naming a server the
// binary starts first, on a port known only then); throwing fails every test with its message.
using PrepareCluster = std::function<void(ClusterOptions&)>;

class ClusterEnvironment : public ::testing::Environment {
 public:
  explicit ClusterEnvironment(ClusterOptions options, PrepareCluster prepare = {})
      : options_(std::move(options)), prepare_(std::move(prepare)) {}

  void SetUp() override {
    try {
      if (prepare_) prepare_(options_);
      cluster_ = std::make_unique<SlurmCluster>(options_);
    } catch (const std::exception& e) {
      error_ = e.what();
    }
  }
  void TearDown() override { cluster_.reset(); }

  SlurmCluster* cluster() const { return cluster_.get(); }
  const std::string& error() const { return error_; }

 private:
  ClusterOptions options_;
  PrepareCluster prepare_;
  std::unique_ptr<SlurmCluster> cluster_;
  std::string error_;
};

// In a test body: `SlurmCluster& c = CLUSTER_OR_FAIL(env);`
#define CLUSTER_OR_FAIL(env)                                     \
  ([&]() -> ::triage::testing::SlurmCluster& {                   \
    if ((env)->cluster() == nullptr) {                           \
      throw std::runtime_error("no cluster: " + (env)->error()); \
    }                                                            \
    return *(env)->cluster();                                    \
  }())

#if defined(SPANK_TRIAGE_SO) && defined(SLURM_TRIAGE_AGENT) && defined(SLURM_TRIAGE_CLI)
// A cluster running this build's plugin, agent and analyzer (the paths CMake gives the binary).
inline ClusterOptions this_build_cluster() {
  ClusterOptions options;
  options.plugin = SPANK_TRIAGE_SO;
  options.agent = SLURM_TRIAGE_AGENT;
  options.analyzer = SLURM_TRIAGE_CLI;
  return options;
}

// Two nodes of this build, each agent reading its own kernel log (kernel-<node>.log in the state
// directory, which the tests append to), evidence settled after a second and a peer given 3 s.
inline ClusterOptions this_build_two_nodes() {
  ClusterOptions options = this_build_cluster();
  options.nodes = 2;
  options.agent_settings = {"EvidenceSettleDelay=1s", "PeerFetchTimeout=3s", "KernelSource=file",
                            "KernelPath=@STATE@/kernel-@NODE@.log"};
  return options;
}
#endif

// main() of a real-Slurm test binary: without root it reports "skipped" (CTest's
// SKIP_RETURN_CODE 77); otherwise every test runs against one cluster, reachable through `*env`,
// whose options `prepare` (when given) completes first.
inline int run_with_cluster(int argc, char** argv, const char* name, const ClusterOptions& options,
                            ClusterEnvironment** env, PrepareCluster prepare = {}) {
  ::testing::InitGoogleTest(&argc, argv);
  if (geteuid() != 0) {
    (void)std::fprintf(stderr, "%s: needs root (it starts Slurm daemons); skipped\n", name);
    return 77;
  }
  *env = new ClusterEnvironment(options, std::move(prepare));
  ::testing::AddGlobalTestEnvironment(*env);  // gtest owns it from here
  return RUN_ALL_TESTS();
}

}  // namespace triage::testing
