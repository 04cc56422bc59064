#include "tests/e2e/slurm_cluster.h"

#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <deque>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

namespace triage::testing {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

std::string slurm_cluster_script() {
  return SLURM_CLUSTER_SCRIPT;
}

namespace {

// A socket bound to 127.0.0.`host`:`port` (port 0: any free one), or -1.
int bind_loopback(uint16_t port, uint8_t host = 1) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl((uint32_t{127} << 24) | uint32_t{host});
  a.sin_port = htons(port);
  // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace

int free_port(int count) {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int probe = bind_loopback(0);
    if (probe < 0) throw std::runtime_error("free_port: bind failed");
    sockaddr_in a{};
    socklen_t len = sizeof(a);
    // NOLINTNEXTLINE(cppcoreguidelines-pro-type-reinterpret-cast)
    getsockname(probe, reinterpret_cast<sockaddr*>(&a), &len);
    const int base = ntohs(a.sin_port);
    std::vector<int> held{probe};
    bool all_free = true;
    for (int k = 1; k < count && all_free; ++k) {
      const int on_first = base + k <= 65535 ? bind_loopback(static_cast<uint16_t>(base + k)) : -1;
      const int on_own = bind_loopback(static_cast<uint16_t>(base), static_cast<uint8_t>(k + 1));
      all_free = on_first >= 0 && on_own >= 0;
      for (const int fd : {on_first, on_own}) {
        if (fd >= 0) held.push_back(fd);
      }
    }
    for (const int fd : held)
      close(fd);
    if (all_free) return base;
  }
  throw std::runtime_error("free_port: no " + std::to_string(count) + " consecutive free ports");
}

std::string short_hostname() {
  char buf[256] = {};
  gethostname(buf, sizeof(buf) - 1);
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

namespace {

std::string tail_of(const fs::path& p, size_t lines) {
  std::ifstream in(p);
  std::deque<std::string> last;
  std::string l;
  while (std::getline(in, l)) {
    last.push_back(l);
    if (last.size() > lines) last.pop_front();
  }
  std::string out;
  for (const auto& s : last)
    out += s + "\n";
  return out;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

}  // namespace

SlurmCluster::SlurmCluster(const ClusterOptions& options) : script_(slurm_cluster_script()) {
  const std::string host = short_hostname();
  if (options.nodes <= 1) {
    nodes_ = {host};
  } else {
    for (int i = 1; i <= options.nodes; ++i)
      nodes_.push_back(host + std::to_string(i));
  }
  if (geteuid() != 0) throw std::runtime_error("a real Slurm cluster needs root");
  std::string tmpl = "/tmp/triage-e2e-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  state_ = tmpl;
  chmod(state_.c_str(), 0755);  // the test user reads slurm.conf and reaches munge's socket

  for (const char* name : {kUser, kOtherUser}) {
    const CommandResult user = run_command({script_, "add-user", name});
    if (!user.ok())
      throw std::runtime_error("cannot create user " + std::string(name) + ": " + user.output);
    const passwd* pw = getpwnam(name);
    if (pw == nullptr) throw std::runtime_error("no passwd entry for " + std::string(name));
    const bool first = std::string(name) == kUser;
    (first ? uid_ : other_uid_) = pw->pw_uid;
    (first ? gid_ : other_gid_) = pw->pw_gid;
  }

  std::vector<std::string> argv = {
      script_,         "up",
      "--state",       state_,
      "--ctld-port",   std::to_string(free_port()),
      "--slurmd-port", std::to_string(free_port(static_cast<int>(nodes_.size()))),
      "--node",        host,
      "--nodes",       std::to_string(nodes_.size()),
      "--owner-pid",   std::to_string(getpid())};
  if (!options.plugin.empty()) argv.insert(argv.end(), {"--plugin", options.plugin});
  if (!options.plugin_args.empty()) argv.insert(argv.end(), {"--plugin-args", options.plugin_args});
  if (!options.plugin_more.empty()) argv.insert(argv.end(), {"--plugin-more", options.plugin_more});
  if (options.accounting) {
    argv.insert(argv.end(), {"--accounting", "--db-port", std::to_string(free_port()), "--dbd-port",
                             std::to_string(free_port())});
  }
  if (options.topology) argv.push_back("--topology");
  if (!options.agent.empty()) argv.insert(argv.end(), {"--agent", options.agent});
  if (!options.agent_config.empty()) {
    argv.insert(argv.end(), {"--agent-config", options.agent_config});
  }
  if (!options.agent.empty()) {
    argv.insert(argv.end(),
                {"--agent-port", std::to_string(free_port(static_cast<int>(nodes_.size())))});
  }
  if (!options.analyzer.empty()) argv.insert(argv.end(), {"--analyzer", options.analyzer});
  for (const auto& kv : options.agent_settings)
    argv.insert(argv.end(), {"--agent-set", kv});
  const CommandResult up = run_command(argv, std::chrono::seconds(180));
  if (!up.ok()) {
    const std::string why = "slurm-cluster up failed (exit " + std::to_string(up.exit_code) +
                            (up.timed_out ? ", timed out" : "") + "):\n" + up.output;
    run_command({script_, "down", "--state", state_}, std::chrono::seconds(60));
    throw std::runtime_error(why);
  }
  up_ = true;
  // libslurm in this process (the agent's SlurmClient) and every command below use it.
  setenv("SLURM_CONF", conf().c_str(), 1);
}

SlurmCluster::~SlurmCluster() {
  if (up_) run_command({script_, "down", "--state", state_}, std::chrono::seconds(120));
  if (std::getenv("TRIAGE_KEEP_CLUSTER_STATE") == nullptr) {
    std::error_code ec;
    fs::remove_all(state_, ec);
  }
}

std::string SlurmCluster::triage_dir(const std::string& node) const {
  if (nodes_.size() == 1) return state_ + "/triage";
  return state_ + "/triage/" + (node.empty() ? nodes_.front() : node);
}

std::string SlurmCluster::socket_path(const std::string& node) const {
  return triage_dir(node) + "/run/agent.sock";
}

std::string SlurmCluster::inbox_dir(const std::string& node) const {
  return triage_dir(node) + "/spool/inbox";
}

void SlurmCluster::stop_daemon(const std::string& name) const {
  const CommandResult r = run_command({script_, "stop", name, "--state", state_});
  if (!r.ok()) throw std::runtime_error("stopping " + name + ": " + r.output);
}

uid_t SlurmCluster::uid_of(const std::string& user) const {
  if (user != kUser && user != kOtherUser) throw std::runtime_error("unknown test user " + user);
  return user == kUser ? uid_ : other_uid_;
}

gid_t SlurmCluster::gid_of(const std::string& user) const {
  if (user != kUser && user != kOtherUser) throw std::runtime_error("unknown test user " + user);
  return user == kUser ? gid_ : other_gid_;
}

std::string SlurmCluster::make_job_dir(const std::string& name, const std::string& user) const {
  const fs::path dir = fs::path(state_) / "home" / name;
  fs::create_directories(dir);
  if (chown(dir.c_str(), uid_of(user), gid_of(user)) != 0)
    throw std::runtime_error("chown " + dir.string());
  chmod(dir.c_str(), 0755);
  return dir.string();
}

CommandResult SlurmCluster::as_user(const std::string& dir, const std::vector<std::string>& argv,
                                    const std::vector<std::string>& env,
                                    milliseconds timeout) const {
  return as(kUser, dir, argv, env, timeout);
}

CommandResult SlurmCluster::as(const std::string& user, const std::string& dir,
                               const std::vector<std::string>& argv,
                               const std::vector<std::string>& env, milliseconds timeout) const {
  std::vector<std::string> full = {"runuser", "-u", user, "--", "env", "SLURM_CONF=" + conf()};
  full.insert(full.end(), env.begin(), env.end());
  full.insert(full.end(), argv.begin(), argv.end());
  return run_command(full, timeout, dir);
}

CommandResult SlurmCluster::as_root(const std::vector<std::string>& argv) const {
  return run_command(argv, std::chrono::seconds(60), "", {"SLURM_CONF=" + conf()});
}

uint32_t SlurmCluster::sbatch(const std::string& dir, const std::vector<std::string>& args,
                              const std::vector<std::string>& env) const {
  return sbatch_as(kUser, dir, args, env);
}

uint32_t SlurmCluster::sbatch_as(const std::string& user, const std::string& dir,
                                 const std::vector<std::string>& args,
                                 const std::vector<std::string>& env) const {
  std::vector<std::string> argv = {"sbatch", "--parsable"};
  argv.insert(argv.end(), args.begin(), args.end());
  const CommandResult r = as(user, dir, argv, env);
  const std::string out = trim(r.output);
  if (!r.ok() || out.empty() ||
      !std::all_of(out.begin(), out.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    throw std::runtime_error("sbatch failed: " + r.output);
  }
  return static_cast<uint32_t>(std::stoul(out));
}

std::map<std::string, std::string> SlurmCluster::job(uint32_t id) const {
  return job(std::to_string(id));
}

std::map<std::string, std::string> SlurmCluster::job(const std::string& spec) const {
  std::map<std::string, std::string> fields;
  const CommandResult r = as_root({"scontrol", "show", "job", "-o", spec});
  if (!r.ok()) return fields;
  // Values may hold spaces (Command=..., paths): a word that looks like Key= starts a field,
  // any other word continues the previous value.
  std::istringstream words(trim(r.output));
  std::string word;
  std::string current;
  while (words >> word) {
    const size_t eq = word.find('=');
    const bool is_key =
        eq != std::string::npos && eq > 0 &&
        std::all_of(word.begin(), word.begin() + static_cast<std::ptrdiff_t>(eq), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) != 0 || ch == ':' || ch == '/';
        });
    if (is_key) {
      current = word.substr(0, eq);
      fields[current] = word.substr(eq + 1);
    } else if (!current.empty()) {
      fields[current] += " " + word;
    }
  }
  return fields;
}

std::string SlurmCluster::wait_job(uint32_t id, milliseconds timeout) const {
  static const std::vector<std::string> done = {"COMPLETED", "FAILED",    "CANCELLED",
                                                "TIMEOUT",   "NODE_FAIL", "OUT_OF_MEMORY",
                                                "PREEMPTED", "BOOT_FAIL", "DEADLINE"};
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string state;
  while (std::chrono::steady_clock::now() < deadline) {
    const auto f = job(id);
    const auto it = f.find("JobState");
    state = it == f.end() ? "" : it->second;
    if (std::find(done.begin(), done.end(), state) != done.end()) return state;
    std::this_thread::sleep_for(milliseconds(100));
  }
  throw std::runtime_error("job " + std::to_string(id) + " did not finish (state " + state + ")\n" +
                           logs());
}

void SlurmCluster::wait_running(uint32_t id, milliseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (job(id)["JobState"] == "RUNNING") return;
    std::this_thread::sleep_for(milliseconds(100));
  }
  throw std::runtime_error("job " + std::to_string(id) + " never ran\n" + logs());
}

std::string SlurmCluster::node_state() const {
  return trim(as_root({"sinfo", "-h", "-n", node(), "-o", "%T"}).output);
}

std::string SlurmCluster::node_reason() const {
  return trim(as_root({"sinfo", "-h", "-n", node(), "-o", "%E"}).output);
}

std::vector<nlohmann::json> SlurmCluster::inbox_messages(uint32_t job_id) const {
  std::vector<nlohmann::json> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(inbox_dir(), ec)) {
    if (e.path().filename().string().front() == '.') continue;
    std::ifstream in(e.path());
    std::string line;
    std::getline(in, line);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("job_id") || j["job_id"] != job_id) continue;
    out.push_back(std::move(j));
  }
  std::sort(out.begin(), out.end(), [](const nlohmann::json& a, const nlohmann::json& b) {
    return a.value("time_usec", int64_t{0}) < b.value("time_usec", int64_t{0});
  });
  return out;
}

