#include "common/privilege.h"

#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <system_error>

namespace triage {

Identity identity_for_uid(uid_t uid, gid_t* gid) {
  long bufsize = ::sysconf(_SC_GETPW_R_SIZE_MAX);
  if (bufsize <= 0) bufsize = 16384;
  std::vector<char> buf(static_cast<size_t>(bufsize));
  struct passwd pw {};
  struct passwd* res = nullptr;
  int rc = 0;
  while ((rc = ::getpwuid_r(uid, &pw, buf.data(), buf.size(), &res)) == ERANGE &&
         buf.size() < (1u << 20)) {
    buf.resize(buf.size() * 2);
  }
  if (rc != 0 || res == nullptr) throw std::runtime_error("unknown uid " + std::to_string(uid));
  Identity id;
  id.uid = uid;
  id.gid = gid != nullptr ? *gid : pw.pw_gid;
  id.user = pw.pw_name;
  int ngroups = 64;
  std::vector<gid_t> groups(static_cast<size_t>(ngroups));
  while (::getgrouplist(pw.pw_name, id.gid, groups.data(), &ngroups) < 0) {
    if (ngroups > 65536) throw std::runtime_error("user " + id.user + " is in too many groups");
    groups.resize(static_cast<size_t>(ngroups) + 16);
    ngroups = static_cast<int>(groups.size());
  }
  groups.resize(static_cast<size_t>(ngroups));
  id.groups = std::move(groups);
  return id;
}

int drop_privileges_raw(const Identity& who, const char** failed_step) noexcept {
  const auto fail = [failed_step](const char* step, int err) {
    *failed_step = step;
    return err;
  };
  if (::setgroups(who.groups.size(), who.groups.data()) != 0) return fail("setgroups", errno);
  if (::setresgid(who.gid, who.gid, who.gid) != 0) return fail("setresgid", errno);
  if (::setresuid(who.uid, who.uid, who.uid) != 0) return fail("setresuid", errno);
  uid_t r = 0, e = 0, s = 0;
  if (::getresuid(&r, &e, &s) != 0 || r != who.uid || e != who.uid || s != who.uid) {
    return fail("uid did not change", EPERM);
  }
  if (who.uid != 0 && ::setuid(0) == 0) return fail("root could be regained after the drop", EPERM);
  return 0;
}

void drop_privileges_permanently(const Identity& who) {
  const char* step = "";
  const int err = drop_privileges_raw(who, &step);
  if (err != 0) throw std::system_error(err, std::generic_category(), step);
}

bool running_as_root() {
  return ::geteuid() == 0;
}

}  // namespace triage
