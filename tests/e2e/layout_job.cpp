#include "tests/e2e/layout_job.h"

#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace triage::testing {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kStepLines =
    "for i in $(seq 1 8); do echo \"0: [$(now)] completed step: $i, seconds: 0.100, loss: 9.1\"; "
    "sleep 0.1; done";

std::string steps_then(int steps, const std::string& then) {
  return "for i in $(seq 1 " + std::to_string(steps) +
         "); do echo \"0: completed step: $i, seconds: 1.000, loss: 9.1\"; sleep 1; done\n" + then;
}

const std::string kStepsThenSleep = steps_then(30, "sleep 600");

LayoutJob submit_rank1_killed_on_second_node(const SlurmCluster& c, const std::string& case_name) {
  return submit_layout_job(c, case_name, "two-nodes",
                           std::string(kStepLines) +
                               "\nsrun bash -c 'if [ $SLURM_PROCID = 1 ]; then kill -9 $$; fi; "
                               "sleep 1'\nexit 137",
                           {"-N", "2", "--ntasks-per-node", "1"});
}

fs::path LayoutJob::job_dir() const {
  return fs::path(dir) / "outputs" / (std::to_string(id) + "-" + name);
}

fs::path LayoutJob::log() const {
  return fs::path(dir) / "outputs" / (std::to_string(id) + "-" + name + ".log");
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

LayoutJob submit_layout_job(const SlurmCluster& c, const std::string& case_name,
                            const std::string& job_name, const std::string& body,
                            const std::vector<std::string>& extra_args, const std::string& user) {
  LayoutJob j;
  j.dir = c.make_job_dir(case_name, user);
  j.name = job_name;
  fs::create_directories(fs::path(j.dir) / "outputs");
  if (chown((j.dir + "/outputs").c_str(), c.uid_of(user), c.gid_of(user)) != 0) {
    throw std::runtime_error("chown " + j.dir + "/outputs failed");
  }
  std::ofstream(j.dir + "/job.sh")
      << "#!/bin/bash\n"
      << "d=outputs/${SLURM_JOB_ID}-${SLURM_JOB_NAME}\n"
      << "mkdir -p $d && ln -sfn ../${SLURM_JOB_ID}-${SLURM_JOB_NAME}.log $d/log\n"
      << "now() { date '+%Y-%m-%d %H:%M:%S'; }\n"
      << "echo \"SLURM_JOB_ID=$SLURM_JOB_ID\"\n"
      << "echo \"PASSTHROUGH_ARGS=steps=1000\"\n"
      << body << "\n";
  std::vector<std::string> args = {"-J", job_name, "-o", "outputs/%j-%x.log"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  args.push_back("job.sh");
  j.id = c.sbatch_as(user, j.dir, args);
  return j;
}

json wait_for_analysis(const SlurmCluster& c, uint32_t id, const std::string& node,
                       std::chrono::milliseconds timeout) {
  const fs::path spool =
      fs::path(c.inbox_dir(node)).parent_path() / "jobs" / (std::to_string(id) + ".jsonl");
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    std::istringstream lines(slurp(spool));
    std::string line;
    while (std::getline(lines, line)) {
      auto j = json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("r", "") == "analysis") return j;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  throw std::runtime_error("the agent never finished job " + std::to_string(id) + "\n" + c.logs());
}

void expect_users_regular_file(const SlurmCluster& c, const fs::path& p) {
  struct stat st {};
  ASSERT_EQ(lstat(p.c_str(), &st), 0) << p << " is missing";
  EXPECT_TRUE(S_ISREG(st.st_mode)) << p << " is not a regular file";
  EXPECT_EQ(st.st_uid, c.user_uid()) << p;
  EXPECT_EQ(st.st_gid, c.user_gid()) << p;
}

bool within(std::chrono::seconds timeout, const std::function<bool()>& pred,
            std::chrono::milliseconds every) {
  const auto end = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(every);
  }
  return pred();
}

std::string job_field(const std::map<std::string, std::string>& job, const std::string& key) {
  const auto it = job.find(key);
  return it == job.end() ? "" : it->second;
}

}  // namespace triage::testing