void SlurmCluster::clear_inbox() const {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(inbox_dir(), ec))
    fs::remove(e.path(), ec);
}

std::optional<double> SlurmCluster::epilog_ms(uint32_t job_id) const {
  std::ifstream in(state_ + "/log/slurmd.log");
  const std::string id = std::to_string(job_id);
  // "[2026-11-21T13:04:05.600] ..." -> milliseconds since midnight.
  auto ms_of = [](const std::string& line) -> std::optional<double> {
    if (line.size() < 25 || line[0] != '[' || line[11] != 'T' || line[20] != '.')
      return std::nullopt;
    const auto num = [&](size_t pos, size_t len) {
      return std::strtod(line.substr(pos, len).c_str(), nullptr);
    };
    return ((num(12, 2) * 60.0 + num(15, 2)) * 60.0 + num(18, 2)) * 1000.0 + num(21, 3);
  };
  std::optional<double> begin;
  std::string line;
  while (std::getline(in, line)) {
    if (line.find("Running spank/epilog for jobid [" + id + "]") != std::string::npos) {
      begin = ms_of(line);
    } else if (begin && line.ends_with("completed epilog for jobid " + id)) {
      const auto end = ms_of(line);
      if (end) return *end - *begin;
    }
  }
  return std::nullopt;
}

