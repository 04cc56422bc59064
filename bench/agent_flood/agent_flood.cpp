// One ordinary user flooding the node agent (issue 29), timed from everyone else's side: the real
// slurm-triage-agent, started as root beside a private munged, answers another user's get_job and
// health, root's lifecycle messages as the SPANK plugin sends them (root socket first), and a
// munge-authenticated peer's evidence fetch, while `nobody`
//   - holds 1,000 connections to SocketPath (idle, half a request line, a pipeline never read),
//     every one the agent closes opened again;
//   - reconnects to SocketPath unpaced (connect, nothing or a junk line, close);
//   - holds 1,000 connections to the HTTP port from 127.0.0.2 (idle, half a /metrics request, a
//     whole one never read), while the peer fetches from 127.0.0.2 (the flood's own address) and
//     from 127.0.0.1.
// Each request is timed by its sender, with no flood first: the baseline, in the same run. Printed
// per kind: count, failures, p50, p90, p99, max, how many took more than 50 ms (the issue's
// budget), and the flood's p50 and p99 over the baseline's.
//
// Run as root from the RelWithDebInfo build (munged installed):
//   build/bench/agent_flood/agent_flood [--rounds 200] [--agent PATH]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "agent/net/munge_auth.h"
#include "bench/support/unix_request.h"
#include "common/text.h"
#include "spank/agent_link.h"
#include "tests/agent/munge_daemon.h"
#include "tests/agent/server/floods.h"

namespace {

using namespace triage;
using namespace triage::agent::testing;
using Clock = std::chrono::steady_clock;

constexpr uid_t kNobody = 65534;  // the flooder
constexpr uid_t kOtherUser = 2;   // bin: asks for their own job and the node's health
constexpr uid_t kJobOwner = 3;    // sys: owns the jobs whose plugin messages root posts
constexpr int kFloodConnections = 1000;
constexpr double kBudgetMs = 50;
constexpr uint64_t kUserJob = 700;
constexpr uint64_t kPeerJob = 4242;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// One kind of request's times in one phase; a failed request counts as failed, its time is kept.
struct Times {
  std::vector<double> ms;
  int failed = 0;
  void add(double m, bool ok) {
    ms.push_back(m);
    if (!ok) ++failed;
  }
};

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(std::lround(p * static_cast<double>(v.size() - 1)))];
}

