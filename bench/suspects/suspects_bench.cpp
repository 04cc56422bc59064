// `slurm-triage nodes --suspects` at scale: 64 agents (fake ones, each on its own 127.0.0.1 port)
// serve 10,000 jobs of outcome history each (tests/agent/history_fixture.h: jobs of 1-16 nodes,
// one lemon); the bench times what the command does between asking and printing: the parallel,
// munge-authenticated GET /v1/history, the merge and the ranking. Target (issue 14): under 2 s.
//
// For scale, `grep -c job_id` over the same bytes is timed in this process.
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "agent/history/history_gather.h"
#include "agent/history/suspect_nodes.h"
#include "agent/net/munge_auth.h"
#include "common/text.h"
#include "tests/agent/fake_history_agent.h"
#include "tests/agent/history_fixture.h"

namespace {

using namespace triage;
using namespace triage::agent;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// munged on a private key and socket in `dir`, for the agents' credentials.
pid_t start_munged(const std::string& dir, const std::string& socket) {
  {
    std::ofstream key(dir + "/munge.key", std::ios::binary);
    std::ifstream rnd("/dev/urandom", std::ios::binary);
    std::string bytes(1024, '\0');
    rnd.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    key << bytes;
  }
  std::filesystem::permissions(
      dir + "/munge.key", std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string args[] = {"munged",
                                "--socket=" + socket,
                                "--key-file=" + dir + "/munge.key",
                                "--pid-file=" + dir + "/munged.pid",
                                "--log-file=" + dir + "/munged.log",
                                "--seed-file=" + dir + "/munged.seed",
                                "--foreground"};
    std::vector<char*> argv;
    for (const auto& a : args)
      argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    (void)std::freopen((dir + "/munged.stderr").c_str(), "w", stderr);
    ::execvp("munged", argv.data());
    ::_exit(127);
  }
  for (int i = 0; i < 200; ++i) {
    std::string error;
    if (munge_credential(socket, "probe", error)) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

double grep_seconds(const std::string& path) {
  const auto t0 = Clock::now();
  const std::string cmd = "grep -c job_id " + path + " >/dev/null";
  if (std::system(cmd.c_str()) != 0) return -1;
  return seconds_since(t0);
}

double cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

struct Args {
  size_t agents = 64;
  size_t per_agent = 10000;
  int rounds = 3;
};

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const auto v = parse_uint(argv[i + 1]).value_or(0);
    if (k == "--agents") a.agents = std::max<size_t>(2, v);
    if (k == "--jobs-per-agent") a.per_agent = std::max<size_t>(1, v);
    if (k == "--rounds") a.rounds = static_cast<int>(std::max<uint64_t>(1, v));
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args args = parse_args(argc, argv);
  char tmpl[] = "/tmp/suspects-bench-XXXXXX";
  const std::string dir = ::mkdtemp(tmpl);
  // munged wants its socket's directory reachable by everyone.
  std::filesystem::permissions(
      dir, std::filesystem::perms::others_exec | std::filesystem::perms::group_exec,
      std::filesystem::perm_options::add);
  const std::string socket = dir + "/munge.sock";
  const pid_t munged = start_munged(dir, socket);
  if (munged < 0) {
    (void)std::fprintf(stderr, "cannot start munged\n");
    return 1;
  }

  testing::HistorySpec spec;
  spec.nodes = args.agents;
  // A job runs on 7.4 nodes on average; every node ends up with a full window.
  spec.jobs = args.agents * args.per_agent * 10 / 65;
  auto t0 = Clock::now();
  const auto by_node = testing::histories_by_node(testing::generate_history(spec), args.per_agent);
  std::vector<std::unique_ptr<testing::FakeHistoryAgent>> agents;
  std::vector<std::string> nodes;
  size_t bytes = 0;
  size_t records = 0;
  {
    std::ofstream all(dir + "/all.json");
    for (const auto& [node, list] : by_node) {
      const std::string body = testing::history_answer(node, list);
      bytes += body.size();
      records += list.size();
      all << body << '\n';
      agents.push_back(std::make_unique<testing::FakeHistoryAgent>(body));
      nodes.push_back("127.0.0.1:" + std::to_string(agents.back()->port()));
    }
  }
  std::printf("setup: %zu agents, %zu records (%.1f MiB of JSON), %zu distinct jobs, %.1f s\n",
              agents.size(), records, static_cast<double>(bytes) / (1 << 20), spec.jobs,
              seconds_since(t0));

  PeerFetchOptions fetch;
  fetch.munge_socket = socket;
  fetch.timeout_ms = 60000;
  std::vector<double> times;
  for (int round = 0; round < args.rounds; ++round) {
    t0 = Clock::now();
    const double cpu0 = cpu_seconds();
    const GatheredHistory g = gather_history(nodes, 0, fetch);
    const double gathered = seconds_since(t0);
    const SuspectRanking r = rank_suspects(g.jobs, SuspectPolicy{});
    times.push_back(seconds_since(t0));
    std::printf(
        "round %d: gather+merge+rank %.3f s (gather %.3f s; CPU %.2f s, fake agents "
        "included): %zu agents reached, %zu unreachable, %zu jobs, "
        "%zu suspects%s%s\n",
        round + 1, times.back(), gathered, cpu_seconds() - cpu0, g.reached.size(),
        g.unreachable.size(), g.jobs.size(), r.suspects.size(),
        r.suspects.empty() ? "" : ", first ", r.suspects.empty() ? "" : r.suspects[0].node.c_str());
  }
  std::sort(times.begin(), times.end());
  std::printf(
      "nodes --suspects over %zu agents x %zu jobs: median %.3f s, best %.3f s "
      "(target < 2 s); grep -c job_id over the same bytes: %.3f s\n",
      agents.size(), args.per_agent, times[times.size() / 2], times.front(),
      grep_seconds(dir + "/all.json"));
  agents.clear();
  ::kill(munged, SIGTERM);
  ::waitpid(munged, nullptr, 0);
  std::filesystem::remove_all(dir);
  return 0;
}
