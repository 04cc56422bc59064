#include "tests/agent/test_support.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "agent/net/munge_auth.h"
#include "common/build_config.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent::testing {

int connect_tcp(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

namespace fs = std::filesystem;

TempDir::TempDir(const std::string& tag) {
  std::string tmpl = "/tmp/triage-" + tag + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = tmpl;
  ::chmod(path_.c_str(), 0755);
}

TempDir::~TempDir() {
  if (std::getenv("TRIAGE_TEST_KEEP") != nullptr) return;  // for post-mortems
  std::error_code ec;
  fs::remove_all(path_, ec);
}

void write_file(const std::string& path, const std::string& content, mode_t mode) {
  make_dirs(fs::path(path).parent_path().string());
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write " + path);
    out << content;
  }
  ::chmod(path.c_str(), mode);
}

void append_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app | std::ios::binary);
  out << text;
  if (!out.good()) throw std::runtime_error("cannot append to " + path);
}

std::string iso_line(int64_t usec, const std::string& message) {
  const time_t sec = static_cast<time_t>(usec / 1000000);
  tm t{};
  gmtime_r(&sec, &t);
  char buf[64];
  (void)std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d,%06lld+00:00 ",
                      t.tm_year + 1900, t.tm_mon + 1, t.tm_mday, t.tm_hour, t.tm_min, t.tm_sec,
                      static_cast<long long>(usec % 1000000));
  return buf + message + "\n";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void make_dirs(const std::string& path, mode_t mode) {
  std::error_code ec;
  fs::create_directories(path, ec);
  ::chmod(path.c_str(), mode);
}

std::optional<JobFacts> FakeSlurm::load_job(uint64_t job_id, std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  ++load_job_calls_;
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    error = "Invalid job id specified";
    return std::nullopt;
  }
  return it->second;
}

std::optional<SlurmNodeState> FakeSlurm::load_node(const std::string& node, std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    error = "Invalid node name specified";
    return std::nullopt;
  }
  return it->second;
}

std::map<std::string, std::string> FakeSlurm::node_addresses(const std::vector<std::string>& nodes,
                                                             std::string&) {
  std::lock_guard<std::mutex> l(mu_);
  ++node_table_loads_;
  std::map<std::string, std::string> out;
  for (const std::string& n : nodes) {
    auto it = nodes_.find(n);
    if (it != nodes_.end()) out[n] = it->second.addr.empty() ? n : it->second.addr;
  }
  return out;
}

int FakeSlurm::node_table_loads() const {
  std::lock_guard<std::mutex> l(mu_);
  return node_table_loads_;
}

void FakeSlurm::set_before_drain(std::function<void(SlurmNodeState&)> fn) {
  std::lock_guard<std::mutex> l(mu_);
  before_drain_ = std::move(fn);
}

bool FakeSlurm::label_preflight_drain(const std::string& node, const std::string& reason,
                                      std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    error = "Invalid node name specified";
    return false;
  }
  it->second.drain = true;
  it->second.state = "DRAINING";
  it->second.reason = reason;
  preflight_labels_.emplace_back(node, reason);
  return true;
}

std::vector<std::pair<std::string, std::string>> FakeSlurm::preflight_labels() const {
  std::lock_guard<std::mutex> l(mu_);
  return preflight_labels_;
}

bool FakeSlurm::drain_node(const std::string& node, const std::string& why, std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    error = "Invalid node name specified";
    return false;
  }
  if (before_drain_) before_drain_(it->second);
  if (it->second.drain || it->second.down) {
    error = "node is already drained or down";
    return false;
  }
  it->second.drain = true;
  it->second.state = "DRAINING";
  it->second.reason = "triage: " + why;
  drains_.emplace_back(node, why);
  return true;
}

