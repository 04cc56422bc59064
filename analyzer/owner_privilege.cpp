#include "analyzer/owner_privilege.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <exception>

#include "common/child_process.h"
#include "common/safe_io.h"

namespace triage {

std::optional<Identity> path_owner(const std::string& path, std::string* error) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0) {
    if (error != nullptr) *error = "stat " + path + ": " + std::strerror(errno);
    return std::nullopt;
  }
  try {
    gid_t gid = st.st_gid;
    Identity id = identity_for_uid(st.st_uid, &gid);
    // The file's group is not necessarily the user's primary group; the passwd one is what a job of
    // this user runs with.
    Identity by_passwd = identity_for_uid(st.st_uid);
    id.gid = by_passwd.gid;
    id.groups = by_passwd.groups;
    return id;
  } catch (const std::exception& e) {
    if (error != nullptr)
      *error = path + " is owned by uid " + std::to_string(st.st_uid) + ": " + e.what();
    return std::nullopt;
  }
}

void become(const Identity& who) {
  if (::geteuid() == who.uid && ::getegid() == who.gid) return;
  drop_privileges_permanently(who);
}

ChildOutcome run_in_child_as(const std::optional<Identity>& who,
                             const std::function<int(std::string& output)>& fn) {
  ChildOutcome out;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0) {
    out.error = std::string("pipe: ") + std::strerror(errno);
    return out;
  }
  UniqueFd result_r(p[0]), result_w(p[1]);
  ChildSpec spec;  // the child shares this process's stdin, stdout and stderr
  spec.inherit_stdin = true;
  spec.stdout_to = ChildOutput::kInherit;
  spec.stderr_to = ChildOutput::kInherit;
  spec.keep_fds = {result_w.get()};  // and nothing else this process holds
  if (who && !(::geteuid() == who->uid && ::getegid() == who->gid)) spec.run_as = who;
  bool truncated = false;
  int status = 0;
  try {
    // The child has no read end (not kept): writing past what the parent reads fails instead of
    // blocking.
    ChildProcess child = ChildProcess::fork_call(spec, [&] {
      std::string result;
      const int st = fn(result);
      write_all(result_w.get(), result);
      return st;
    });
    result_w.reset();
    try {
      out.output = read_fd_limited(result_r.get(), 16u << 20, &truncated);
    } catch (const std::exception& e) {
      out.error = e.what();
    }
    result_r.reset();  // a child still writing past the cap gets EPIPE instead of blocking
    status = child.wait();
  } catch (const std::system_error& e) {
    out.error = e.what();
    return out;
  }
  if (WIFEXITED(status)) {
    out.exit_status = WEXITSTATUS(status);
    out.ok = out.error.empty() && !truncated;
  } else {
    out.error = "child ended by signal " + std::to_string(WTERMSIG(status));
  }
  return out;
}

}  // namespace triage
