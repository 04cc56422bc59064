#include "analyzer/owner_privilege.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>

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
  (void)std::fflush(stdout);
  (void)std::fflush(stderr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    out.error = std::string("fork: ") + std::strerror(errno);
    ::close(p[0]);
    ::close(p[1]);
    return out;
  }
  if (pid == 0) {
    ::close(p[0]);
    int status = 70;
    std::string result;
    try {
      if (who) become(*who);
      status = fn(result);
    } catch (const std::exception& e) {
      (void)std::fprintf(stderr, "slurm-triage: %s\n", e.what());
      status = 70;
    }
    try {
      write_all(p[1], result);
    } catch (const std::exception&) {
      status = 70;
    }
    (void)std::fflush(stdout);
    (void)std::fflush(stderr);
    ::_exit(status);
  }
  ::close(p[1]);
  bool truncated = false;
  try {
    out.output = read_fd_limited(p[0], 16u << 20, &truncated);
  } catch (const std::exception& e) {
    out.error = e.what();
  }
  ::close(p[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
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
