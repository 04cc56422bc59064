// The local socket (JSON lines, SO_PEERCRED) and the plugin's inbox directory.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "common/error.h"
#include "common/json_read.h"
#include "common/safe_io.h"
#include "common/text.h"
#include "common/time_util.h"

namespace triage::agent {

namespace {

constexpr size_t kMaxRequest = size_t{64} * 1024;
constexpr size_t kMaxInboxFile = size_t{64} * 1024;

nlohmann::json fail(const std::string& why) {
  return {{"ok", false}, {"error", why}};
}

std::string dump_line(const nlohmann::json& j) {
  std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  s += '\n';
  return s;
}

}  // namespace

bool Agent::privileged(uid_t uid) const {
  return uid == 0 || (slurm_uid_ && uid == *slurm_uid_);
}

void Agent::on_socket_input(StreamServer::Conn& c) {
  size_t nl = 0;
  while ((nl = c.in.find('\n')) != std::string::npos) {
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
          spdlog::error("socket: request failed: {}", e.what());
          response = fail(std::string("internal error: ") + e.what());
        }
      }
    }
    socket_->send(c, dump_line(response));
    socket_->touch(c);
  }
  if (c.in.size() > kMaxRequest) {
    // Without a newline in sight there is no way to resynchronise: answer and hang up.
    ++stats_.rejected["oversized"];
    socket_->send(c,
                  dump_line(fail("request larger than " + std::to_string(kMaxRequest) + " bytes")));
    c.in.clear();
    c.ignore_input = true;
    c.close_after_flush = true;
  }
}

nlohmann::json Agent::handle_request(uid_t uid, const nlohmann::json& request) {
  const JsonObjectReader r(request, "request", "");
  const std::string op = r.str("op").value_or("");
  if (op.empty()) r.fail("op", "missing");
  if (is_lifecycle_op(op)) return handle_lifecycle(uid, request);
  if (op == "ping") return {{"ok", true}, {"host", cfg_.node_name}};
  if (op == "health") {
    nlohmann::json h = health_report();
    h["ok"] = true;
    return h;
  }
  if (op == "poke") {
    scan_inbox();
    return {{"ok", true}};
  }
  if (op == "get_job") {
    const auto id = r.u64("job_id");
    if (!id || *id == 0) r.fail("job_id", "missing or zero");
    const JobRecord* j = job(*id);
    // A user learns nothing about jobs that are not theirs, not even whether they exist here.
    if (!privileged(uid) && (j == nullptr || !j->uid || *j->uid != uid)) {
      ++stats_.rejected["forbidden"];
      return fail("job " + std::to_string(*id) + ": not found or not yours");
    }
    if (j == nullptr)
      return fail("job " + std::to_string(*id) + " is not known on " + cfg_.node_name);
    return {{"ok", true}, {"node", node_evidence(*j, 0, 0)}};
  }
  r.fail("op", "unknown operation '" + printable(op) + "'");
}

nlohmann::json Agent::handle_lifecycle(uid_t uid, const nlohmann::json& request) {
  const std::string op = request.at("op").get<std::string>();
  if (!privileged(uid)) {
    ++stats_.rejected["forbidden"];
    spdlog::warn("socket: uid {} may not post {}", uid, op);
    return fail("permission denied: only root or SlurmUser may post " + op);
  }
  LifecycleMessage msg = parse_lifecycle(request);
  if (job(msg.job_id) != nullptr && jobs_.has_message(msg.job_id, msg.msg_id)) {
    return {{"ok", true}, {"duplicate", true}};
  }
  const int64_t now = now_usec();
  const nlohmann::json record = {{"r", "msg"}, {"m", msg.raw}, {"peer_uid", uid}, {"t", now}};
  if (!spool_.append_job(msg.job_id, record)) {
    return fail("not durable, try again later: " + spool_.last_error());
  }
  JobRecord& j = jobs_.apply(msg, now);
  ++stats_.lifecycle[msg.op];
  if (msg.op == "task_start" || msg.op == "task_exit" || msg.op == "job_end") publish_pids();
  if (msg.op == "job_end") on_job_end(j);
  return {{"ok", true}};
}

void Agent::scan_inbox() {
  const int dfd = ::open(cfg_.inbox_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) return;
  UniqueFd dir(dfd);
  std::vector<std::string> names;
  try {
    for (DirEntry& e : list_dir_at(dfd)) {
      // Dot files are the plugin's temporaries, not yet renamed into place.
      if (e.name[0] != '.') names.push_back(std::move(e.name));
    }
  } catch (const std::system_error&) {
    return;
  }
  for (const std::string& name : names) {
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
    } else if (!privileged(st.st_uid)) {
      refusal = "owned by uid " + std::to_string(st.st_uid) + ", not root or SlurmUser";
    } else if (st.st_size > static_cast<off_t>(kMaxInboxFile)) {
      refusal = "larger than " + std::to_string(kMaxInboxFile) + " bytes";
    }
    if (!refusal.empty()) {
      ++stats_.inbox_refused;
      spdlog::warn("inbox: refusing {}/{}: {}; removing it", cfg_.inbox_dir, name, refusal);
      (void)::unlinkat(dfd, name.c_str(), 0);
      continue;
    }
    std::string text;
    try {
      text = read_fd_limited(fd, kMaxInboxFile);
    } catch (const std::exception& e) {
      spdlog::warn("inbox: {}: {}", name, e.what());
      continue;
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
        spdlog::warn("inbox: {}: dropping a message: {}", name, why);
      }
    }
    if (all_durable) {
      ++stats_.inbox_applied;
      (void)::unlinkat(dfd, name.c_str(), 0);
    }
  }
}

}  // namespace triage::agent