bool accounting_available() {
  return access("/usr/sbin/mariadbd", X_OK) == 0 && access("/usr/sbin/slurmdbd", X_OK) == 0;
}

void SlurmCluster::kernel_line(const std::string& node, const std::string& line) const {
  const std::string file =
      state_ + (nodes_.size() == 1 ? std::string("/kernel.log") : "/kernel-" + node + ".log");
  const auto now = std::chrono::system_clock::now().time_since_epoch();
  const auto usec = std::chrono::duration_cast<std::chrono::microseconds>(now).count();
  const time_t sec = static_cast<time_t>(usec / 1000000);
  tm t{};
  gmtime_r(&sec, &t);
  char stamp[64];
  (void)std::snprintf(stamp, sizeof stamp, "%04d-%02d-%02dT%02d:%02d:%02d,%06lld+00:00 ",
                      t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                      static_cast<long long>(usec % 1000000));
  std::ofstream out(file, std::ios::app);
  out << stamp << line << "\n";
  if (!out.flush()) throw std::runtime_error("cannot append to " + file);
}

std::string SlurmCluster::logs() const {
  std::string out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(state_ + "/log", ec)) {
    if (e.path().extension() != ".log" && e.path().extension() != ".out") continue;
    out += "----- " + e.path().string() + "\n" + tail_of(e.path(), 25);
  }
  return out;
}

}  // namespace triage::testing
