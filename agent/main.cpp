// slurm-triage-agent: the node agent (see agent/agent.h and docs/agent.md).
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/base/config.h"
#include "agent/slurm/offline_slurm_client.h"
#include "common/build_config.h"
#include "common/logging.h"

namespace {

void usage(FILE* out) {
  (void)std::fprintf(
      out,
      "usage: slurm-triage-agent [--config PATH] [--set Key=Value]... [--check-config]\n"
      "\n"
      "The slurm-triage node agent: collects kernel and hardware evidence, attributes it to\n"
      "Slurm jobs, serves the local socket and the HTTP endpoint, and runs the analysis\n"
      "when a job ends.\n"
      "\n"
      "  --config PATH       configuration file (default %s/triage.conf)\n"
      "  --set Key=Value     override one configuration key (repeatable)\n"
      "  --check-config      validate the configuration, print every key, and exit\n"
      "  --print-example     print an example triage.conf with every key and exit\n"
      "  --version           print the version and exit\n",
      triage::kSysconfDir);
}

std::unique_ptr<triage::agent::SlurmClient> slurm_client() {
  try {
    return triage::agent::make_libslurm_client();
  } catch (const std::exception& e) {
    spdlog::error("libslurm client unavailable ({}); using the epilog's facts, auto-drain disabled",
                  e.what());
    return triage::agent::make_offline_slurm_client(e.what());
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = std::string(triage::kSysconfDir) + "/triage.conf";
  std::vector<std::string> overrides;
  bool check_only = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--config" || a == "-c") && i + 1 < argc) {
      config_path = argv[++i];
    } else if (a.rfind("--config=", 0) == 0) {
      config_path = a.substr(9);
    } else if (a == "--set" && i + 1 < argc) {
      overrides.emplace_back(argv[++i]);
    } else if (a == "--check-config") {
      check_only = true;
    } else if (a == "--print-example") {
      const bool written = std::fputs(triage::agent::render_config_example().c_str(), stdout) >= 0;
      return written && std::fflush(stdout) == 0 ? 0 : 1;
    } else if (a == "--version" || a == "-V") {
      std::printf("slurm-triage-agent %s\n", triage::kVersion);
      return 0;
    } else if (a == "--help" || a == "-h") {
      usage(stdout);
      return 0;
    } else {
      (void)std::fprintf(stderr, "slurm-triage-agent: unknown argument '%s'\n\n", a.c_str());
      usage(stderr);
      return 2;
    }
  }

  // A missing file is fine only when it is the default one: the defaults then apply.
  const bool default_path = config_path == std::string(triage::kSysconfDir) + "/triage.conf";
  const bool exists = ::access(config_path.c_str(), F_OK) == 0;
  triage::agent::ConfigLoad load =
      triage::agent::load_agent_config(exists || !default_path ? config_path : "", overrides);
  if (!load.errors.empty()) {
    for (const auto& e : load.errors)
      (void)std::fprintf(stderr, "%s\n", e.what());
    (void)std::fprintf(stderr, "slurm-triage-agent: %zu configuration error(s)\n",
                       load.errors.size());
    return 1;
  }
  if (check_only) {
    const bool written = std::fputs(load.dump.c_str(), stdout) >= 0;
    return written && std::fflush(stdout) == 0 ? 0 : 1;
  }

  triage::init_logging("slurm-triage-agent", load.config.log_level);
  // SIGTERM/SIGINT are taken by a thread of their own, so every other thread keeps them blocked.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  triage::agent::AgentOptions options;
  options.notify_systemd = std::getenv("NOTIFY_SOCKET") != nullptr;
  triage::agent::Agent agent(load.config, slurm_client(), options);
  try {
    agent.start();
  } catch (const std::exception& e) {
    spdlog::critical("cannot start: {}", e.what());
    return 1;
  }
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop_signals, &sig);
    spdlog::info("received {}; shutting down", strsignal(sig));
    agent.stop();
  });
  signals.detach();
  try {
    agent.run();
  } catch (const std::exception& e) {
    spdlog::critical("event loop failed: {}", e.what());
    return 1;
  }
  spdlog::info("stopped");
  return 0;
}