// kind -> phase -> times.
using Table = std::map<std::string, std::map<std::string, Times>>;

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// The agent binary as a service runs it (root, its own process), without Slurm: `slurm_conf` is
// a file libslurm refuses at once, so the agent takes the epilog's facts (the offline client).
// (With no file at all libslurm would first look for a configless slurmctld, for many seconds.)
class AgentProcess {
 public:
  AgentProcess(const std::string& binary, const std::string& config, const std::string& slurm_conf,
               const std::string& log) {
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setenv("SLURM_CONF", slurm_conf.c_str(), 1);
      std::FILE* out = std::freopen(log.c_str(), "w", stderr);
      if (out != nullptr) ::dup2(::fileno(stderr), 1);
      ::execl(binary.c_str(), binary.c_str(), "--config", config.c_str(),
              static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~AgentProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  AgentProcess(const AgentProcess&) = delete;
  AgentProcess& operator=(const AgentProcess&) = delete;
  bool alive() const { return pid_ > 0 && ::waitpid(pid_, nullptr, WNOHANG) == 0; }

 private:
  pid_t pid_ = -1;
};

bool acknowledged(const std::string& answer) {
  const auto j = nlohmann::json::parse(answer, nullptr, false);
  return j.is_object() && j.value("ok", false);
}

std::string lifecycle(const std::string& op, uint64_t job, const std::string& msg_id,
                      nlohmann::json fields) {
  fields["op"] = op;
  fields["job_id"] = job;
  fields["msg_id"] = msg_id;
  return fields.dump() + "\n";
}

// As the plugin sends: the root socket beside `socket_path` first, 5 s to be acknowledged (long
// enough that a slow answer is measured rather than cut short).
bool plugin_send(const std::string& socket_path, const std::string& line) {
  char why[256] = {};
  return triage::spank::send_to_agent(socket_path.c_str(), 5000, line, why, sizeof why);
}

// The other user's requests, `rounds` of get_job and health 10 ms apart, sent from a child
// dropped to their uid that times each exchange itself (the fork is not the agent's latency).
void user_rounds(const std::string& socket_path, int rounds, const std::string& phase, Table& t) {
  int out[2];
  if (::pipe(out) != 0) return;
  const pid_t child = ::fork();
  if (child == 0) {
    ::close(out[0]);
    drop_to(kOtherUser);
    std::string report;
    const std::string get_job = R"({"op":"get_job","job_id":)" + std::to_string(kUserJob) + "}";
    for (int r = 0; r < rounds; ++r) {
      for (const std::string& req : {get_job, std::string(R"({"op":"health"})")}) {
        const auto t0 = Clock::now();
        const std::string answer = triage::bench::unix_request(socket_path, req);
        report += (req == get_job ? "get_job " : "health ") + std::to_string(ms_since(t0)) +
                  (acknowledged(answer) ? " ok\n" : " failed\n");
      }
      ::usleep(10000);
    }
    (void)!::write(out[1], report.data(), report.size());
    ::_exit(0);
  }
  ::close(out[1]);
  std::string report;
  char buf[4096];
  ssize_t n = 0;
  while ((n = ::read(out[0], buf, sizeof buf)) > 0)
    report.append(buf, static_cast<size_t>(n));
  ::close(out[0]);
  ::waitpid(child, nullptr, 0);
  std::istringstream lines(report);
  std::string kind;
  double ms = 0;
  std::string verdict;
  while (lines >> kind >> ms >> verdict)
    t["user " + kind][phase].add(ms, verdict == "ok");
}

// Root's messages for `rounds` jobs of kJobOwner, as the plugin posts them: job_start, one
// task_exit, job_end, 10 ms apart, each on a fresh connection.
void root_rounds(const std::string& socket_path, int rounds, uint64_t first_job,
                 const std::string& phase, Table& t) {
  for (int r = 0; r < rounds; ++r) {
    const uint64_t job = first_job + static_cast<uint64_t>(r);
    const std::string id = "node001:" + std::to_string(job);
    const std::string msgs[][2] = {
        {"root job_start",
         lifecycle("job_start", job, id + ":start",
                   {{"uid", kJobOwner}, {"gid", kJobOwner}, {"nodelist", "node001"}})},
        {"root task_exit",
         lifecycle("task_exit", job, id + ":0:0",
                   {{"step", "0"}, {"task", 0}, {"pid", 5000 + r}, {"wait_status", 0}})},
        {"root job_end", lifecycle("job_end", job, id + ":end", {{"wait_status", 0}})}};
    for (const auto& m : msgs) {
      const auto t0 = Clock::now();
      const bool ok = plugin_send(socket_path, m[1]);
      t[m[0]][phase].add(ms_since(t0), ok);
      ::usleep(10000);
    }
  }
}

// The other user's and root's requests at once, as they would come on a node.
void local_rounds(const std::string& socket_path, int rounds, uint64_t first_job,
                  const std::string& phase, Table& t) {
  Table user;
  std::thread u([&] { user_rounds(socket_path, rounds, phase, user); });
  root_rounds(socket_path, rounds, first_job, phase, t);
  u.join();
  for (auto& [kind, phases] : user)
    t[kind][phase] = phases[phase];
}

// GET `target` from `source` with a munge credential made beforehand (a peer agent's fetch; the
// credential is not the agent's latency), read to the end. Returns whether the answer was 200.
bool fetch(const std::string& source, int port, const std::string& munge_socket,
           const std::string& target, double& ms) {
  std::string error;
  const auto cred = triage::agent::munge_credential(munge_socket, target, error);
  ms = 0;
  if (!cred) return false;
  const std::string request = "GET " + target +
                              " HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Munge " + *cred +
                              "\r\n\r\n";
  const auto t0 = Clock::now();
  const int fd = connect_tcp_from(source, port);
  if (fd < 0) {
    ms = ms_since(t0);
    return false;
  }
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const std::string answer = read_answer(fd, false);
  ::close(fd);
  ms = ms_since(t0);
  return answer.rfind("HTTP/1.1 200", 0) == 0;
}

// The agent's refusal counters (and clients), to show what each flood met.
std::string refusals(int port) {
  const int fd = connect_tcp_from("127.0.0.1", port);
  if (fd < 0) return "(no /metrics)";
  const std::string request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  const std::string answer = read_answer(fd, false);
  ::close(fd);
  std::string out;
  std::istringstream lines(answer);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("triage_socket_refused", 0) == 0 || line.rfind("triage_http_refused", 0) == 0)
      out += "  " + line + "\n";
  }
  return out;
}