bool FakeSlurm::undrain_node(const std::string& node, const std::string& expected_reason,
                             std::string& error) {
  std::lock_guard<std::mutex> l(mu_);
  auto it = nodes_.find(node);
  if (it == nodes_.end()) {
    error = "Invalid node name specified";
    return false;
  }
  if (!it->second.drain || it->second.reason != expected_reason) {
    error = "node is not drained with that reason";
    return false;
  }
  it->second.drain = false;
  it->second.state = it->second.down ? "DOWN" : "IDLE";
  it->second.reason.clear();
  undrains_.push_back(node);
  return true;
}

std::vector<std::string> FakeSlurm::undrains() const {
  std::lock_guard<std::mutex> l(mu_);
  return undrains_;
}

void FakeSlurm::set_job(JobFacts facts) {
  std::lock_guard<std::mutex> l(mu_);
  jobs_[facts.job_id] = std::move(facts);
}

void FakeSlurm::set_node(SlurmNodeState state) {
  std::lock_guard<std::mutex> l(mu_);
  nodes_[state.name] = std::move(state);
}

std::vector<std::pair<std::string, std::string>> FakeSlurm::drains() const {
  std::lock_guard<std::mutex> l(mu_);
  return drains_;
}

int FakeSlurm::load_job_calls() const {
  std::lock_guard<std::mutex> l(mu_);
  return load_job_calls_;
}

SlurmCommandResult FakeSlurm::run_command(const std::vector<std::string>& argv) {
  std::lock_guard<std::mutex> l(mu_);
  commands_.push_back(command_line(argv));
  SlurmCommandResult r;
  auto arg = [&](const std::string& prefix) {
    for (const std::string& a : argv) {
      if (a.rfind(prefix, 0) == 0) return a.substr(prefix.size());
    }
    return std::string();
  };
  if (!argv.empty() && argv[0] == "sinfo") {
    for (const auto& [name, n] : nodes_) {
      std::string state = to_lower(n.state);
      r.out += "debug|";
      r.out += name;
      r.out += "|";
      r.out += state;
      r.out += "|";
      r.out += n.reason.empty() ? "none" : n.reason;
      r.out += "\n";
    }
    r.ok = true;
    return r;
  }
  if (argv.size() >= 2 && argv[0] == "scontrol" && argv[1] == "reboot") {
    auto it = nodes_.find(argv.back());
    if (it == nodes_.end()) {
      r.error = "Invalid node name specified";
      return r;
    }
    it->second.drain = true;
    it->second.state = "DRAINING";
    it->second.reason = arg("reason=");
    r.ok = true;
    return r;
  }
  if (argv.size() >= 3 && argv[0] == "scontrol" && argv[1] == "update") {
    auto it = nodes_.find(arg("NodeName="));
    if (it == nodes_.end()) {
      r.error = "Invalid node name specified";
      return r;
    }
    const std::string state = arg("State=");
    if (state == "RESUME") {
      it->second = SlurmNodeState{it->first, "IDLE"};
    } else if (state == "DOWN") {
      it->second.down = true;
      it->second.drain = false;
      it->second.state = "DOWN";
      it->second.reason = arg("Reason=");
    } else {
      r.error = "unexpected update";
      return r;
    }
    r.ok = true;
    return r;
  }
  r.error = "FakeSlurm does not run " + command_line(argv);
  return r;
}

std::vector<std::string> FakeSlurm::commands() const {
  std::lock_guard<std::mutex> l(mu_);
  return commands_;
}

void FakeSlurm::complete_reboot(const std::string& node) {
  std::lock_guard<std::mutex> l(mu_);
  SlurmNodeState& n = nodes_.at(node);
  n.drain = false;
  n.down = true;
  n.state = "DOWN";
  n.reason += " : reboot issued : reboot complete";
}

