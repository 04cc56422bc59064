#include "agent/server/socket_api.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/inotify.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <spdlog/spdlog.h>

#include "common/error.h"
#include "common/json_read.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxRequest = size_t{64} * 1024;
constexpr size_t kMaxInboxFile = size_t{64} * 1024;
constexpr size_t kRequestsPerTurn = 1;

nlohmann::json fail(const std::string& why) {
  return {{"ok", false}, {"error", why}};
}

std::string dump_line(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s += '\n';
  return s;
}

// `mode`: 0666 for SocketPath (anyone may connect; what a peer may do is decided per request from
// SO_PEERCRED), 0600 for the root socket (connecting needs write permission on it).
UniqueFd listen_unix(const std::string& path, mode_t mode) {
  const auto [dir, base] = split_dir_base(path);
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) throw std::system_error(ec, "create socket directory " + dir);
    ::chmod(dir.c_str(), 0755);
  }
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      throw std::runtime_error("socket path " + path + " exists and is not a socket");
    }
    ::unlink(path.c_str());  // a stale socket from an earlier run
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path)
    throw std::runtime_error("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  UniqueFd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd) throw_errno("socket", errno);
  // Linux gives the bound file the socket inode's mode (less the umask): a root socket is never
  // connectable by others, not even between bind and chmod.
  if (::fchmod(fd.get(), mode) != 0) throw_errno("fchmod socket", errno);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw_errno("bind " + path, errno);
  }
  if (::chmod(path.c_str(), mode) != 0) throw_errno("chmod " + path, errno);
  // The root socket's queue is deep: the plugin connects without waiting and goes to the inbox
  // when it is full, and only root can fill it. SocketPath's is shallow on purpose: a user who
  // reconnects without pause keeps any queue full, and a waiting client's connect lands behind a
  // whole queue of the flooder's connections, each accepted and refused in turn (4096 of them
  // were 42 ms at the median on an idle 2-core node, 128 are about 1 ms: bench/agent_flood). A
  // user's client connects blocking, so a full queue makes it wait a moment, never fail.
  const int backlog = mode == 0600 ? 4096 : 128;
  if (::listen(fd.get(), backlog) != 0) throw_errno("listen " + path, errno);
  return fd;
}

// The inbox's file names, sorted; dot files are the plugin's temporaries, not yet renamed into
// place.
std::vector<std::string> inbox_names(int dfd) {
  std::vector<std::string> names;
  try {
    for (DirEntry& e : list_dir_at(dfd)) {
      if (e.name[0] != '.') names.push_back(std::move(e.name));
    }
  } catch (const std::system_error&) {
    names.clear();
  }
  return names;
}

}  // namespace

SocketApi::SocketApi(const AgentConfig& cfg, EventLoop& loop, NodeState& node,
                     const CallerPolicy& callers, Hooks hooks)
    : cfg_(cfg), loop_(loop), node_(node), callers_(callers), hooks_(std::move(hooks)) {}

void SocketApi::open() {
  StreamServer::Options options;
  options.name = "socket";
  options.shares = {cfg_.socket_max_clients, cfg_.socket_reserved_clients,
                    cfg_.socket_max_clients_per_user};
  options.per_peer_reason = "per-uid";
  options.request_timeout_ms = cfg_.socket_timeout_ms;
  options.idle_timeout = true;
  options.write_timeout_ms = cfg_.socket_write_timeout_ms;
  StreamServer::Policy policy;
  policy.classify = [this](const StreamServer::Conn& c) {
    // Without credentials (never seen on Linux) the peer is nobody in particular, and ordinary.
    if (!c.has_cred) return SharePeer{"unknown", false};
    return SharePeer{"uid " + std::to_string(c.uid), callers_.privileged(c.uid)};
  };
  policy.refusal = [this](const StreamServer::Conn& c, const std::string& reason) {
    const std::string why =
        reason == "per-uid" ? "too many connections from uid " + std::to_string(c.uid) +
                                  " (at most " + std::to_string(cfg_.socket_max_clients_per_user) +
                                  " at once); close one and try again"
                            : "the agent serves as many connections as it can (" +
                                  std::to_string(cfg_.socket_max_clients) + "); try again later";
    // Built by hand: a flood of refusals should cost the loop as little as possible.
    return R"({"ok":false,"error":"connection refused: )" + why + R"(","refused":")" + reason +
           "\"}\n";
  };
  server_ = std::make_unique<StreamServer>(
      loop_, options, [this](StreamServer::Conn& c) { return on_input(*server_, c); },
      std::move(policy));
  server_->serve(listen_unix(cfg_.socket_path, 0666));
  open_root_socket(options);
}

