#include "analyzer/tsdb/local_prometheus.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include "analyzer/tsdb/prom_client.h"
#include "analyzer/tsdb/server_guardian.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::tsdb {

namespace {

// Binds 127.0.0.1:port (0 = the kernel's choice) and returns the bound port, or 0 when taken.
uint16_t try_bind(uint16_t port) {
  UniqueFd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s) return 0;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) return 0;
  // listen() as well: a port with a listener on the wildcard address also fails here.
  if (::listen(s.get(), 1) != 0) return 0;
  socklen_t len = sizeof a;
  if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) return 0;
  return ntohs(a.sin_port);
}

std::string sanitize_label(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (out.size() >= 40) break;
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '_';
    out += ok ? c : '_';
  }
  return out.empty() ? "job" : out;
}

}  // namespace

uint16_t pick_free_loopback_port(std::optional<uint16_t> hint) {
  if (hint && *hint != 0) {
    for (unsigned p = *hint; p < static_cast<unsigned>(*hint) + 64 && p <= 65535; ++p) {
      if (try_bind(static_cast<uint16_t>(p)) != 0) return static_cast<uint16_t>(p);
    }
  }
  for (int attempt = 0; attempt < 16; ++attempt) {
    if (const uint16_t p = try_bind(0); p != 0) return p;
  }
  throw LaunchError("no free loopback port to start prometheus on");
}

LocalPrometheus::LocalPrometheus(LaunchOptions options) : options_(std::move(options)) {
  std::string parent = options_.scratch_parent;
  if (parent.empty()) {
    const char* tmp = std::getenv("TMPDIR");
    parent = tmp != nullptr && *tmp == '/' ? tmp : "/tmp";
  }
  std::string templ = parent + "/slurm-triage-tsdb-" + sanitize_label(options_.label) + "-XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) {
    throw LaunchError("cannot create a scratch directory in " + parent + ": " +
                      std::strerror(errno));
  }
  scratch_dir_ = buf.data();
  data_dir_ = scratch_dir_ + "/data";
  config_path_ = scratch_dir_ + "/prometheus.yml";
  log_path_ = scratch_dir_ + "/prometheus.log";
  try {
    if (::mkdir(data_dir_.c_str(), 0700) != 0) throw_errno("mkdir " + data_dir_, errno);
    UniqueFd sd = open_dir(scratch_dir_, true);
    // No scrape targets: the server only answers queries about what is already on disk.
    atomic_write_at(sd.get(), "prometheus.yml",
                    "global:\n  scrape_interval: 1m\nscrape_configs: []\n", 0600);
    ServerGuardian::Spec spec;
    spec.scratch_dir = scratch_dir_;
    spec.binary = options_.binary;
    spec.log_path = log_path_;
    spec.term_grace = options_.stop_grace;
    spec.args = {
        "--config.file=" + config_path_,
        "--storage.tsdb.path=" + data_dir_,
        // Retention counts back from the newest sample, so an old job's blocks would survive the
        // default too; "100y" makes sure nothing is ever deleted from the copy.
        "--storage.tsdb.retention.time=100y",
        // One block size: the server never compacts the copied blocks into bigger ones while we
        // query (that would cost CPU for nothing on a copy that is about to be removed).
        "--storage.tsdb.min-block-duration=2h",
        "--storage.tsdb.max-block-duration=2h",
        "--web.listen-address=127.0.0.1:{port}",
        "--log.level=info",
    };
    guardian_ = std::make_unique<ServerGuardian>(std::move(spec));
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove_all(scratch_dir_, ec);
    throw LaunchError(std::string("cannot prepare a private prometheus: ") + e.what());
  }
}

LocalPrometheus::~LocalPrometheus() {
  stop();
}

void LocalPrometheus::stop() {
  if (guardian_) {
    guardian_->stop();
    guardian_.reset();
  }
}

pid_t LocalPrometheus::server_pid() const {
  return guardian_ ? guardian_->server_pid() : -1;
}
pid_t LocalPrometheus::guardian_pid() const {
  return guardian_ ? guardian_->guardian_pid() : -1;
}

std::string LocalPrometheus::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

std::string LocalPrometheus::log_tail(size_t max_lines) const {
  std::string text;
  try {
    UniqueFd f = open_regular_file(log_path_, true);
    text = read_fd_limited(f.get(), 4 << 20);
  } catch (const std::exception&) {
    return {};
  }
  std::vector<std::string_view> lines;
  for (auto l : split(text, '\n')) {
    if (!trim(l).empty()) lines.push_back(l);
  }
  std::string out;
  const size_t from = lines.size() > max_lines ? lines.size() - max_lines : 0;
  for (size_t i = from; i < lines.size(); ++i) {
    out += printable(truncate_utf8(lines[i], 400));
    out += '\n';
  }
  return out;
}

void LocalPrometheus::start() {
  if (!guardian_) throw LaunchError("the private prometheus was already stopped");
  const int64_t t0 = monotonic_usec();
  std::string last_failure;
  for (int attempt = 0; attempt < 3; ++attempt) {
    port_ = pick_free_loopback_port(attempt == 0 ? options_.port_hint : std::nullopt);
    try {
      guardian_->start_server(port_);
    } catch (const std::system_error& e) {
      throw LaunchError(std::string("cannot run ") + options_.binary + ": " + e.code().message());
    }
    PromClient client(
        url(), PromClientOptions{std::chrono::milliseconds(500), std::chrono::milliseconds(5000)});
    const int64_t deadline =
        monotonic_usec() + static_cast<int64_t>(options_.ready_timeout.count()) * 1000;
    bool ready = false;
    std::optional<std::string> exited;
    while (monotonic_usec() < deadline) {
      if ((exited = guardian_->server_exit())) break;
      if (client.ready(std::chrono::milliseconds(1000))) {
        ready = true;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (ready) {
      // Someone could have taken the port between our probe and the server's bind, and answer
      // /-/ready in its place: make sure the server that answers is the one on our copy.
      std::map<std::string, std::string> flags;
      try {
        flags = client.flags();
      } catch (const PromError& e) {
        throw LaunchError(std::string("the server on ") + url() +
                          " does not answer like ours: " + e.what());
      }
      if (flags["storage.tsdb.path"] != data_dir_) {
        throw LaunchError("port " + std::to_string(port_) +
                          " is answered by another server (storage.tsdb.path " +
                          printable(flags["storage.tsdb.path"]) + "), not by ours");
      }
      startup_seconds_ = static_cast<double>(monotonic_usec() - t0) / 1e6;
      return;
    }
    const std::string tail = log_tail(8);
    if (exited && tail.find("address already in use") != std::string::npos) {
      last_failure = "port " + std::to_string(port_) + " was taken before prometheus could bind it";
      continue;  // the guardian is ready for another start
    }
    if (exited)
      throw LaunchError("prometheus exited (" + *exited + ") before it was ready:\n" + tail);
    throw LaunchError("prometheus was not ready within " +
                      std::to_string(options_.ready_timeout.count() / 1000) + " s:\n" + tail);
  }
  throw LaunchError(last_failure);
}

}  // namespace triage::tsdb