AgentConfig test_config(const std::string& dir, const std::string& node, const std::string& extra) {
  make_dirs(dir + "/proc");
  make_dirs(dir + "/sys");
  std::string text =
      "NodeName=" + node + "\n" + "SpoolDir=" + dir + "/spool\n" + "SocketPath=" + dir +
      "/agent.sock\n" + "HttpAddress=127.0.0.1\nHttpPort=0\nKernelSource=none\n" +
      "ProcRoot=" + dir + "/proc\n" + "SysfsRoot=" + dir + "/sys\n" + "CgroupRoot=" + dir +
      "/cgroup\nDStateWholeNodeInterval=0\n" + "AnalyzerPath=" + fake_analyzer_in(dir) + "\n" +
      "EvidenceSettleDelay=0\nPeerFetchTimeout=5s\nDStatePersistentAfter=0\n" + extra;
  ConfigLoad load = load_agent_config_text(text, "test.conf");
  if (!load.errors.empty()) throw std::runtime_error(load.errors.front().what());
  AgentConfig c = load.config;
  c.dstate_interval_ms = 100;
  c.sysfs_interval_ms = 100;
  c.dstate_read_timeout_ms = 300;
  c.sysfs_read_timeout_ms = 300;
  return c;
}

namespace {

std::string unix_exchange(const std::string& path, const std::string& line) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return "";
  }
  std::string data = line;
  if (data.empty() || data.back() != '\n') data += '\n';
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  std::string answer = read_answer(fd, true);
  ::close(fd);
  if (const size_t nl = answer.find('\n'); nl != std::string::npos) answer.resize(nl);
  return answer;
}

std::string tcp_exchange(int port, const std::string& request) {
  const int fd = connect_tcp(port);
  if (fd < 0) return "";
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer = read_answer(fd, false);
  ::close(fd);
  return answer;
}

