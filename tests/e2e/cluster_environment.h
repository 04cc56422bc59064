// One real cluster per test binary: started before the first test, stopped after the last, and
// reported (with the daemons' logs) in every test when it could not be started.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/e2e/slurm_cluster.h"

namespace triage::testing {

class ClusterEnvironment : public ::testing::Environment {
 public:
  explicit ClusterEnvironment(ClusterOptions options) : options_(std::move(options)) {}

  void SetUp() override {
    try {
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

}  // namespace triage::testing
