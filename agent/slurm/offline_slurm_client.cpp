#include "agent/slurm/offline_slurm_client.h"

namespace triage::agent {

namespace {

class OfflineSlurmClient : public SlurmClient {
 public:
  explicit OfflineSlurmClient(std::string reason) : reason_(std::move(reason)) {}

  std::optional<JobFacts> load_job(uint64_t, std::string& error) override {
    error = reason_;
    return std::nullopt;
  }
  std::optional<SlurmNodeState> load_node(const std::string&, std::string& error) override {
    error = reason_;
    return std::nullopt;
  }
  std::map<std::string, std::string> node_addresses(const std::vector<std::string>&,
                                                    std::string& error) override {
    error = reason_;
    return {};
  }
  bool drain_node(const std::string&, const std::string&, std::string& error) override {
    error = reason_;
    return false;
  }
  bool undrain_node(const std::string&, const std::string&, std::string& error) override {
    error = reason_;
    return false;
  }

 private:
  std::string reason_;
};

}  // namespace

std::unique_ptr<SlurmClient> make_offline_slurm_client(std::string reason) {
  return std::make_unique<OfflineSlurmClient>(std::move(reason));
}

}  // namespace triage::agent
