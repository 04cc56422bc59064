// Jobs in the training harness's layout (outputs/<id>-<name>.log beside outputs/<id>-<name>/ with
// a `log` symlink), submitted by the test user, and the agent's "done with this job" signal.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/e2e/slurm_cluster.h"

namespace triage::testing {

struct LayoutJob {
  std::string dir;  // the submission directory (holds outputs/)
  std::string name;
  uint32_t id = 0;

  std::filesystem::path job_dir() const;
  std::filesystem::path log() const;
};

// Writes job.sh in a fresh directory for `case_name` and submits it as `user` (default: the test
// user). `body` runs after the job directory and its log symlink exist; `$d` is the job directory
// and `now` prints a timestamp.
LayoutJob submit_layout_job(const SlurmCluster& c, const std::string& case_name,
                            const std::string& job_name, const std::string& body,
                            const std::vector<std::string>& extra_args = {},
                            const std::string& user = SlurmCluster::kUser);

// Training-step lines for rank 0, 0.1 s apart (for a job body).
extern const char* const kStepLines;
// A step a second for `steps` seconds, then `then` (a silence: a hang, for the live loop). No
// timestamps of their own: the agent dates them by when it reads them, as it does for most
// training loops' output. kStepsThenSleep: 30 steps, then `sleep 600`.
std::string steps_then(int steps, const std::string& then);
extern const std::string kStepsThenSleep;

// A job on two nodes whose rank 1 is killed (SIGKILL) on the second node while rank 0 finishes on
// the first; the batch script exits 137.
LayoutJob submit_rank1_killed_on_second_node(const SlurmCluster& c, const std::string& case_name);

// Waits until the agent on `node` (default: the first) has the job's analysis summary in its
// spool (report written, skipped for --triage=off, or failed) and returns it.
nlohmann::json wait_for_analysis(const SlurmCluster& c, uint32_t id, const std::string& node = "",
                                 std::chrono::milliseconds timeout = std::chrono::seconds(90));

std::string slurp(const std::filesystem::path& p);

// Polls `pred` every `every` until it holds or `timeout` passes; then its last answer.
bool within(std::chrono::seconds timeout, const std::function<bool()>& pred,
            std::chrono::milliseconds every = std::chrono::seconds(1));

// `key` of a job as SlurmCluster::job() shows it; "" when scontrol printed no such key.
std::string job_field(const std::map<std::string, std::string>& job, const std::string& key);

// A regular file (not a symlink) owned by the test user; gtest failures otherwise.
void expect_users_regular_file(const SlurmCluster& c, const std::filesystem::path& p);

}  // namespace triage::testing
