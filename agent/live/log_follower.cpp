#include "agent/live/log_follower.h"

#include <linux/magic.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "common/child_process.h"
#include "common/json_read.h"

namespace triage::agent {

namespace {

// ---- Opening as the owner ----

// What the owner's child answers, one SOCK_SEQPACKET message; the descriptor rides along.
struct OpenReply {
  int32_t err = 0;
  std::array<char, 240> what{};
};

// Where `path` leads as this process sees it, when that is under /proc or /dev/fd: symlinks are
// followed by hand, so that one into /proc is refused by name even when its target does not exist
// here (the opener's child holds no descriptor such a link could name, so it would read as "no
// log yet"). nullopt otherwise, or when the path cannot be resolved (the open then says why).
std::optional<std::string> proc_target(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p = path;
  for (int hop = 0; hop < 40; ++hop) {
    std::error_code ec;
    const fs::path at = fs::weakly_canonical(p, ec);  // keeps a dangling last symlink's own name
    if (ec) return std::nullopt;
    if (names_proc_descriptor(at.string())) return at.string();
    const fs::path target = fs::read_symlink(at, ec);
    if (ec) return std::nullopt;  // not a symlink: `at` is where the path leads
    p = target.is_absolute() ? target : at.parent_path() / target;
  }
  return std::nullopt;
}

// The child's side: opens `path` with its (dropped) credentials, never through /proc, and sends the
// descriptor or the reason it could not.
void send_open_reply(int sock, const std::string& path) {
  OpenReply reply;
  UniqueFd file;
  try {
    if (const auto leads_to = proc_target(path)) {
      throw std::system_error(EACCES, std::generic_category(),
                              "open " + path + ": refused, it leads to " + *leads_to +
                                  " (a job's log is never read through /proc or /dev/fd)");
    }
    file = open_regular_file_outside_proc(path);
  } catch (const std::system_error& e) {
    reply.err = e.code().value() != 0 ? e.code().value() : EIO;
    (void)std::snprintf(reply.what.data(), reply.what.size(), "%s", e.what());
  }
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  if (file) {
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    const int fd = file.get();
    std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  }
  while (::sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 && errno == EINTR) {
  }
}

// The agent's side: the reply and, when the open worked, the descriptor (close-on-exec).
OwnerOpen receive_open_reply(int sock, const std::string& path) {
  OpenReply reply;
  iovec iov{&reply, sizeof reply};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) std::array<char, CMSG_SPACE(sizeof(int))> control{};
  msg.msg_control = control.data();
  msg.msg_controllen = control.size();
  ssize_t n = 0;
  while ((n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  OwnerOpen out;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
      out.fd.reset(fd);
    }
  }
  if (n != static_cast<ssize_t>(sizeof reply)) {
    out.fd.reset();
    out.err = n < 0 ? errno : EIO;
    out.error = "open " + path + ": the owner's child gave no answer";
  } else if (reply.err != 0 || !out.fd) {
    out.fd.reset();
    out.err = reply.err != 0 ? reply.err : EIO;
    reply.what.back() = '\0';
    out.error = reply.what.data();
  }
  return out;
}

// ---- Reading the descriptor ----

constexpr size_t kBlock = 16384;

// pread of up to `n` bytes at `pos`; fewer only at end of file.
size_t read_at(int fd, char* buf, size_t n, uint64_t pos) {
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, buf + got, n - got, static_cast<off_t>(pos + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw_errno("read followed log", errno);
    if (r == 0) break;
    got += static_cast<size_t>(r);
  }
  return got;
}

// The position of the last '\n' in [from, end), reading backwards from `end` (a line-oriented log
// has one within its last few bytes).
std::optional<uint64_t> last_newline(int fd, uint64_t from, uint64_t end) {
  std::array<char, kBlock> buf;
  while (end > from) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, end - from));
    const uint64_t at = end - n;
    const size_t got = read_at(fd, buf.data(), n, at);
    if (const void* p = ::memrchr(buf.data(), '\n', got))
      return at + static_cast<uint64_t>(static_cast<const char*>(p) - buf.data());
    end = at;
  }
  return std::nullopt;
}

// The position of the first '\n' in [from, end).
std::optional<uint64_t> first_newline(int fd, uint64_t from, uint64_t end) {
  std::array<char, kBlock> buf;
  while (from < end) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, end - from));
    const size_t got = read_at(fd, buf.data(), n, from);
    if (got == 0) break;
    if (const void* p = std::memchr(buf.data(), '\n', got))
      return from + static_cast<uint64_t>(static_cast<const char*>(p) - buf.data());
    from += got;
  }
  return std::nullopt;
}

// Whether the byte before `offset` is still the '\n' that ended the last line handed out: a file
// truncated and rewritten past the offset between two polls usually fails this.
bool still_at_line_start(int fd, uint64_t offset) {
  char c = 0;
  return read_at(fd, &c, 1, offset - 1) == 1 && c == '\n';
}

