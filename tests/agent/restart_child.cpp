// The agent process the restart test kills: a real Agent (spool, socket, HTTP, analyses) fed
// kernel events by a thread that resumes from the agent's own durable position, exactly like the
// kernel-ingest glue does.
//
//   agent_restart_child CONFIG_FILE TOTAL_EVENTS
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>
#include <thread>

#include "agent/agent.h"
#include "agent/slurm/offline_slurm_client.h"
#include "common/logging.h"
#include "common/text.h"
#include "tests/agent/restart_events.h"

int main(int argc, char** argv) {
  using namespace triage::agent;
  if (argc != 3) {
    (void)std::fprintf(stderr, "usage: agent_restart_child CONFIG_FILE TOTAL_EVENTS\n");
    return 2;
  }
  const uint64_t total = triage::parse_uint(argv[2]).value_or(0);
  triage::init_logging("restart-child", "info");
  ConfigLoad load = load_agent_config(argv[1]);
  if (!load.errors.empty()) {
    (void)std::fprintf(stderr, "%s\n", load.errors.front().what());
    return 1;
  }
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  AgentOptions options;
  options.boot_id = "boot-r";
  options.collectors = false;
  Agent agent(load.config, make_offline_slurm_client("no controller in this test"), options);
  agent.start();
  std::atomic<bool> done{false};
  std::thread feeder([&] {
    // Resume after the last durable position, as the journal glue does with its cursor.
    const std::string pos = agent.kernel_position();
    uint64_t next = pos.empty() ? 0 : triage::parse_uint(pos.substr(4)).value_or(0) + 1;
    while (next < total) {
      std::vector<triage::KernelEvent> batch;
      const uint64_t end = std::min(total, next + 7);
      for (uint64_t i = next; i < end; ++i)
        batch.push_back(triage::agent::testing::restart_event(i));
      if (!agent.ingest(std::move(batch), triage::agent::testing::restart_position(end - 1))) break;
      next = end;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    done = true;
  });
  std::thread signals([&] {
    int sig = 0;
    sigwait(&stop, &sig);
    agent.stop();
  });
  signals.detach();
  std::printf("READY %d\n", agent.http_port());
  // A READY that never arrives fails the parent's test with the agent's log: no need to check here.
  (void)std::fflush(stdout);
  agent.run();
  feeder.join();
  return 0;
}