void SocketApi::open_root_socket(const StreamServer::Options& socket_options) {
  const std::string path = cfg_.socket_path + std::string(kRootSocketSuffix);
  StreamServer::Options options = socket_options;
  options.name = "root socket";
  // Root only (the file's mode); anyone else who reaches it (a mode changed by hand) holds no
  // share here and is refused at once.
  options.shares = {cfg_.socket_max_clients, 0, 0};
  StreamServer::Policy policy;
  policy.classify = [](const StreamServer::Conn& c) {
    return SharePeer{"uid " + std::to_string(c.uid), c.has_cred && c.uid == 0};
  };
  policy.refusal = [this](const StreamServer::Conn& c, const std::string& reason) {
    const std::string why =
        reason == "per-uid"
            ? "this socket is root's; uid " + std::to_string(c.uid) + " uses " + cfg_.socket_path
            : "the agent serves as many connections as it can (" +
                  std::to_string(cfg_.socket_max_clients) + ")";
    return R"({"ok":false,"error":"connection refused: )" + why + R"(","refused":")" + reason +
           "\"}\n";
  };
  UniqueFd fd;
  try {
    fd = listen_unix(path, 0600);
  } catch (const std::exception& e) {
    spdlog::warn("root socket {}: {}; the plugin uses {} alone", log_text(path), log_text(e.what()),
                 cfg_.socket_path);
    return;
  }
  root_server_ = std::make_unique<StreamServer>(
      loop_, options, [this](StreamServer::Conn& c) { return on_input(*root_server_, c); },
      std::move(policy));
  root_server_->serve(std::move(fd));
}

void SocketApi::stop() {
  if (server_) server_->stop();
  if (root_server_) root_server_->stop();
}

void SocketApi::watch_inbox() {
  std::error_code ec;
  std::filesystem::create_directories(cfg_.inbox_dir, ec);
  if (!ec) ::chmod(cfg_.inbox_dir.c_str(), 0700);
  inotify_.reset(::inotify_init1(IN_NONBLOCK | IN_CLOEXEC));
  if (!inotify_ || ::inotify_add_watch(inotify_.get(), cfg_.inbox_dir.c_str(),
                                       IN_MOVED_TO | IN_CLOSE_WRITE) < 0) {
    spdlog::warn("inbox {}: cannot watch it ({}); scanning every 30 s", cfg_.inbox_dir,
                 std::strerror(errno));
    return;
  }
  loop_.add(inotify_.get(), EPOLLIN, [this](uint32_t) {
    char buf[4096];
    while (::read(inotify_.get(), buf, sizeof buf) > 0) {
    }
    if (!inbox_scan_scheduled_) {
      inbox_scan_scheduled_ = true;
      loop_.after(20, [this] {
        inbox_scan_scheduled_ = false;
        scan_inbox();
      });
    }
  });
}

bool SocketApi::on_input(StreamServer& server, StreamServer::Conn& c) {
  size_t nl = 0;
  size_t handled = 0;
  while ((nl = c.in.find('\n')) != std::string::npos) {
    // One at a time: the rest of a long pipeline waits for the loop's next turn, after the
    // other clients.
    if (handled == kRequestsPerTurn) return true;
    ++handled;
    std::string line = c.in.substr(0, nl);
    c.in.erase(0, nl + 1);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (trim(line).empty()) continue;
    nlohmann::json response;
    if (line.size() > kMaxRequest) {
      ++stats_.rejected["oversized"];
      response = fail("request larger than " + std::to_string(kMaxRequest) + " bytes");
    } else {
      nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
      if (request.is_discarded()) {
        ++stats_.rejected["malformed"];
        response = fail("request is not valid JSON");
      } else if (!request.is_object()) {
        ++stats_.rejected["malformed"];
        response = fail("request must be a JSON object");
      } else {
        try {
          response = handle_request(c.uid, request);
        } catch (const InputError& e) {
          ++stats_.rejected["invalid"];
          response = fail(e.message());
        } catch (const std::exception& e) {
          ++stats_.rejected["internal"];
          spdlog::error("socket: request failed: {}", log_text(e.what()));
          response = fail(std::string("internal error: ") + e.what());
        }
      }
    }
    server.send(c, dump_line(response));
    server.touch(c);
  }
  if (c.in.size() > kMaxRequest) {
    // Without a newline in sight there is no way to resynchronise: answer and hang up.
    ++stats_.rejected["oversized"];
    server.send(c,
                dump_line(fail("request larger than " + std::to_string(kMaxRequest) + " bytes")));
    c.in.clear();
    c.ignore_input = true;
    c.close_after_flush = true;
  }
  return false;
}