void peer_rounds(int port, const std::string& munge_socket, int rounds, const std::string& phase,
                 Table& t) {
  const std::string target = "/v1/jobs/" + std::to_string(kPeerJob) + "/events";
  for (int r = 0; r < rounds; ++r) {
    for (const char* source : {kFloodAddress, "127.0.0.1"}) {
      double ms = 0;
      const bool ok = fetch(source, port, munge_socket, target, ms);
      t[std::string("peer fetch from ") + source][phase].add(ms, ok);
    }
    ::usleep(10000);
  }
}

void print(const Table& t) {
  std::printf("%-27s %-16s %5s %4s %8s %8s %8s %8s %6s %8s %8s\n", "request", "phase", "count",
              "fail", "p50 ms", "p90 ms", "p99 ms", "max ms", ">50ms", "p50/base", "p99/base");
  for (const auto& [kind, phases] : t) {
    const auto base = phases.find("no flood");
    for (const char* phase : {"no flood", "1000 held", "reconnecting"}) {
      const auto it = phases.find(phase);
      if (it == phases.end()) continue;
      const Times& times = it->second;
      const double p50 = percentile(times.ms, 0.5);
      const double p99 = percentile(times.ms, 0.99);
      const auto over =
          std::count_if(times.ms.begin(), times.ms.end(), [](double m) { return m > kBudgetMs; });
      std::printf("%-27s %-16s %5zu %4d %8.2f %8.2f %8.2f %8.2f %6ld", kind.c_str(), phase,
                  times.ms.size(), times.failed, p50, percentile(times.ms, 0.9), p99,
                  times.ms.empty() ? 0.0 : *std::max_element(times.ms.begin(), times.ms.end()),
                  static_cast<long>(over));
      if (base != phases.end() && it != base && !base->second.ms.empty()) {
        std::printf(" %8.1f %8.1f", p50 / percentile(base->second.ms, 0.5),
                    p99 / percentile(base->second.ms, 0.99));
      }
      std::printf("\n");
    }
  }
}

