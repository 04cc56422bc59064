// Following one running job's log as it grows, for the live progress and stall verdicts. Each poll
// hands out only the bytes appended since the last one, cut at the last complete line, as byte
// ranges of an open descriptor: the caller runs scan_log(chunk.fd, plan, {.max_bytes =
// chunk.length}) on exactly them and the follower itself holds no log text.
//
// Root never opens the user's path: every open (and every re-check of what the path names) happens
// in a child that has dropped to the job owner's uid, gid and groups, which passes the descriptor
// back over a socketpair (SCM_RIGHTS); the agent then only fstat()s and pread()s that descriptor.
// That child inherits none of the agent's descriptors (other users' followed logs among them) and
// never opens through /proc, so a log path such as a symlink to /proc/self/fd/N reaches nothing.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/child_process.h"
#include "common/privilege.h"
#include "common/safe_io.h"

namespace triage::agent {

// Where a followed log stands; small, and saved in the agent's spool so that a restarted agent
// resumes without handing out old bytes again.
struct FollowState {
  std::string path;
  uint64_t offset = 0;  // the next byte to hand out
  uint64_t dev = 0;     // the file `offset` belongs to; dev == ino == 0: none opened yet
  uint64_t ino = 0;
  uint64_t size_seen = 0;      // bytes [offset, size_seen) were examined and hold no '\n'
  bool skipping = false;       // inside an over-long line: bytes up to its '\n' are skipped
  uint64_t truncations = 0;    // times the file shrank under the offset
  uint64_t replacements = 0;   // times the path came to name another file
  uint64_t partial_lines = 0;  // over-long lines handed out cut at the cap
  uint64_t skipped_bytes = 0;  // their tails, never handed out
};

nlohmann::json follow_state_json(const FollowState& state);
// Throws InputError naming the field when `j` is not a FollowState saved by follow_state_json.
FollowState follow_state_from_json(const nlohmann::json& j, const std::string& origin);

struct FollowLimits {
  // A line longer than this is handed out cut at this many bytes (marked partial) and the rest of
  // it up to its '\n' is skipped, so a 1 GB line costs neither memory nor a 1 GB scan.
  uint64_t line_cap = uint64_t{1} << 20;
  // At most this many new bytes are examined per poll; a backlog (a resumed agent, a burst) is
  // handed out over several polls, keeping each tick short.
  uint64_t max_bytes_per_poll = uint64_t{64} << 20;
  // The path is re-checked as the owner (a fork) only on a poll where the followed file did not
  // grow or has been unlinked (a rotated-away file goes idle), and at most once every this many
  // polls: a healthy, growing log costs no fork at all.
  unsigned recheck_polls = 6;
  // How long the owner's open may take (a hung network filesystem) before it is given up.
  int open_timeout_ms = 10000;
};

// Bytes [offset, offset + length) of `fd` to scan. poll() leaves the fd's file offset at `offset`;
// the fd stays open until the next poll() or the follower's end.
struct LogChunk {
  int fd = -1;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool partial = false;  // an over-long line cut at FollowLimits::line_cap, not a complete line
};

enum class LogStatus {
  kFollowing,   // the log is open
  kNotYet,      // no file at the path (yet): normal before the job's first output
  kUnreadable,  // the owner cannot open it, or it is not a regular file: `error` says why
};

struct PollResult {
  LogStatus status = LogStatus::kNotYet;
  int err = 0;        // kUnreadable: the errno of the owner's open
  std::string error;  // kUnreadable: "open /x/log: Permission denied"
  // In file order: the replaced file's last complete lines first, then the current file's.
  std::vector<LogChunk> chunks;
  bool truncated = false;  // the file shrank under the offset; following restarted at 0
  bool replaced = false;   // the path names another file now; following restarted at its byte 0
};

// What the owner's child found at a path: an open regular file, or why not.
struct OwnerOpen {
  UniqueFd fd;
  int err = 0;  // 0 when fd is open
  std::string error;
};

// Whether `path` (normalised) names something under /proc or /dev/fd, or /dev/std{in,out,err}:
// the open files of some process, never a job's log.
bool names_proc_descriptor(const std::string& path);

// The child the opener runs in: dropped to `owner` (unless this process is it), standard
// descriptors on /dev/null, killed with this process, and holding `socket` and nothing else.
ChildSpec owner_child_spec(const Identity& owner, int socket);

// Opens `path` for reading as `owner` in a child dropped to that identity (no drop when this
// process already is it) and receives the descriptor over a socketpair; a missing file, a refusal
// or a non-regular file are returned in `err`/`error`. The child holds nothing of this process but
// its end of the socketpair, and a path under /proc or /dev/fd, through one of /proc's descriptor
// links, or to a file on procfs is refused (EACCES or ELOOP) with the path in `error`. Throws
// std::system_error only when the child cannot be run.
OwnerOpen open_as_owner(const std::string& path, const Identity& owner, int timeout_ms);

class LogFollower {
 public:
  LogFollower(FollowState state, Identity owner, const FollowLimits& limits = {});

  // One tick: opens the log if it is not open yet, notices truncation and replacement, and hands
  // out the complete lines appended since the last poll. Throws std::system_error when reading the
  // open descriptor fails or the owner's child cannot be run.
  PollResult poll();

  const FollowState& state() const { return state_; }

 private:
  void open_current(PollResult& result);
  void recheck_path(PollResult& result, uint64_t size, bool grew, bool unlinked);
  void advance(int fd, uint64_t size, PollResult& result);
  void restart_at_zero();

  FollowState state_;
  Identity owner_;
  FollowLimits limits_;
  UniqueFd fd_;
  UniqueFd retired_;  // a replaced file, kept open until the caller has scanned its last chunk
  unsigned polls_since_check_ = 0;
};

}  // namespace triage::agent