nlohmann::json SocketApi::handle_request(uid_t uid, const nlohmann::json& request) {
  const JsonObjectReader r(request, "request", "");
  const std::string op = r.str("op").value_or("");
  if (op.empty()) r.fail("op", "missing");
  if (is_lifecycle_op(op)) return handle_lifecycle(uid, request);
  if (op == "ping") return {{"ok", true}, {"host", cfg_.node_name}};
  if (op == "health") {
    nlohmann::json h = hooks_.health();
    h["ok"] = true;
    return h;
  }
  if (op == "preflight") {
    // The answer names other jobs' processes: only the prolog (root, SlurmUser) asks.
    if (!callers_.privileged(uid)) {
      ++stats_.rejected["forbidden"];
      return fail("permission denied: only root or SlurmUser may ask for a preflight");
    }
    const auto id = r.u64("job_id");
    if (!id || *id == 0) r.fail("job_id", "missing or zero");
    nlohmann::json a = hooks_.preflight(*id, r.str("gpus").value_or(""));
    a["ok"] = true;
    return a;
  }
  if (op == "poke") {
    scan_inbox();
    return {{"ok", true}};
  }
  if (op == "get_job") {
    const auto id = r.u64("job_id");
    if (!id || *id == 0) r.fail("job_id", "missing or zero");
    const JobRecord* j = node_.job(*id);
    // A user learns nothing about jobs that are not theirs, not even whether they exist here.
    if (!callers_.privileged(uid) && (j == nullptr || !j->uid || *j->uid != uid)) {
      ++stats_.rejected["forbidden"];
      return fail("job " + std::to_string(*id) + ": not found or not yours");
    }
    if (j == nullptr)
      return fail("job " + std::to_string(*id) + " is not known on " + cfg_.node_name);
    return {{"ok", true}, {"node", hooks_.evidence(*j)}};
  }
  r.fail("op", "unknown operation '" + printable(op) + "'");
}

nlohmann::json SocketApi::handle_lifecycle(uid_t uid, const nlohmann::json& request) {
  const std::string op = request.at("op").get<std::string>();
  if (!callers_.privileged(uid)) {
    ++stats_.rejected["forbidden"];
    spdlog::warn("socket: uid {} may not post {}", uid, log_text(op));
    return fail("permission denied: only root or SlurmUser may post " + op);
  }
  LifecycleMessage msg = parse_lifecycle(request);
  if (node_.job(msg.job_id) != nullptr && node_.jobs().has_message(msg.job_id, msg.msg_id)) {
    return {{"ok", true}, {"duplicate", true}};
  }
  const int64_t now = now_usec();
  const nlohmann::json record = {{"r", "msg"}, {"m", msg.raw}, {"peer_uid", uid}, {"t", now}};
  if (!node_.spool().append_job(msg.job_id, record)) {
    return fail("not durable, try again later: " + node_.spool().last_error());
  }
  JobRecord& j = node_.jobs().apply(msg, now);
  ++stats_.lifecycle[msg.op];
  if (msg.op == "task_start" || msg.op == "task_exit" || msg.op == "job_end") node_.publish_pids();
  if (msg.op == "job_end") hooks_.job_ended(j);
  return {{"ok", true}};
}

void SocketApi::scan_inbox() {
  const int dfd = ::open(cfg_.inbox_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return;
  UniqueFd dir(dfd);
  for (const std::string& name : inbox_names(dfd))
    apply_inbox_file(dfd, name);
}

void SocketApi::apply_inbox_file(int dfd, const std::string& name) {
  const int fd =
      ::openat(dfd, name.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  struct stat st {};
  std::string refusal;
  UniqueFd f(fd);
  if (fd < 0) {
    refusal = errno == ELOOP ? "a symlink" : std::string("unreadable: ") + std::strerror(errno);
  } else if (::fstat(fd, &st) != 0) {
    refusal = std::string("cannot stat: ") + std::strerror(errno);
  } else if (!S_ISREG(st.st_mode)) {
    refusal = "not a regular file";
  } else if (!callers_.privileged(st.st_uid)) {
    refusal = "owned by uid " + std::to_string(st.st_uid) + ", not root or SlurmUser";
  } else if (st.st_size > static_cast<off_t>(kMaxInboxFile)) {
    refusal = "larger than " + std::to_string(kMaxInboxFile) + " bytes";
  }
  if (!refusal.empty()) {
    ++stats_.inbox_refused;
    spdlog::warn("inbox: refusing {}/{}: {}; removing it", cfg_.inbox_dir, log_text(name),
                 log_text(refusal));
    (void)::unlinkat(dfd, name.c_str(), 0);
    return;
  }
  std::string text;
  try {
    text = read_fd_limited(fd, kMaxInboxFile);
  } catch (const std::exception& e) {
    spdlog::warn("inbox: {}: {}", log_text(name), log_text(e.what()));
    return;
  }
  bool all_durable = true;
  for (std::string_view line : split(text, '\n')) {
    if (trim(line).empty()) continue;
    nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
    nlohmann::json response;
    if (request.is_discarded() || !request.is_object()) {
      response = fail("not a JSON object");
    } else {
      try {
        response = handle_lifecycle(st.st_uid, request);
      } catch (const std::exception& e) {
        response = fail(e.what());
      }
    }
    if (response.value("ok", false)) continue;
    const std::string why = response.value("error", "");
    if (why.rfind("not durable", 0) == 0) {
      all_durable = false;  // keep the file: the spool could not take it yet
    } else {
      ++stats_.inbox_refused;
      spdlog::warn("inbox: {}: dropping a message: {}", log_text(name), log_text(why));
    }
  }
  if (all_durable) {
    ++stats_.inbox_applied;
    (void)::unlinkat(dfd, name.c_str(), 0);
  }
}

}  // namespace triage::agent