struct stat fstat_or_throw(int fd) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) throw_errno("stat followed log", errno);
  return st;
}

bool on_procfs(int fd) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0) throw_errno("statfs followed log", errno);
  return fs.f_type == PROC_SUPER_MAGIC;
}

}  // namespace

bool names_proc_descriptor(const std::string& path) {
  const std::string p = std::filesystem::path(path).lexically_normal().string();
  const auto under = [&p](const std::string& dir) {
    return p == dir ||
           (p.size() > dir.size() && p.compare(0, dir.size(), dir) == 0 && p[dir.size()] == '/');
  };
  return under("/proc") || under("/dev/fd") || p == "/dev/stdin" || p == "/dev/stdout" ||
         p == "/dev/stderr";
}

nlohmann::json follow_state_json(const FollowState& s) {
  return {{"path", s.path},
          {"offset", s.offset},
          {"dev", s.dev},
          {"ino", s.ino},
          {"size_seen", s.size_seen},
          {"skipping", s.skipping},
          {"truncations", s.truncations},
          {"replacements", s.replacements},
          {"partial_lines", s.partial_lines},
          {"skipped_bytes", s.skipped_bytes}};
}

FollowState follow_state_from_json(const nlohmann::json& j, const std::string& origin) {
  const JsonObjectReader r(j, origin, "follow");
  FollowState s;
  const auto path = r.str("path");
  if (!path || path->empty()) r.fail("path", "missing");
  s.path = *path;
  s.offset = r.u64("offset").value_or(0);
  s.dev = r.u64("dev").value_or(0);
  s.ino = r.u64("ino").value_or(0);
  s.size_seen = std::max(r.u64("size_seen").value_or(0), s.offset);
  s.skipping = r.boolean("skipping").value_or(false);
  s.truncations = r.u64("truncations").value_or(0);
  s.replacements = r.u64("replacements").value_or(0);
  s.partial_lines = r.u64("partial_lines").value_or(0);
  s.skipped_bytes = r.u64("skipped_bytes").value_or(0);
  return s;
}

ChildSpec owner_child_spec(const Identity& owner, int socket) {
  ChildSpec spec;  // stdin, stdout and stderr on /dev/null: the answer comes over the socket
  spec.stdout_to = ChildOutput::kNull;
  spec.stderr_to = ChildOutput::kNull;
  spec.die_with_parent = true;
  // Its end of the socket is all the child keeps: every log the agent follows for other users
  // stays out of its reach, /proc/self/fd included.
  spec.keep_fds = {socket};
  if (::geteuid() != owner.uid || ::getegid() != owner.gid) spec.run_as = owner;
  return spec;
}

OwnerOpen open_as_owner(const std::string& path, const Identity& owner, int timeout_ms) {
  if (names_proc_descriptor(path)) {
    OwnerOpen out;
    out.err = EACCES;
    out.error = "open " + path +
                ": refused, a job's log is never read through /proc or /dev/fd (another "
                "process's open files)";
    return out;
  }
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    throw_errno("socketpair", errno);
  UniqueFd mine(sv[0]), theirs(sv[1]);
  ChildProcess child = ChildProcess::fork_call(owner_child_spec(owner, theirs.get()), [&] {
    send_open_reply(theirs.get(), path);
    return 0;
  });
  theirs.reset();  // so that a child that dies unanswered reads as end of file, not a hang
  pollfd pfd{mine.get(), POLLIN, 0};
  int ready = 0;
  while ((ready = ::poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready <= 0) {
    child.kill(SIGKILL);
    OwnerOpen out;
    out.err = ETIMEDOUT;
    out.error = "open " + path + ": no answer within " + std::to_string(timeout_ms) + " ms";
    return out;
  }
  OwnerOpen out = receive_open_reply(mine.get(), path);
  (void)child.wait();
  // What arrived is checked again here: whatever the child did, only a regular file outside /proc
  // is followed.
  if (out.fd && !S_ISREG(fstat_or_throw(out.fd.get()).st_mode)) {
    out.fd.reset();
    out.err = EINVAL;
    out.error = path + " is not a regular file";
  } else if (out.fd && on_procfs(out.fd.get())) {
    out.fd.reset();
    out.err = EACCES;
    out.error = path + " is on /proc, not a regular file";
  }
  return out;
}

LogFollower::LogFollower(FollowState state, Identity owner, const FollowLimits& limits)
    : state_(std::move(state)), owner_(std::move(owner)), limits_(limits) {
  limits_.line_cap = std::max<uint64_t>(limits_.line_cap, 1);
  limits_.max_bytes_per_poll = std::max<uint64_t>(limits_.max_bytes_per_poll, 1);
}

PollResult LogFollower::poll() {
  PollResult result;
  retired_.reset();  // the caller has scanned the last poll's chunks
  if (!fd_) {
    open_current(result);
    if (!fd_) return result;
  }
  const struct stat st = fstat_or_throw(fd_.get());
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size < state_.size_seen ||
      (state_.offset > 0 && !state_.skipping && !still_at_line_start(fd_.get(), state_.offset))) {
    result.truncated = true;
    ++state_.truncations;
    restart_at_zero();
  }
  const uint64_t examined_before = state_.size_seen;
  advance(fd_.get(), size, result);
  ++polls_since_check_;
  recheck_path(result, size, state_.size_seen > examined_before, st.st_nlink == 0);
  result.status = fd_ ? LogStatus::kFollowing : result.status;
  for (const LogChunk& c : result.chunks) {
    if (::lseek(c.fd, static_cast<off_t>(c.offset), SEEK_SET) < 0)
      throw_errno("seek followed log", errno);
  }
  return result;
}