bool raise_fd_limit() {
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0) return false;
  rl.rlim_cur = rl.rlim_max;
  return ::setrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur >= kFloodConnections + 200;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 200;
  std::string binary = AGENT_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--rounds" && parse_int(argv[i + 1]).value_or(0) > 0) {
      rounds = static_cast<int>(*parse_int(argv[i + 1]));
    } else if (a == "--agent") {
      binary = argv[i + 1];
    } else {
      (void)std::fprintf(stderr, "usage: agent_flood [--rounds N] [--agent PATH]\n");
      return 2;
    }
  }
  if (argc % 2 == 0) {
    (void)std::fprintf(stderr, "usage: agent_flood [--rounds N] [--agent PATH]\n");
    return 2;
  }
  if (::geteuid() != 0) {
    (void)std::fprintf(stderr,
                       "agent_flood: run as root (the flood and the users are test uids)\n");
    return 2;
  }
  if (!raise_fd_limit()) {
    (void)std::fprintf(stderr, "agent_flood: the descriptor limit is below %d\n",
                       kFloodConnections + 200);
    return 1;
  }
  (void)::signal(SIGPIPE, SIG_IGN);
  std::string tmpl = "/tmp/agent-flood-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    (void)std::fprintf(stderr, "agent_flood: cannot make a directory under /tmp\n");
    return 1;
  }
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0755);  // the test uids reach the socket inside
  for (const char* sub : {"/proc", "/sys", "/cgroup", "/munge"})
    std::filesystem::create_directories(dir + sub);
  std::ofstream(dir + "/proc/stat") << "cpu 1 2 3 4\nprocs_running 1\nprocs_blocked 0\n";
  int status = 0;
  {
    const MungeDaemon munge(dir + "/munge");
    if (!munge.ok()) {
      (void)std::fprintf(stderr, "agent_flood: munged did not start (see %s/munge)\n", dir.c_str());
      return 1;
    }
    const int port = free_tcp_port();
    const std::string socket_path = dir + "/agent.sock";
    std::ofstream(dir + "/triage.conf")
        << "NodeName=node001\nSpoolDir=" << dir << "/spool\nSocketPath=" << socket_path
        << "\nHttpAddress=127.0.0.1\nHttpPort=" << port << "\nKernelSource=none\nProcRoot=" << dir
        << "/proc\nSysfsRoot=" << dir << "/sys\nCgroupRoot=" << dir
        << "/cgroup\nAnalyzerPath=/bin/true\nEvidenceSettleDelay=0\nSlurmUser=daemon\nMungeSocket="
        << munge.socket() << "\nLogLevel=warn\n";
    std::ofstream(dir + "/slurm.conf") << "NotASlurmKey=1\n";
    const AgentProcess agent(binary, dir + "/triage.conf", dir + "/slurm.conf", dir + "/agent.log");
    bool up = false;
    for (int i = 0; i < 300 && !up; ++i) {
      up = acknowledged(triage::bench::unix_request(socket_path, R"({"op":"ping"})"));
      if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    const bool jobs =
        up &&
        plugin_send(
            socket_path,
            lifecycle("job_start", kUserJob, "u",
                      {{"uid", kOtherUser}, {"gid", kOtherUser}, {"nodelist", "node001"}})) &&
        plugin_send(socket_path,
                    lifecycle("job_start", kPeerJob, "p",
                              {{"uid", kNobody}, {"gid", kNobody}, {"nodelist", "node001"}}));
    if (!jobs) {
      (void)std::fprintf(stderr, "agent_flood: the agent did not come up (see %s/agent.log)\n",
                         dir.c_str());
      return 1;
    }
    std::printf("agent_flood: %s, %d rounds per phase, flood of %d connections by uid %u\n",
                binary.c_str(), rounds, kFloodConnections, kNobody);
    Table t;
    // Once before anything is timed: one-time costs (munge's context, the first evidence) are
    // nobody's latency.
    double warm = 0;
    (void)fetch("127.0.0.1", port, munge.socket(), "/v1/jobs/4242/events", warm);
    local_rounds(socket_path, rounds, 100000, "no flood", t);
    {
      HoldingFlood flood(kNobody, kFloodConnections,
                         [&](int i) { return socket_flood_connection(socket_path, i); });
      if (!flood.started()) (void)std::fprintf(stderr, "agent_flood: the socket flood stalled\n");
      std::this_thread::sleep_for(std::chrono::seconds(1));
      local_rounds(socket_path, rounds, 200000, "1000 held", t);
      std::printf("after the held socket flood:\n%s", refusals(port).c_str());
    }
    {
      ReconnectFlood flood(kNobody, socket_path);
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      local_rounds(socket_path, rounds, 300000, "reconnecting", t);
      std::printf("after the reconnect flood:\n%s", refusals(port).c_str());
    }
    peer_rounds(port, munge.socket(), rounds, "no flood", t);
    {
      HoldingFlood flood(kNobody, kFloodConnections,
                         [&](int i) { return http_flood_connection(kFloodAddress, port, i); });
      if (!flood.started()) (void)std::fprintf(stderr, "agent_flood: the HTTP flood stalled\n");
      std::this_thread::sleep_for(std::chrono::seconds(1));
      peer_rounds(port, munge.socket(), rounds, "1000 held", t);
      std::printf("after the HTTP flood:\n%s", refusals(port).c_str());
    }
    print(t);
    if (!agent.alive()) {
      (void)std::fprintf(stderr, "agent_flood: the agent died (see %s/agent.log)\n", dir.c_str());
      status = 1;
    }
  }
  if (status == 0) std::filesystem::remove_all(dir);
  return status;
}
