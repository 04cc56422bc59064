// Shared fixture: a private directory per test (job dirs, scratch), a TsdbRequest filled from a
// scenario the way the log triage would fill it, and the checks every analysis must pass (the
// private server and its copy are gone afterwards).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <csignal>
#include <nlohmann/json.hpp>
#include <string>

#include <gtest/gtest.h>

#include "analyzer/tsdb/tsdb.h"
#include "tests/tsdb/scenario.h"

namespace triage::tsdb::testing {

inline bool port_accepts(uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(s);
  return ok;
}

inline uint16_t port_of(const std::string& url) {
  const auto colon = url.rfind(':');
  if (colon == std::string::npos) return 0;
  return static_cast<uint16_t>(std::stoi(url.substr(colon + 1)));
}

inline bool pid_alive(pid_t pid) {
  return pid > 0 && ::kill(pid, 0) == 0;
}

class TsdbTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // Outside the build tree: the command under test reads job directories as their owner, who
    // cannot reach a checkout under a directory closed to other users (/root, a mktemp -d).
    std::string tmpl =
        std::string("/tmp/triage-tsdb-") + info->test_suite_name() + "." + info->name() + "-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) FAIL() << "mkdtemp " << tmpl << " failed";
    dir_ = tmpl;
    ::chmod(dir_.c_str(), 0755);
    std::filesystem::create_directories(dir_ + "/scratch");
  }
  void TearDown() override {
    if (dir_.empty()) return;
    if (HasFailure()) {
      std::cout << "kept for a look: " << dir_ << "\n";
    } else {
      std::filesystem::remove_all(dir_);
    }
  }

  std::string job_dir(const std::string& name = "job") const { return dir_ + "/" + name; }

  // What the log triage hands over for a job made from `sc`.
  TsdbRequest request(const Scenario& sc, const std::string& cls,
                      const std::string& name = "job") const {
    TsdbRequest r;
    r.job_dir = job_dir(name);
    r.job_id = name;
    r.job_start = sc.start();
    r.job_end = sc.end();
    r.hosts = sc.spec().hosts;
    r.triage_class = cls;
    if (sc.last_step() >= 0) {
      r.last_step = sc.last_step();
      r.last_loss = sc.loss_of(sc.last_step());
      r.last_step_time = sc.last_step_time();
    }
    r.checkpoint_period = sc.spec().checkpoint_period;
    r.liveness = JobLiveness::kFinished;
    r.scratch_dir = dir_ + "/scratch";
    r.rule_layers = {TSDB_RULES_DIR};
    r.query_timeout_s = 30;
    return r;
  }

  // Runs the analysis and checks that nothing of the private server outlived it.
  TsdbResult analyse(const TsdbRequest& req) {
    TsdbResult res = run_tsdb_analysis(req);
    if (std::getenv("TSDB_TEST_DUMP") != nullptr)
      std::cout << dump(res) << res.to_json().dump(1).substr(0, 4000) << "\n";
    EXPECT_TRUE(std::filesystem::is_empty(req.scratch_dir))
        << "the TSDB copy was left behind in " << req.scratch_dir;
    if (res.source.kind == "job-tsdb" || res.source.kind == "job-tsdb-blocks") {
      const uint16_t p = port_of(res.source.url);
      if (p != 0) {
        EXPECT_FALSE(port_accepts(p))
            << "the private prometheus still listens on " << res.source.url;
      }
    }
    return res;
  }

  static const PlaybookResult& playbook(const TsdbResult& r, const std::string& id) {
    for (const auto& p : r.playbooks) {
      if (p.id == id) return p;
    }
    ADD_FAILURE() << "playbook " << id << " did not run:\n" << dump(r);
    static const PlaybookResult none;
    return none;
  }

  static std::string dump(const TsdbResult& r) { return r.render_markdown({"", 2}); }

  std::string dir_;
};

}  // namespace triage::tsdb::testing