void LogFollower::open_current(PollResult& result) {
  OwnerOpen opened = open_as_owner(state_.path, owner_, limits_.open_timeout_ms);
  if (!opened.fd) {
    result.status = opened.err == ENOENT ? LogStatus::kNotYet : LogStatus::kUnreadable;
    result.err = opened.err;
    result.error = std::move(opened.error);
    return;
  }
  const struct stat st = fstat_or_throw(opened.fd.get());
  const auto dev = static_cast<uint64_t>(st.st_dev), ino = static_cast<uint64_t>(st.st_ino);
  if ((state_.dev != 0 || state_.ino != 0) && (state_.dev != dev || state_.ino != ino)) {
    // Replaced while nobody followed it (an agent restart): the old file is out of reach, and
    // every byte of the new one is new.
    result.replaced = true;
    ++state_.replacements;
    restart_at_zero();
  }
  state_.dev = dev;
  state_.ino = ino;
  fd_ = std::move(opened.fd);
  polls_since_check_ = 0;
}

void LogFollower::recheck_path(PollResult& result, uint64_t size, bool grew, bool unlinked) {
  // A growing file is still the writer's; an idle or unlinked one may have been rotated away.
  // Only a caught-up file is switched from, so that none of its complete lines is lost.
  if ((grew && !unlinked) || polls_since_check_ < limits_.recheck_polls) return;
  if (state_.size_seen < size) return;
  polls_since_check_ = 0;
  OwnerOpen opened = open_as_owner(state_.path, owner_, limits_.open_timeout_ms);
  if (!opened.fd && opened.err == ENOENT)
    return;  // gone from the path: the writer may still hold
             // the old file, so it stays followed
  if (opened.fd) {
    const struct stat st = fstat_or_throw(opened.fd.get());
    if (static_cast<uint64_t>(st.st_dev) == state_.dev &&
        static_cast<uint64_t>(st.st_ino) == state_.ino)
      return;
  }
  // The path names another file now (or one the owner may not read): the old one is done with.
  retired_ = std::move(fd_);
  state_.skipped_bytes += state_.size_seen - state_.offset;  // its unterminated tail
  restart_at_zero();
  state_.dev = state_.ino = 0;
  ++state_.replacements;
  result.replaced = true;
  if (!opened.fd) {
    result.status = LogStatus::kUnreadable;
    result.err = opened.err;
    result.error = std::move(opened.error);
    return;
  }
  const struct stat st = fstat_or_throw(opened.fd.get());
  state_.dev = static_cast<uint64_t>(st.st_dev);
  state_.ino = static_cast<uint64_t>(st.st_ino);
  fd_ = std::move(opened.fd);
  advance(fd_.get(), static_cast<uint64_t>(st.st_size), result);
}

void LogFollower::advance(int fd, uint64_t size, PollResult& result) {
  FollowState& s = state_;
  uint64_t from = std::max(s.offset, s.size_seen);  // the first byte not examined yet
  const uint64_t end = std::min(size, from + limits_.max_bytes_per_poll);
  if (end <= from) return;
  if (s.skipping) {
    const auto nl = first_newline(fd, from, end);
    const uint64_t resume = nl ? *nl + 1 : end;
    s.skipped_bytes += resume - s.offset;
    s.offset = s.size_seen = from = resume;
    s.skipping = !nl;
    if (s.skipping) return;
  }
  const uint64_t start = s.offset;
  if (const auto nl = last_newline(fd, from, end)) s.offset = *nl + 1;
  s.size_seen = end;
  uint64_t handed_end = s.offset;
  const bool partial = end - s.offset > limits_.line_cap;
  if (partial) {
    // The pending line is already longer than the cap: its first line_cap bytes go out now (a
    // signature at its start is still seen) and the rest up to its '\n' is skipped.
    ++s.partial_lines;
    handed_end = s.offset + limits_.line_cap;
    s.skipped_bytes += end - handed_end;
    s.offset = end;
    s.skipping = true;
  }
  if (handed_end > start) result.chunks.push_back({fd, start, handed_end - start, partial});
}

void LogFollower::restart_at_zero() {
  state_.offset = 0;
  state_.size_seen = 0;
  state_.skipping = false;
}

}  // namespace triage::agent