// Runs `fn` in a child dropped to `uid` and returns what it produced.
std::string as_child(uid_t uid, const std::function<std::string()>& fn) {
  int p[2];
  if (::pipe(p) != 0) return "";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(p[0]);
    drop_to(uid);
    const std::string out = fn();
    size_t off = 0;
    while (off < out.size()) {
      const ssize_t n = ::write(p[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(p[1]);
  std::string out = read_answer(p[0], false);
  ::close(p[0]);
  ::waitpid(pid, nullptr, 0);
  return out;
}

HttpAnswer parse_http(const std::string& raw) {
  HttpAnswer a;
  const size_t end = raw.find("\r\n\r\n");
  a.head = raw.substr(0, end);
  if (end != std::string::npos) a.body = raw.substr(end + 4);
  if (raw.size() > 12)
    a.status = static_cast<int>(std::strtol(raw.substr(9, 3).c_str(), nullptr, 10));
  return a;
}

std::string get_request(const std::string& target, const std::string& auth) {
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  if (!auth.empty()) req += "Authorization: " + auth + "\r\n";
  return req + "\r\n";
}

}  // namespace

std::string socket_request(const std::string& socket_path, const std::string& line,
                           std::optional<uid_t> as_uid) {
  if (!as_uid) return unix_exchange(socket_path, line);
  return as_child(*as_uid, [&] { return unix_exchange(socket_path, line); });
}

nlohmann::json socket_json(const std::string& socket_path, const nlohmann::json& request,
                           std::optional<uid_t> as_uid) {
  const std::string answer = socket_request(socket_path, request.dump(), as_uid);
  nlohmann::json j = nlohmann::json::parse(answer, nullptr, false);
  if (j.is_discarded()) return {{"ok", false}, {"error", "no JSON answer: '" + answer + "'"}};
  return j;
}

HttpAnswer http_get(int port, const std::string& target, const std::string& auth,
                    std::optional<uid_t> as_uid, const std::string& munge_socket) {
  if (!as_uid) return parse_http(tcp_exchange(port, get_request(target, auth)));
  return parse_http(as_child(*as_uid, [&] {
    std::string a = auth;
    if (!munge_socket.empty()) {
      std::string error;
      const auto cred = munge_credential(munge_socket, target, error);
      if (!cred) return std::string("HTTP/1.1 000 munge failed: ") + error;
      a = "Munge " + *cred;
    }
    return tcp_exchange(port, get_request(target, a));
  }));
}

HttpAnswer http_get_from(const std::string& source, int port, const std::string& target,
                         const std::string& auth) {
  const int fd = connect_tcp_from(source, port);
  if (fd < 0) return {};
  const std::string request = get_request(target, auth);
  (void)!::send(fd, request.data(), request.size(), MSG_NOSIGNAL);
  std::string answer = read_answer(fd, false);
  ::close(fd);
  return parse_http(answer);
}

PeerEvidenceAgent::PeerEvidenceAgent(const std::string& tag, const std::string& extra)
    : h(tag, "node001", extra) {}

::testing::AssertionResult PeerEvidenceAgent::start() {
  if (!munge.ok()) return ::testing::AssertionFailure() << "munged did not start";
  h.config.munge_socket = munge.socket();
  h.start();
  const nlohmann::json started = socket_json(
      h.socket(), lifecycle("job_start", kJob, "m1",
                            {{"uid", kNobody}, {"gid", kNobody}, {"nodelist", "node001"}}));
  if (started["ok"] != true)
    return ::testing::AssertionFailure() << "job_start: " << started.dump();
  if (!h.agent().ingest({make_event("boot-a:7", "gpu-ras-uncorrectable", now_usec())}, "c7"))
    return ::testing::AssertionFailure() << "the event was not ingested";
  return ::testing::AssertionSuccess();
}

HttpAnswer http_get_munged(int port, const std::string& target, const std::string& munge_socket,
                           const std::string& payload) {
  std::string error;
  const auto cred = munge_credential(munge_socket, payload.empty() ? target : payload, error);
  if (!cred) throw std::runtime_error(error);
  return http_get(port, target, "Munge " + *cred);
}

void write_proc_tree(const std::string& root, const std::vector<FakeProcess>& procs,
                     uint64_t procs_blocked) {
  make_dirs(root);
  write_file(root + "/stat", "cpu  1 2 3 4\nprocs_running 3\nprocs_blocked " +
                                 std::to_string(procs_blocked) + "\n");
  for (const FakeProcess& p : procs) {
    const std::string dir = root + "/" + std::to_string(p.pid);
    std::ostringstream stat;
    stat << p.pid << " (" << p.comm << ") " << p.state << " 1 " << p.pid << " " << p.pid
         << " 0 -1 4194560 100 0 0 0 5 3 0 0 20 0 1 0 " << p.start_ticks
         << " 12345678 1234 18446744073709551615\n";
    write_file(dir + "/stat", stat.str());
    if (p.wchan != "<fifo>") write_file(dir + "/wchan", p.wchan);
    write_file(dir + "/cgroup", p.cgroup);
  }
}

void write_sysfs_tree(const std::string& root, const std::vector<FakeGpu>& gpus) {
  for (const FakeGpu& g : gpus) {
    const std::string dev = root + "/devices/pci0000:00/" + g.address;
    make_dirs(dev + "/ras");
    for (const auto& [block, counts] : g.ras) {
      write_file(
          (std::filesystem::path(dev) / "ras" / (block + "_err_count")).string(),
          "ue: " + std::to_string(counts.first) + "\nce: " + std::to_string(counts.second) + "\n");
    }
    for (const auto& [sev, total] : g.aer) {
      const std::string total_name = sev == "correctable" ? "TOTAL_ERR_COR"
                                     : sev == "fatal"     ? "TOTAL_ERR_FATAL"
                                                          : "TOTAL_ERR_NONFATAL";
      write_file((std::filesystem::path(dev) / ("aer_dev_" + sev)).string(),
                 "RxErr 0\nBadTLP " + std::to_string(total) + "\n" + total_name + " " +
                     std::to_string(total) + "\n");
    }
    const std::string card = root + "/class/drm/card" + std::to_string(g.card);
    make_dirs(card);
    std::error_code ec;
    fs::create_symlink("../../../devices/pci0000:00/" + g.address, card + "/device", ec);
    make_dirs(root + "/class/drm/card" + std::to_string(g.card) + "-DP-1");
    make_dirs(root + "/bus/pci/devices");
    fs::create_symlink("../../../devices/pci0000:00/" + g.address,
                       root + "/bus/pci/devices/" + g.address, ec);
  }
}

std::optional<double> metric_value(const std::string& text, const std::string& series) {
  size_t pos = 0;
  while ((pos = text.find(series + " ", pos)) != std::string::npos) {
    if (pos == 0 || text[pos - 1] == '\n') {
      return std::strtod(text.c_str() + pos + series.size() + 1, nullptr);
    }
    pos += series.size();
  }
  return std::nullopt;
}

nlohmann::json field(const nlohmann::json& record, const std::string& key) {
  if (!record.is_object() || !record.contains(key)) return nullptr;
  return record.at(key);
}

bool eventually(const std::function<bool()>& pred, int ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

namespace {

// `program` copied to `dir`/`name`, in a directory (mode 0755) any user can enter.
std::string copy_program(const std::string& program, const std::string& dir,
                         const std::string& name) {
  make_dirs(dir);
  std::string copy = dir + "/" + name;
  fs::copy_file(program, copy, fs::copy_options::overwrite_existing);
  ::chmod(copy.c_str(), 0755);
  return copy;
}

}  // namespace

std::string fake_analyzer_in(const std::string& dir) {
  return copy_program(FAKE_ANALYZER_PATH, dir + "/bin", "fake_analyzer");
}

std::string analyzer_cli_in(const std::string& dir) {
  const std::string root = dir + "/analyzer";
  const std::string binary = copy_program(TRIAGE_CLI_PATH, root, "slurm-triage.bin");
  fs::copy(kSourceRulesDir, root + "/rules", fs::copy_options::recursive);
  ::chmod((root + "/rules").c_str(), 0755);
  for (const auto& e : fs::recursive_directory_iterator(root + "/rules"))
    ::chmod(e.path().c_str(), e.is_directory() ? 0755 : 0644);
  std::string wrapper = root + "/slurm-triage";
  write_file(wrapper,
             "#!/bin/sh\nSLURM_TRIAGE_DATADIR='" + root + "' exec '" + binary + "' \"$@\"\n", 0755);
  return wrapper;
}

std::string cli_path() {
  return TRIAGE_CLI_PATH;
}

nlohmann::json lifecycle(const std::string& op, uint64_t job_id, const std::string& msg_id,
                         nlohmann::json fields) {
  fields["op"] = op;
  fields["job_id"] = job_id;
  fields["msg_id"] = msg_id;
  return fields;
}

std::vector<nlohmann::json> analysis_summaries(const std::string& spool, uint64_t job) {
  std::vector<nlohmann::json> out;
  const std::string text = read_file(spool + "/jobs/" + std::to_string(job) + ".jsonl");
  for (std::string_view line : split(text, '\n')) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("r", "") == "analysis") out.push_back(j);
  }
  return out;
}

KernelEvent make_event(const std::string& id, const std::string& kind, int64_t time_usec,
                       const std::string& boot_id) {
  KernelEvent e;
  e.id = id;
  e.kind = kind;
  e.severity = Severity::kError;
  e.boot_id = boot_id;
  e.time_usec = time_usec;
  e.last_usec = time_usec;
  e.lines = {"kernel: " + kind + " " + id};
  return e;
}

AgentHarness::AgentHarness(const std::string& tag, const std::string& node,
                           const std::string& extra)
    : dir_(tag) {
  config = test_config(dir_.path(), node, extra);
  options.boot_id = "boot-a";
  options.collectors = false;
  auto slurm = std::make_unique<FakeSlurm>();
  slurm_ = slurm.get();
  options.health_commands = [fake = slurm_](const std::vector<std::string>& argv) {
    return fake->run_command(argv);
  };
  slurm_owned_ = std::move(slurm);
}

AgentHarness::~AgentHarness() {
  stop();
}

void AgentHarness::start() {
  agent_ = std::make_unique<Agent>(config, std::move(slurm_owned_), options);
  agent_->start();
  agent_->run_in_background();
}

void AgentHarness::stop() {
  if (!agent_) return;
  agent_->stop();
  agent_.reset();
}

}  // namespace triage::agent::testing
