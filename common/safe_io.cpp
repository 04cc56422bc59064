#include "common/safe_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <random>

namespace triage {

UniqueFd& UniqueFd::operator=(UniqueFd&& o) noexcept {
  if (this != &o) reset(o.release());
  return *this;
}

UniqueFd::~UniqueFd() {
  reset();
}

void UniqueFd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

void throw_errno(const std::string& what, int err) {
  throw std::system_error(err, std::generic_category(), what);
}

UniqueFd open_dir_at(int dirfd, const std::string& name, bool nofollow) {
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0);
  const int fd = ::openat(dirfd, name.c_str(), flags);
  if (fd < 0) throw_errno("open directory " + name, errno);
  return UniqueFd(fd);
}

UniqueFd open_dir(const std::string& path, bool nofollow) {
  return open_dir_at(AT_FDCWD, path, nofollow);
}

std::vector<DirEntry> list_dir_at(int dirfd, size_t max_entries, bool* capped) {
  // A fresh open file description, so that reading does not move `dirfd`'s offset.
  const int fd = ::openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) throw_errno("open directory", errno);
  DIR* d = ::fdopendir(fd);
  if (d == nullptr) {
    const int err = errno;
    ::close(fd);
    throw_errno("list directory", err);
  }
  std::vector<DirEntry> out;
  size_t seen = 0;
  errno = 0;
  while (const dirent* e = ::readdir(d)) {
    if (++seen > max_entries) {
      if (capped != nullptr) *capped = true;
      break;
    }
    const std::string_view n = e->d_name;
    if (n != "." && n != "..") out.push_back({std::string(n), e->d_type});
    errno = 0;
  }
  const int err = errno;
  ::closedir(d);
  if (err != 0) throw_errno("list directory", err);
  std::sort(out.begin(), out.end(),
            [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
  return out;
}

std::vector<DirEntry> list_dir(const std::string& path, size_t max_entries, bool* capped) {
  try {
    return list_dir_at(open_dir(path, false).get(), max_entries, capped);
  } catch (const std::system_error& e) {
    throw_errno("list " + path, e.code().value());
  }
}

namespace {

// `fd` (opened O_NONBLOCK as `name`) when it is a regular file, made blocking again; else an error
// saying what it is.
UniqueFd only_regular(UniqueFd f, const std::string& name) {
  struct stat st {};
  if (::fstat(f.get(), &st) != 0) throw_errno("stat " + name, errno);
  if (!S_ISREG(st.st_mode)) {
    const char* what = S_ISDIR(st.st_mode)    ? "a directory"
                       : S_ISFIFO(st.st_mode) ? "a FIFO"
                       : S_ISSOCK(st.st_mode) ? "a socket"
                       : S_ISCHR(st.st_mode)  ? "a character device"
                       : S_ISBLK(st.st_mode)  ? "a block device"
                                              : "not a regular file";
    throw std::system_error(EINVAL, std::generic_category(),
                            name + " is " + what + ", not a regular file");
  }
  // Regular files never block; reads should behave normally from here on.
  const int fl = ::fcntl(f.get(), F_GETFL);
  if (fl >= 0) (void)::fcntl(f.get(), F_SETFL, fl & ~O_NONBLOCK);
  return f;
}

// O_NONBLOCK so that a FIFO planted where a file should be cannot block us in open().
constexpr int kReadRegular = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;

}  // namespace

UniqueFd open_regular_file_at(int dirfd, const std::string& name, bool nofollow) {
  const int fd = ::openat(dirfd, name.c_str(), kReadRegular | (nofollow ? O_NOFOLLOW : 0));
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP && nofollow)
      throw_errno("open " + name + " (refusing to follow a symlink)", err);
    throw_errno("open " + name, err);
  }
  return only_regular(UniqueFd(fd), name);
}

UniqueFd open_regular_file_outside_proc(const std::string& path) {
  open_how how{};
  how.flags = kReadRegular;
  how.resolve = RESOLVE_NO_MAGICLINKS;
  long fd = ::syscall(SYS_openat2, AT_FDCWD, path.c_str(), &how, sizeof how);
  if (fd < 0 && (errno == ENOSYS || errno == E2BIG)) {
    // No openat2 (before 5.6): the procfs check below still catches /proc's own files; a magic
    // link then reaches only what the calling process holds (the log opener's child: nothing).
    fd = ::openat(AT_FDCWD, path.c_str(), kReadRegular);
  }
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP) {
      throw_errno(
          "open " + path + " (refusing a path through /proc's descriptor links, or a symlink loop)",
          err);
    }
    throw_errno("open " + path, err);
  }
  UniqueFd f(static_cast<int>(fd));
  struct statfs fs {};
  if (::fstatfs(f.get(), &fs) != 0) throw_errno("statfs " + path, errno);
  if (fs.f_type == PROC_SUPER_MAGIC) {
    throw std::system_error(EACCES, std::generic_category(),
                            path + " is on /proc, not a regular file");
  }
  return only_regular(std::move(f), path);
}

UniqueFd open_regular_file(const std::string& path, bool nofollow) {
  return open_regular_file_at(AT_FDCWD, path, nofollow);
}

std::string read_fd_limited(int fd, size_t max_bytes, bool* truncated) {
  std::string out;
  if (truncated != nullptr) *truncated = false;
  char buf[65536];
  while (out.size() < max_bytes) {
    const size_t want = std::min(sizeof buf, max_bytes - out.size());
    const ssize_t n = ::read(fd, buf, want);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("read", errno);
    }
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
  if (truncated != nullptr) {
    char probe = 0;
    ssize_t n = 0;
    do {
      n = ::read(fd, &probe, 1);
    } while (n < 0 && errno == EINTR);
    *truncated = n > 0;
  }
  return out;
}

void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("write", errno);
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void atomic_write_at(int dirfd, const std::string& name, std::string_view data, mode_t mode) {
  if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..") {
    throw std::system_error(EINVAL, std::generic_category(), "bad file name '" + name + "'");
  }
  std::random_device rd;
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    tmp = "." + name + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
    fd = ::openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST) throw_errno("create " + tmp, errno);
  }
  if (fd < 0) throw_errno("create temporary for " + name, EEXIST);
  UniqueFd f(fd);
  try {
    write_all(fd, data);
    // The umask may have narrowed the mode; the caller's mode is what the reader expects.
    if (::fchmod(fd, mode) != 0) throw_errno("chmod " + tmp, errno);
    if (::fsync(fd) != 0) throw_errno("fsync " + tmp, errno);
    f.reset();
    if (::renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0)
      throw_errno("rename to " + name, errno);
  } catch (...) {
    (void)::unlinkat(dirfd, tmp.c_str(), 0);
    throw;
  }
  (void)::fsync(dirfd);
}

std::pair<std::string, std::string> split_dir_base(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  if (slash == 0) return {"/", path.substr(1)};
  return {path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace triage
